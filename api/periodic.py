"""Work `serve` runs on a schedule: the full re-verification of every fabric (issue 12).

The incremental gate is checked against the whole-fabric verifier every
`ISOFABRIC_FULL_VERIFY_INTERVAL_SECONDS` (0 turns it off); a disagreement is logged at ERROR and
kept on the fabric's verification resource (tenancy/full_check.py). The check runs in a worker
thread so the event loop keeps answering.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.concurrency import run_in_threadpool

from tenancy.full_check import full_check_all
from tenancy.uow import UnitOfWork

log = logging.getLogger(__name__)


async def _every(interval: float, uow: UnitOfWork) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            checks = await run_in_threadpool(full_check_all, uow)
        except Exception:  # the schedule must survive a failed run (a busy database, a bug)
            log.exception("the periodic full re-verification failed; it runs again later")
            continue
        disagreeing = [c.fabric for c in checks if not c.matches]
        log.info("full re-verification of %d fabric(s); disagreeing: %s", len(checks), disagreeing)


@asynccontextmanager
async def full_verification_schedule(uow: UnitOfWork) -> AsyncIterator[None]:
    """Run `full_check_all` every configured interval while the block runs."""
    interval = uow.settings.full_verify_interval_seconds
    task = asyncio.create_task(_every(interval, uow)) if interval > 0 else None
    try:
        yield
    finally:
        if task is not None:
            task.cancel()
