"""Is this server ready for traffic? The checks behind ``/readyz``.

Ready means: the database answers, its schema is at this version's newest migration, and the
keys are installed (the signing key file, the active key; the OpenSM secret). The liveness probe
(``/healthz``) checks none of this: a server whose database is down stays alive and keeps
retrying, and a load balancer only stops sending it traffic.
"""

from __future__ import annotations

import logging

from policies.errors import NotReadyError
from tenancy.schemas.health import ReadinessChecks, ReadinessView
from tenancy.store.db import STORAGE_ERRORS, storage_error_detail
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import scheduler, signing_keys
from tenancy.usecases.bootstrap import database_revision, head_revision, known_revisions

log = logging.getLogger("isofabric")
# What /readyz says of an unreachable database. It needs no token, so the driver's text (hosts,
# ports, users, paths) goes to the server's log only.
DATABASE_UNREACHABLE = "database unreachable (the server's log says why)"
# Where a caller without an operator's or auditor's token learns why a check fails.
SHOWN_WITH_A_TOKEN = "an operator's or auditor's token shows why"


def check(
    uow: UnitOfWork, *, database_error: str | None = None, detailed: bool = True
) -> ReadinessView:
    """Check every readiness condition; the view lists the latest scheduled runs.

    `database_error` is why this server could not prepare the database yet (it retries):
    the database then counts as unreachable without being asked again. Without `detailed`
    (a caller who may not read the configuration), a failing check is named with its state
    only: no file path, schema revision or driver text.

    Raises:
        NotReadyError: naming each condition that does not hold (``not_ready``), and, when
            `detailed`, the key files that are missing (``missing``), if any.
    """
    revision: str | None = None
    if database_error is None:
        try:
            revision = database_revision(uow.engine)
        except STORAGE_ERRORS as error:
            database_error = storage_error_detail(error)
            log.warning("not ready: database unreachable: %s", database_error)
    if database_error is not None:  # one given by the server was logged when it changed
        raise NotReadyError(f"not ready: {DATABASE_UNREACHABLE}", not_ready=[DATABASE_UNREACHABLE])
    if revision != head_revision():
        reason = _migration_reason(revision) if detailed else "migrations: not at head"
        raise _not_ready([reason], detailed)
    _require_keys(uow, detailed)
    return ReadinessView(
        status="ready",
        checks=ReadinessChecks(
            database="ok", migrations="ok", signing_key="ok", opensm_secret="ok"
        ),
        schema_revision=revision,
        scheduled_jobs=scheduler.latest_runs(uow),
    )


def _migration_reason(revision: str | None) -> str:
    head = head_revision()
    if revision is not None and revision not in known_revisions():
        return (
            f"migrations not at head: the database is at revision {revision}, newer than this "
            f"version knows (its newest is {head}): run the version that migrated it"
        )
    return (
        f"migrations not at head: the database is at revision {revision or 'none'}, this "
        f"version's newest is {head} (it migrates at start, or run `isofabric db upgrade`)"
    )


def _require_keys(uow: UnitOfWork, detailed: bool) -> None:
    problems = signing_keys.readiness_by_check(uow)
    if not problems:
        return
    if not detailed:
        raise _not_ready([f"{check}: missing or unusable" for check in problems], detailed)
    reasons = [p.detail for p in problems.values()]
    missing = [name for p in problems.values() for name in p.extensions.get("missing", [])]
    raise NotReadyError("not ready: " + "; ".join(reasons), not_ready=reasons, missing=missing)


def _not_ready(reasons: list[str], detailed: bool) -> NotReadyError:
    said = "; ".join(reasons) if detailed else f"{'; '.join(reasons)} ({SHOWN_WITH_A_TOKEN})"
    return NotReadyError(f"not ready: {said}", not_ready=reasons)
