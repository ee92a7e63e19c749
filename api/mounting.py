"""Serving a router's routes on an app: the route objects its module built, shared by every app."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI


def serve_routes(app: FastAPI, *routers: APIRouter) -> None:
    """Serve the routes of `routers` on `app`, in order, after those it already serves.

    `app.include_router` would give every app its own copy of each route, which FastAPI
    (0.165) builds when the first request reaches that router: about 90 ms for the /v1
    routers, paid again by every new app (one per test). A router's routes are complete once
    its module is imported (prefix, tags, dependencies: api/deps.py `authorized_router`), so
    every app serves those same objects, read-only. What `include_router` would add is
    therefore not available: its dependencies, prefix and tags, and `app.dependency_overrides`.
    """
    for router in routers:
        app.router.routes.extend(router.routes)
