"""The FastAPI application factory."""

from __future__ import annotations

import logging

from fastapi import Depends, FastAPI
from sqlalchemy import Engine

from api.auth import BearerTokenAuth
from api.deps import authorize, bearer_scheme, require_json_body
from api.limits import BodySizeLimit
from api.problems import install_problem_handlers
from api.routes import (
    allocations,
    audit_log,
    config_audits,
    fabrics,
    grants,
    keys,
    nodes,
    proofs,
    qos,
    services,
    tenants,
    tokens,
    topology,
    usage,
    verification,
)
from tenancy import signing_keys
from tenancy.bootstrap import prepare_database
from tenancy.db import make_engine
from tenancy.settings import Settings, load_settings
from tenancy.uow import Clock, UnitOfWork, system_clock

log = logging.getLogger("isofabric.api")
DESCRIPTION = """\
isofabric maps tenants to InfiniBand partitions (P_Keys) with QoS classes, proves that tenants
are isolated before any change is committed, and renders the files OpenSM consumes.
Errors are RFC 9457 `application/problem+json`; lists are `{"data", "count", "next"}`.
"""
# Mounted in this order, which is also the order of the paths in the OpenAPI document.
AUTHORIZED_ROUTERS = (
    fabrics.router,
    topology.router,
    nodes.router,
    services.router,
    verification.router,
    qos.router,
    tenants.router,
    allocations.router,
    grants.router,
    audit_log.router,
    tokens.router,
    config_audits.router,
    usage.router,
)
# These routers carry the authorization dependencies themselves.
SELF_AUTHORIZED_ROUTERS = (proofs.router, keys.router)


def create_app(
    settings: Settings | None = None, *, engine: Engine | None = None, clock: Clock = system_clock
) -> FastAPI:
    """Build the app: migrate and seed the database, wire routes, problems and limits."""
    settings = settings or load_settings()
    engine = engine or make_engine(settings.database_url)
    prepare_database(engine)
    app = FastAPI(title="isofabric", version="0.1.0", description=DESCRIPTION)
    app.state.uow = UnitOfWork(engine, settings, clock)
    install_problem_handlers(app)
    for router in AUTHORIZED_ROUTERS:
        # Every /v1 route is authorized against the RBAC policy (policies/authz.py), then its
        # JSON body (if it takes one) must be sent as JSON: 415 otherwise.
        app.include_router(
            router,
            dependencies=[Depends(bearer_scheme), Depends(authorize), Depends(require_json_body)],
        )
    for router in SELF_AUTHORIZED_ROUTERS:
        app.include_router(router, dependencies=[Depends(require_json_body)])
    # Added last = outermost: authentication runs before the size limit and any body parsing.
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(BearerTokenAuth, token=settings.admin_token, uow=app.state.uow)

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    def readyz() -> dict[str, str]:
        # Ready = able to sign and render: the signing key and the OpenSM secret are installed.
        # The service never creates them (replicas would race); 503 names each missing file
        # and `isofabric keys create`.
        signing_keys.require_ready(app.state.uow)
        return {"status": "ready"}

    log_readiness(app.state.uow)
    return app


def log_readiness(uow: UnitOfWork) -> None:
    """Say at start-up what keeps the service from signing or rendering (as /readyz would)."""
    for problem in signing_keys.readiness(uow):
        log.warning("not ready: %s", problem.detail)
