"""The measured parts of the change benchmark that one client runs (bench_changes runs them).

Each part prints its figures and records its targets on the `Scoreboard`; none asserts on time.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import httpx2

from tests.benchmarks.bench_server import BYTES_ROUTE
from tests.benchmarks.change_client import (
    MET,
    NOT_AVAILABLE,
    NOT_MET,
    Api,
    BenchError,
    Scoreboard,
    allocate_and_release,
    create_tenant,
    figure,
    median,
)
from tests.benchmarks.change_fabrics import FabricShape

ALLOCATION_LIMIT = 1.5  # x the small fabric's p50
READ_LIMIT = 2.0  # x the pre-built bytes route's median
READ_BUDGET_SECONDS = 60.0  # per route: fewer samples (at least MIN_SAMPLES) when it is slow
MIN_SAMPLES = 5
CHANGESET_TENANTS, CHANGESET_NODES = 1_000, 8
CHANGESET_LIMIT_SECONDS = 10.0
# Past this the change set counts as not met; the server is stopped with the request pending.
CHANGESET_TIMEOUT_SECONDS = 120.0
READS = (
    ("GET verification", "verification"),
    ("GET partitions.conf", "artifacts/opensm/partitions.conf"),
)


def bench_tenant(fabric: str) -> str:
    """The tenant whose allocations the allocation part times on `fabric`."""
    return f"bench-{fabric}"


def settle(api: Api, shapes: Sequence[FabricShape], label: str) -> None:
    """Create each fabric's bench tenant; record each bulk-built state through the product.

    The starting state was inserted directly, so the service never verified nor recorded it
    (audit log, snapshot log). One allocate-1 / release pair over HTTP per fabric makes the
    commit gate do so, and warms the server; it is printed, not counted.
    """
    for shape in shapes:
        create_tenant(api, bench_tenant(shape.name))
        allocated, released = allocate_and_release(api, bench_tenant(shape.name), shape.name)
        figure(f"first allocation, {shape.name} ({label})", allocated, "s")
        figure(f"first release, {shape.name} ({label})", released, "s")


def allocation(
    api: Api, board: Scoreboard, label: str, shapes: tuple[FabricShape, FabricShape], samples: int
) -> None:
    """Allocation p50 on the large fabric against the small one's (target: within 1.5x).

    Pairs alternate between the fabrics, so noise from other work on the machine falls on both.
    Each allocation of one node is released at once (timed too, reported only).
    """
    large, small = shapes
    allocations: dict[str, list[float]] = {large.name: [], small.name: []}
    releases: dict[str, list[float]] = {large.name: [], small.name: []}
    for _ in range(samples):
        for shape in (small, large):
            allocated, released = allocate_and_release(api, bench_tenant(shape.name), shape.name)
            allocations[shape.name].append(allocated)
            releases[shape.name].append(released)
    for shape in (small, large):
        times = allocations[shape.name]
        figure(f"allocation p50, {shape.name} ({label})", median(times), "s")
        figure(f"allocation min / max, {shape.name}", min(times), f"s / {max(times):.3f} s")
        figure(f"release p50, {shape.name} ({label})", median(releases[shape.name]), "s")
    board.ratio(
        f"allocation p50 {large.name} within {ALLOCATION_LIMIT:g}x {small.name} ({label}, "
        f"n={samples})",
        median(allocations[large.name]),
        median(allocations[small.name]),
        ALLOCATION_LIMIT,
    )


def reads(api: Api, board: Scoreboard, label: str, fabric: str, samples: int) -> None:
    """GET verification and GET partitions.conf against the pre-built bytes route (target: 2x).

    The bytes route returns an object of the same size and media type, behind the same
    authentication; requests alternate between the two and the medians are compared.
    """
    for title, rest in READS:
        path = f"/v1/fabrics/{fabric}/{rest}"
        first = _get(api, path)  # warm-up; gives the size and media type to match
        baseline = BYTES_ROUTE.format(size=len(first.content))
        params = {"media": first.headers["content-type"]}
        _get(api, baseline, params)  # builds the bytes object
        route_times, baseline_times = _alternate(api, path, (baseline, params), samples)
        figure(f"{title} median ({label})", median(route_times), "s")
        figure("  same-size bytes route median", median(baseline_times), "s")
        print(f"  {len(first.content) / 1e6:.2f} MB, {len(route_times)} requests each")
        board.ratio(
            f"{title} on {fabric} within {READ_LIMIT:g}x the bytes route ({label}, "
            f"n={len(route_times)})",
            median(route_times),
            median(baseline_times),
            READ_LIMIT,
        )


def _get(api: Api, path: str, params: dict[str, str] | None = None) -> httpx2.Response:
    response, _ = api.timed("GET", path, params=params)
    if response.status_code != 200:
        raise BenchError(f"GET {path}: {response.status_code}: {response.text[:300]}")
    return response


def _alternate(
    api: Api, path: str, baseline: tuple[str, dict[str, str]], samples: int
) -> tuple[list[float], list[float]]:
    """Times of `path` and of the baseline, alternating, within READ_BUDGET_SECONDS."""
    route_times: list[float] = []
    baseline_times: list[float] = []
    deadline = time.monotonic() + READ_BUDGET_SECONDS
    while len(route_times) < samples:
        if len(route_times) >= MIN_SAMPLES and time.monotonic() > deadline:
            break
        start = time.perf_counter()
        _get(api, path)
        route_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        _get(api, *baseline)
        baseline_times.append(time.perf_counter() - start)
    return route_times, baseline_times


def changeset_operations(fabric: str) -> list[dict[str, object]]:
    """1,000 new tenants (kinds and QoS classes in turn), each allocated 8 nodes on `fabric`."""
    operations: list[dict[str, object]] = []
    for index in range(CHANGESET_TENANTS):
        name = f"cs-{index:04d}"
        kind = ("internal", "external")[index % 2]
        qos = ("gold", "silver", "bronze")[index % 3]
        operations.append({"op": "create_tenant", "name": name, "kind": kind, "qos_class": qos})
        operations.append(
            {"op": "allocate", "tenant": name, "fabric": fabric, "count": CHANGESET_NODES}
        )
    return operations


def changeset(api: Api, board: Scoreboard, label: str, fabric: str) -> None:
    """One change set onboarding 1,000 tenants x 8 nodes, end to end (target: under 10 s)."""
    target = (
        f"change set of {CHANGESET_TENANTS:,} tenants x {CHANGESET_NODES} nodes on {fabric} "
        f"under {CHANGESET_LIMIT_SECONDS:g} s ({label})"
    )
    operations = changeset_operations(fabric)
    body = {"operations": operations, "dry_run": False}
    try:
        response, seconds = api.timed(
            "POST", "/v1/changesets", json=body, timeout=CHANGESET_TIMEOUT_SECONDS
        )
    except httpx2.TimeoutException:
        board.record(target, NOT_MET, f"no answer within {CHANGESET_TIMEOUT_SECONDS:g} s")
        return
    if response.status_code in (404, 405):
        print(f"change sets: NOT AVAILABLE (POST /v1/changesets answered {response.status_code})")
        board.record(target, NOT_AVAILABLE, f"POST /v1/changesets: {response.status_code}")
        return
    if response.status_code not in (200, 201):
        raise BenchError(f"POST /v1/changesets: {response.status_code}: {response.text[:300]}")
    results = response.json().get("results", [])
    if len(results) != len(operations):
        raise BenchError(f"{len(results)} results for {len(operations)} operations")
    figure(f"change set, {len(operations):,} operations ({label})", seconds, "s")
    holds = api.expect(200, "GET", f"/v1/fabrics/{fabric}/verification")[0]["holds"]
    print(f"  verification after the change set: holds={holds}")
    status = MET if seconds < CHANGESET_LIMIT_SECONDS and holds else NOT_MET
    board.record(target, status, f"{seconds:.2f} s, limit {CHANGESET_LIMIT_SECONDS:g} s")
