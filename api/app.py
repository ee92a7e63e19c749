"""The FastAPI application factory."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI
from sqlalchemy import Engine

from api import health
from api.auth import BearerTokenAuth
from api.docs import DESCRIPTION, install_docs
from api.dry_run import dry_run_answer
from api.heavy_processes import install_heavy_processes
from api.idempotency import IdempotencyKeys
from api.limits import BodySizeLimit, HeavyWorkLimit
from api.metrics import install_metrics
from api.mounting import serve_routes
from api.problems import install_problem_handlers
from api.request_id import RequestId
from api.routes import (
    allocations,
    audit_log,
    changesets,
    config_audits,
    deploy,
    fabrics,
    grants,
    keys,
    nodes,
    partitions,
    peerings,
    policy,
    proofs,
    qos,
    services,
    snapshots,
    tenants,
    tokens,
    topology,
    usage,
    verification,
)
from api.ufm import install_ufm_api
from api.ui import install_console
from api.verdict_warmer import install_verdict_warmer
from tenancy.gate.what_if import DryRunDone
from tenancy.store.db import checkpoint_wal, make_engine
from tenancy.store.settings import Settings, load_settings
from tenancy.store.uow import Clock, UnitOfWork, system_clock

log = logging.getLogger("isofabric.api")
# Served in this order, which is also the order of the paths in the OpenAPI document.
V1_ROUTERS = (
    changesets.router,
    fabrics.router,
    topology.router,
    nodes.router,
    services.router,
    verification.router,
    snapshots.router,
    deploy.router,
    qos.router,
    tenants.router,
    allocations.router,
    grants.router,
    partitions.router,
    peerings.router,
    audit_log.router,
    tokens.router,
    config_audits.router,
    usage.router,
    policy.router,
    proofs.router,
    keys.router,
)


def create_app(
    settings: Settings | None = None, *, engine: Engine | None = None, clock: Clock = system_clock
) -> FastAPI:
    """Build the app: migrate and seed the database, wire routes, problems and limits.

    A database that does not answer yet does not stop it: api/health.py retries in the lifespan.
    """
    settings = settings or load_settings()
    engine = engine or make_engine(settings.database_url)
    uow = UnitOfWork(engine, settings, clock)
    database = health.start_database(uow)
    lifespan = checkpointing(engine, uow, database)
    app = FastAPI(
        title="isofabric",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # api/docs.py serves /docs from package data, not from a CDN
        redoc_url=None,
    )
    app.state.uow = uow
    app.state.database = database
    app.state.heavy_work = HeavyWorkLimit(settings.heavy_concurrency)
    install_heavy_processes(app)  # heavy requests' parsing and verification, off this process
    install_problem_handlers(app)
    app.add_exception_handler(DryRunDone, dry_run_answer)
    # Every /v1 route is authorized against the RBAC policy (policies/authz.py), then its
    # JSON body (if it takes one) must be sent as JSON: 415 otherwise (api/deps.py).
    serve_routes(app, *V1_ROUTERS)
    install_docs(app)  # /docs, /problems and the error responses of the OpenAPI document
    install_console(app)  # /ui: the web console (api/ui/)
    install_ufm_api(app)  # /ufmRest…: UFM's PKey API for schedulers (api/ufm/)
    # Added last = outermost: the request id is set first (and echoed on every response, 401
    # and 413 included); authentication runs before the size limit and any body parsing; the
    # Idempotency-Key check reads the body under that limit, with the principal known.
    app.add_middleware(IdempotencyKeys, uow=app.state.uow, processes=app.state.heavy_processes)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(BearerTokenAuth, token=settings.admin_token, uow=app.state.uow)
    app.add_middleware(health.DatabaseGate, state=database)  # outside the token check's query
    app.add_middleware(RequestId)
    install_verdict_warmer(app)  # computes a changed fabric's verdict in the background
    install_metrics(app)  # /metrics; outermost middleware: request metrics and the request log
    serve_routes(app, health.router)  # /healthz, /readyz: no token (probes carry none)
    return app


def checkpointing(
    engine: Engine, uow: UnitOfWork, database: health.DatabaseState
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: the database retried, scheduled jobs; SQLite's log folded on shutdown.

    While the app runs, api/health.py prepares a database that did not answer at start, and
    api/periodic.py runs the scheduled jobs (full re-verification, checkpoints). On shutdown,
    SQLite's write-ahead log is folded into the database file.

    After a clean stop the database file alone then holds every committed transaction (a copy
    of it is a complete backup, the -wal file is empty). The engine stays open: an in-memory
    database would not survive its connection's close, and the app may be started again.
    """

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        try:
            async with health.background_work(uow, database):
                yield
        finally:
            if not checkpoint_wal(engine):
                log.warning(
                    "the SQLite write-ahead log was not emptied on shutdown (a reader in another "
                    "process held it): copy the database with `isofabric db backup`, not cp"
                )

    return lifespan
