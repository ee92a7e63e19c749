"""What the change benchmark's parts share: the HTTP client, the calls they time, the targets.

Every request carries the operator's API token (``Authorization: Bearer``), as a deployment's
clients would; the service is never in open mode.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import httpx2

HTTP_TIMEOUT_SECONDS = 600.0
MET, NOT_MET, NOT_AVAILABLE, SKIPPED, FAILED = (
    "MET",
    "NOT MET",
    "NOT AVAILABLE",
    "SKIPPED",
    "FAILED",
)


class BenchError(RuntimeError):
    """The service answered something the benchmark cannot go on with."""


def figure(label: str, value: float, unit: str) -> None:
    """One line in the layout of `tests.benchmarks.timing`."""
    print(f"{label:<38} {value:8.3f} {unit}")


def count(label: str, value: int, unit: str = "") -> None:
    """A whole number in the same layout."""
    print(f"{label:<38} {value:8d} {unit}".rstrip())


def percentile(values: Sequence[float], fraction: float) -> float:
    """The `fraction` quantile (nearest rank) of `values`."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def median(values: Sequence[float]) -> float:
    """The median of `values` (the p50 every target compares)."""
    return statistics.median(values)


class Api:
    """An HTTP client of the service, authenticated as the operator (keep-alive connection)."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url, self.token = base_url, token
        self.client = httpx2.Client(
            base_url=base_url,
            timeout=HTTP_TIMEOUT_SECONDS,
            headers={"Authorization": f"Bearer {token}"},
        )

    def __enter__(self) -> Api:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.client.close()

    def timed(self, method: str, path: str, **kwargs: Any) -> tuple[httpx2.Response, float]:
        """The response and its wall-clock time (request sent to body read), in seconds."""
        start = time.perf_counter()
        response = self.client.request(method, path, **kwargs)
        return response, time.perf_counter() - start

    def expect(self, status: int, method: str, path: str, **kwargs: Any) -> tuple[Any, float]:
        """The JSON body (None if empty) and time of a request that must answer `status`."""
        response, seconds = self.timed(method, path, **kwargs)
        if response.status_code != status:
            raise BenchError(
                f"{method} {path}: {response.status_code} (expected {status}): "
                f"{response.text[:300]}"
            )
        return (response.json() if response.content else None), seconds


def create_tenant(api: Api, name: str) -> None:
    """Onboard an external tenant (QoS gold) for the benchmark's own changes."""
    api.expect(
        201, "POST", "/v1/tenants", json={"name": name, "kind": "external", "qos_class": "gold"}
    )


def allocate(api: Api, tenant: str, fabric: str) -> tuple[dict[str, Any], float]:
    """Allocate one free node to `tenant`; the allocation view and the time."""
    path = f"/v1/tenants/{tenant}/allocations"
    view, seconds = api.expect(201, "POST", path, json={"fabric": fabric, "count": 1})
    return view, seconds


def release(api: Api, tenant: str, allocation_id: str) -> float:
    """Release the allocation; the time."""
    path = f"/v1/tenants/{tenant}/allocations/{allocation_id}"
    return api.expect(204, "DELETE", path)[1]


def allocate_and_release(api: Api, tenant: str, fabric: str) -> tuple[float, float]:
    """One allocate-1 / release pair: the two times (the fabric ends as it started)."""
    view, allocated = allocate(api, tenant, fabric)
    return allocated, release(api, tenant, view["id"])


@dataclass(frozen=True, slots=True)
class Outcome:
    """Whether one target was met, and the figures that say so."""

    target: str
    status: str
    detail: str


@dataclass
class Scoreboard:
    """The targets of issue 12 as they are measured; printed again together at the end."""

    outcomes: list[Outcome] = field(default_factory=list)
    title: str = "the issue 12 targets"

    def record(self, target: str, status: str, detail: str) -> None:
        """Print and keep one target's outcome."""
        self.outcomes.append(Outcome(target, status, detail))
        print(f"TARGET {target}: {status} ({detail})")

    def ratio(self, target: str, measured: float, baseline: float, limit: float) -> None:
        """A target of the form "`measured` within `limit` x `baseline`"."""
        ratio = measured / baseline
        status = MET if ratio <= limit else NOT_MET
        detail = f"ratio {ratio:.2f}x, limit {limit:g}x: {measured:.4f} s vs {baseline:.4f} s"
        self.record(target, status, detail)

    def failed(self) -> bool:
        """Whether any part failed (the benchmark then exits with status 1)."""
        return any(o.status == FAILED for o in self.outcomes)

    def print_summary(self) -> None:
        """Every target's outcome, one a line."""
        print(f"\nsummary of {self.title}")
        for outcome in self.outcomes:
            print(f"  {outcome.status:<13} {outcome.target}: {outcome.detail}")
