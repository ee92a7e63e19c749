"""Sustained mutations: concurrent clients doing allocate-1 / release pairs for a fixed time.

Each client is a thread with its own connection and its own tenant (created for the run, so its
first allocation claims a P_Key and its release gives it back: the server runs with no P_Key
quarantine). A non-2xx answer or a transport error is an error. Duplicates are judged from
what the clients saw: an allocation held, for sure, from the moment its 201 arrived until its
DELETE was sent; two such intervals of different owners must never share an allocation id, a
P_Key or a node.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import httpx2

from tests.benchmarks.change_client import (
    MET,
    NOT_MET,
    Api,
    Scoreboard,
    count,
    create_tenant,
    figure,
    median,
    percentile,
)

CLIENTS = 8
RATE_TARGET = 50.0  # mutations per second


@dataclass(frozen=True, slots=True)
class Holding:
    """An allocation as a client saw it: what it held and when it surely held it."""

    allocation: str
    owner: str  # the tenant
    pkey: str
    nodes: tuple[str, ...]
    start: float
    end: float


class Client(threading.Thread):
    """One client: allocate-1 / release pairs for its own tenant until the deadline."""

    def __init__(
        self, api: Api, tenant: str, fabric: str, start_at: threading.Barrier, seconds: float
    ) -> None:
        super().__init__(daemon=True)
        self.base_url, self.token = api.base_url, api.token
        self.tenant, self.fabric = tenant, fabric
        self.start_at, self.seconds = start_at, seconds
        self.latencies: list[float] = []
        self.holdings: list[Holding] = []
        self.errors: list[str] = []

    def run(self) -> None:
        """Wait for the others, then pair until `seconds` have passed (the last pair ends)."""
        with Api(self.base_url, self.token) as api:
            self.start_at.wait()
            deadline = time.monotonic() + self.seconds
            while time.monotonic() < deadline:
                self._pair(api)

    def _pair(self, api: Api) -> None:
        path = f"/v1/tenants/{self.tenant}/allocations"
        allocated = self._call(api, "POST", path, 201, json={"fabric": self.fabric, "count": 1})
        if allocated is None:
            return
        held_from = time.monotonic()
        view = allocated.json()
        held_to = time.monotonic()  # the DELETE goes out next: held for sure until now
        if self._call(api, "DELETE", f"{path}/{view['id']}", 204) is None:
            held_to = float("inf")  # a failed release may still hold it: held to the end
        pkey = (view.get("segment") or {}).get("pkey", "")
        holding = Holding(view["id"], self.tenant, pkey, tuple(view["nodes"]), held_from, held_to)
        self.holdings.append(holding)

    def _call(
        self, api: Api, method: str, path: str, status: int, **kwargs: object
    ) -> httpx2.Response | None:
        """The response if it is `status`; else None, with the error kept."""
        try:
            response, seconds = api.timed(method, path, **kwargs)
        except httpx2.HTTPError as error:
            self.errors.append(f"{method}: {type(error).__name__}")
            return None
        if response.status_code != status:
            self.errors.append(f"{method}: {response.status_code} {response.text[:120]}")
            return None
        self.latencies.append(seconds)
        return response


def sustained(api: Api, board: Scoreboard, label: str, fabric: str, seconds: float) -> None:
    """8 clients, allocate-1 / release pairs for `seconds` (target: >= 50/s, 0 errors, 0 dups)."""
    barrier = threading.Barrier(CLIENTS + 1)
    clients = []
    for index in range(CLIENTS):
        tenant = f"bench-mutator-{index}"
        create_tenant(api, tenant)
        clients.append(Client(api, tenant, fabric, barrier, seconds))
    for client in clients:
        client.start()
    barrier.wait()
    start = time.perf_counter()
    for client in clients:
        client.join()
    elapsed = time.perf_counter() - start
    _report(api, board, label, fabric, clients, elapsed, seconds)


def _report(
    api: Api,
    board: Scoreboard,
    label: str,
    fabric: str,
    clients: list[Client],
    elapsed: float,
    seconds: float,
) -> None:
    latencies = [s for c in clients for s in c.latencies]
    errors = [e for c in clients for e in c.errors]
    duplicates = find_duplicates(h for c in clients for h in c.holdings)
    rate = len(latencies) / elapsed
    count(f"mutations ({CLIENTS} clients, {label})", len(latencies), f"in {elapsed:.1f} s")
    figure("mutations per second", rate, "/s")
    if latencies:
        figure("mutation p50", median(latencies), "s")
        figure("mutation p99", percentile(latencies, 0.99), "s")
    count("errors (non-2xx or transport)", len(errors))
    count("duplicate identifiers", len(duplicates))
    for line in errors[:5] + duplicates[:5]:
        print(f"  {line}")
    holds = api.expect(200, "GET", f"/v1/fabrics/{fabric}/verification")[0]["holds"]
    print(f"  verification after the run: holds={holds}")
    met = rate >= RATE_TARGET and not errors and not duplicates and holds
    board.record(
        f"sustained mutations on {fabric}, {CLIENTS} clients x {seconds:g} s, >= "
        f"{RATE_TARGET:g}/s, 0 errors, 0 duplicates ({label})",
        MET if met else NOT_MET,
        f"{rate:.2f}/s, p50 {_p(latencies, 0.5)}, p99 {_p(latencies, 0.99)}, "
        f"{len(errors)} errors, {len(duplicates)} duplicates",
    )


def _p(values: list[float], fraction: float) -> str:
    if not values:
        return "n/a"
    return f"{median(values) if fraction == 0.5 else percentile(values, fraction):.3f} s"


def find_duplicates(holdings: Iterable[Holding]) -> list[str]:
    """Allocation ids seen twice, and P_Keys or nodes held by two owners at once."""
    holdings = list(holdings)
    seen = Counter(h.allocation for h in holdings)
    found = [f"allocation id {a} handed out {n} times" for a, n in seen.items() if n > 1]
    by_pkey: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    by_node: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for h in holdings:
        if h.pkey:
            by_pkey[h.pkey].append((h.start, h.end, h.owner))
        for node in h.nodes:
            by_node[node].append((h.start, h.end, h.allocation))
    found += _overlaps("P_Key", by_pkey) + _overlaps("node", by_node)
    return found


def _overlaps(kind: str, intervals: dict[str, list[tuple[float, float, str]]]) -> list[str]:
    """Identifiers of `kind` held by two different owners during overlapping intervals."""
    found = []
    for identifier, spans in intervals.items():
        spans.sort()
        for i, (_, end, owner) in enumerate(spans):
            for other_start, _, other in spans[i + 1 :]:
                if other_start >= end:
                    break
                if other != owner:
                    found.append(f"{kind} {identifier} held by {owner} and {other} at once")
    return found
