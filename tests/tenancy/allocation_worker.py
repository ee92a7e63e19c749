"""The body of one OS process in the concurrency tests (started with multiprocessing 'spawn').

It onboards its own tenants on a shared fabric and allocates for each of them one node by count
and one node by name, recording every outcome as JSON for the parent test, which then
checks the outcomes against the database.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from policies.errors import IsofabricError
from tenancy.schemas import AllocationCreate, AllocationView, TenantCreate
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, tenants


@dataclass
class Outcome:
    worker: int
    tenant: str
    request: str  # "onboard", "count" or "named:<node>"
    status: str  # "ok", "refused" (a domain error) or "crashed" (anything else)
    allocation_id: str | None = None
    nodes: list[str] = field(default_factory=list)
    pkey: str | None = None
    error: str | None = None


def _attempt(
    outcomes: list[Outcome], worker: int, tenant: str, request: str, call: Callable[[], Any]
) -> None:
    try:
        result = call()
    except IsofabricError as error:
        outcomes.append(Outcome(worker, tenant, request, "refused", error=type(error).__name__))
    except Exception as error:  # the parent fails the test on these, with the trace
        trace = "".join(traceback.format_exception(error))
        outcomes.append(Outcome(worker, tenant, request, "crashed", error=trace))
    else:
        outcome = Outcome(worker, tenant, request, "ok")
        if isinstance(result, AllocationView):
            outcome.allocation_id, outcome.nodes = result.id, result.nodes
            outcome.pkey = getattr(result.segment, "pkey", None)
        outcomes.append(outcome)


def run(
    url: str,
    fabric: str,
    worker: int,
    tenant_names: Sequence[str],
    named: Sequence[str],
    start: Any,
    out_path: str,
) -> None:
    """Wait at the `start` barrier, then onboard and allocate; write the outcomes to `out_path`."""
    engine = make_engine(url)
    uow = UnitOfWork(engine, Settings(database_url=url))
    outcomes: list[Outcome] = []
    try:
        start.wait(timeout=120)
        for tenant, node in zip(tenant_names, named, strict=True):
            spec = TenantCreate(name=tenant, kind="external")
            _attempt(
                outcomes, worker, tenant, "onboard", partial(tenants.create_tenant, uow, spec=spec)
            )
            requests = {
                "count": AllocationCreate(fabric=fabric, count=1),
                f"named:{node}": AllocationCreate(fabric=fabric, nodes=[node]),
            }
            for request, allocation in requests.items():
                call = partial(allocations.allocate, uow, tenant_name=tenant, spec=allocation)
                _attempt(outcomes, worker, tenant, request, call)
    finally:
        engine.dispose()
        Path(out_path).write_text(json.dumps([asdict(o) for o in outcomes]))
