"""Liveness and readiness, and a server that outlives its database.

``/healthz`` answers on the event loop and never touches the database: a load balancer or an
orchestrator learns that the process is alive. ``/readyz`` checks what taking traffic needs
(tenancy/usecases/readiness.py) and answers 503 naming each reason while any is missing.

A server whose database does not answer at start keeps running instead of exiting: the
lifespan retries preparing it (migrate, seed) in the background, with growing pauses, and
until then every ``/v1`` request gets a 503 ``database-unavailable`` problem (`DatabaseGate`),
as does one that finds the database gone later (tenancy/store/uow.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import APIRouter, FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.auth import TokenAuthenticator, bearer_of, local_caller
from api.periodic import scheduled_jobs
from api.problems import PROBLEM_RESPONSE, domain_problem
from policies.authz import Role
from policies.errors import DatabaseUnavailableError
from tenancy.gate.full_check import upgrade_digests
from tenancy.schemas.health import HealthView, ReadinessView
from tenancy.store.uow import Principal, UnitOfWork
from tenancy.usecases import readiness, signing_keys
from tenancy.usecases.bootstrap import try_prepare

log = logging.getLogger("isofabric.api")
# Pauses between attempts to prepare an unreachable database: doubling up to the last.
RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0
# Paths that read the database (the API, the metrics' stored state, the console's pages): 503
# until this server has prepared it. The console's static files and the public pages (health,
# docs, problem types) need no database.
GATED_PREFIXES = ("/v1", "/metrics", "/ui")
UNGATED_PREFIXES = ("/ui/static",)

router = APIRouter(tags=["operations"])


@dataclass
class DatabaseState:
    """Whether this server has prepared its database; else the last reason it could not."""

    error: str | None = None

    @property
    def prepared(self) -> bool:
        """The database was migrated and seeded by this server: /v1 routes may use it."""
        return self.error is None


def start_database(uow: UnitOfWork) -> DatabaseState:
    """Prepare the database now if it answers (tests' in-memory SQLite always does).

    On failure the server starts anyway; `keep_preparing` retries in the lifespan.
    """
    state = DatabaseState(error=_prepare(uow))
    if state.prepared:
        log_key_readiness(uow)
    else:
        log.warning("not ready: database unreachable: %s (retrying)", state.error)
    return state


def log_key_readiness(uow: UnitOfWork) -> None:
    """Say what keeps the service from signing or rendering (as /readyz would)."""
    for problem in signing_keys.readiness(uow):
        log.warning("not ready: %s", problem.detail)


def _prepare(uow: UnitOfWork) -> str | None:
    error = try_prepare(uow.engine)
    if error is not None:
        return error
    try:
        upgrade_digests(uow)  # states logged with a v1 digest get their v2 name, once
    except DatabaseUnavailableError as lost:  # gone again since the migration: retry it all
        return lost.detail
    return None


async def keep_preparing(uow: UnitOfWork, state: DatabaseState) -> None:
    """Retry preparing the database until it succeeds (a task of the lifespan)."""
    pause = RETRY_FIRST_SECONDS
    while not state.prepared:
        await asyncio.sleep(pause)
        pause = min(pause * 2, RETRY_MAX_SECONDS)
        try:
            error = await run_in_threadpool(_prepare, uow)
        except Exception as failure:  # a half-migrated database, a bug: keep serving, retry
            log.exception("preparing the database failed; retrying")
            error = f"{type(failure).__name__}: {failure}"
        changed, state.error = error != state.error, error
        if error is not None:
            if changed:
                log.warning("not ready: database unreachable: %s (retrying)", error)
            continue
        log.info("the database answers and is prepared: /v1 requests are served")
        try:
            await run_in_threadpool(log_key_readiness, uow)
        except Exception:  # only a report: the database may have gone again
            log.exception("could not check the keys")


@asynccontextmanager
async def background_work(uow: UnitOfWork, state: DatabaseState) -> AsyncIterator[None]:
    """While the block runs: retry an unprepared database; run the scheduled jobs once ready."""
    retry = None if state.prepared else asyncio.create_task(keep_preparing(uow, state))
    try:
        async with scheduled_jobs(uow, lambda: state.prepared):
            yield
    finally:
        if retry is not None:
            retry.cancel()


def database_state(app: FastAPI) -> DatabaseState:
    """The app's `DatabaseState` (set by the app factory)."""
    state: DatabaseState = app.state.database
    return state


class DatabaseGate:
    """ASGI middleware: a 503 problem, never a 500, while the database is unavailable.

    Before this server prepared the database, no request on a gated path (`GATED_PREFIXES`)
    reaches the app; after, any request that finds the database gone (`DatabaseUnavailableError`,
    raised where no exception handler sees it, e.g. by the token check in front of `/v1`,
    `/metrics` or the console) is answered 503 too.
    """

    def __init__(self, app: ASGIApp, state: DatabaseState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 503 for a gated path when unprepared; else pass on, mapping a late outage."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self.state.prepared and _gated(scope["path"]):
            error = DatabaseUnavailableError(
                "the database is unavailable; retrying, try again later"  # the log has why
            )
            await domain_problem(Request(scope), error)(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except DatabaseUnavailableError as error:
            if started:
                raise
            await domain_problem(Request(scope), error)(scope, receive, send)


def _gated(path: str) -> bool:
    return path.startswith(GATED_PREFIXES) and not path.startswith(UNGATED_PREFIXES)


@router.get(
    "/healthz",
    summary="Liveness: the process answers",
    description=(
        "Answers 200 while the process serves requests; it never touches the database, so a "
        "server whose database is down stays alive (see `/readyz`). Needs no token. Answered "
        "on the event loop, so it stays quick while heavy requests occupy the workers."
    ),
)
async def healthz() -> HealthView:
    """Liveness (async: no worker thread, so busy workers never delay it)."""
    return HealthView(status="ok")


@router.get(
    "/readyz",
    summary="Readiness: the server can take traffic",
    description=(
        "200 when the database answers, its schema is at this version's newest migration and "
        "the keys are installed (signing key file, OpenSM secret); the body lists each check "
        "and the latest run of each scheduled job across the replicas. Otherwise 503 "
        "`not-ready`, whose `not_ready` member names every reason (and `missing` the key "
        "files to create with `isofabric keys create`). Needs no token: point the load "
        "balancer's health check here."
    ),
    responses={503: {**PROBLEM_RESPONSE, "description": "Not ready: `not_ready` says why"}},
)
def readyz(request: Request) -> ReadinessView:
    """Readiness (a worker thread: it queries the database)."""
    state = database_state(request.app)
    uow: UnitOfWork = request.app.state.uow
    detailed = state.prepared and _reads_configuration(request, uow)
    return readiness.check(uow, database_error=state.error, detailed=detailed)


def _reads_configuration(request: Request, uow: UnitOfWork) -> bool:
    """Whether the caller may read why a check fails (key file paths, schema revisions).

    An operator or auditor may (in open mode, a loopback caller); a probe sends no token.
    """
    authenticator = TokenAuthenticator(uow.settings.admin_token, uow)
    try:
        caller = authenticator.authenticate(bearer_of(request), local_caller(request.scope))
    except DatabaseUnavailableError:  # the unit of work's name for every storage error
        return False
    return isinstance(caller, Principal) and caller.role in (Role.OPERATOR, Role.AUDITOR)


# RFC 9110 §9.1: a general-purpose server supports HEAD wherever it supports GET; load balancers'
# health checks often send HEAD (e.g. HAProxy's `http-check send meth HEAD`). FastAPI, unlike
# Starlette's Route, does not add HEAD to GET routes; the server sends no body for a HEAD.
for _path, _endpoint in (("/healthz", healthz), ("/readyz", readyz)):
    router.add_api_route(_path, _endpoint, methods=["HEAD"], include_in_schema=False)
