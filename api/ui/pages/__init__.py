"""Console pages: one module per page group, each an APIRouter under /ui (api/ui/deps.py).

`PAGE_ROUTERS` are mounted in order by `install_console`; add a new page group's router here.
"""

from __future__ import annotations

from fastapi import APIRouter

from api.ui.pages import (
    actions,
    audit_log,
    evidence,
    fabric_map,
    fabrics,
    home,
    matrix,
    sign_in,
    tenants,
)

PAGE_ROUTERS: tuple[APIRouter, ...] = (
    sign_in.router,
    home.router,
    fabrics.router,
    matrix.router,
    fabric_map.router,
    tenants.router,
    actions.router,
    evidence.router,
    audit_log.router,
)
