"""``GET /metrics``: the Prometheus text exposition of the service.

Each app has its own `CollectorRegistry` (never prometheus_client's process-global one: tests and
embedders build many apps). Counted in this process: requests and their latency by method, route
template and status; mutations by outcome; verification durations, reported by tenancy through a
plain callback (tenancy/store/observers.py). Read from the database at scrape time: everything in
api/metrics_state.py. Who may read it is ISOFABRIC_METRICS_ACCESS: ``authenticated`` (the
default; a token whose role reads every fabric, per the RBAC policy in policies/authz.py, or a
loopback client while the service has no token, as for /v1) or ``open`` (anyone: a scraper on a
trusted network). docs/operators/monitoring.md lists the metrics with example alerts.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)

from api.auth import METRICS_PATH
from api.deps import authorize, bearer_scheme
from api.metrics_state import StateCollector
from api.request_observer import Observed, ObserveRequests
from tenancy.store.observers import observe_verifications
from tenancy.store.uow import UnitOfWork

REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# From an incremental check of one tenant (milliseconds) to a whole 100k-port fabric (seconds).
VERIFICATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0)
ROUTE_LABELS = ("method", "route", "status")
# h11 passes any token as a method: a client inventing methods (EVIL1, EVIL2...) must not mint
# new time series, so a method outside RFC 9110's is counted as "other" (label cardinality).
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"})
OTHER_METHOD = "other"


class Metrics:
    """One app's registry and the instruments the process updates."""

    def __init__(self, uow: UnitOfWork) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "isofabric_http_requests",
            "HTTP requests answered, by method, route template (unmatched: no route) and status",
            ROUTE_LABELS,
            registry=self.registry,
        )
        self.latency = Histogram(
            "isofabric_http_request_duration_seconds",
            "Seconds from a request's arrival to the end of its answer, by method, route "
            "template and status",
            ROUTE_LABELS,
            buckets=REQUEST_BUCKETS,
            registry=self.registry,
        )
        self.mutations = Counter(
            "isofabric_mutations",
            "Requests of mutating methods on /v1 routes by method, route template and outcome: "
            "committed, dry_run, replayed (an Idempotency-Key's first answer again), "
            "refused_isolation (409 isolation-violation: the change would break isolation), "
            "refused (any other 4xx) or failed (5xx)",
            ("method", "route", "outcome"),
            registry=self.registry,
        )
        self.ufm_refusals = Counter(
            "isofabric_ufm_refusals",
            "Requests the UFM-compatible API refused, by reason (e.g. pkey-unavailable, "
            "foreign-guid, isolation-violation, invalid-body, unauthenticated, rate-limited); "
            "a scheduler retries a refused write for ever, so a rising count is worth an alert",
            ("reason",),
            registry=self.registry,
        )
        self.verifications = Histogram(
            "isofabric_verification_duration_seconds",
            "Seconds one verification of a fabric took, by check: incremental and whole (the "
            "commit gate of a change), full (the periodic full re-verification)",
            ("fabric", "check"),
            buckets=VERIFICATION_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(StateCollector(uow))

    def observe_request(self, observed: Observed) -> None:
        """Count one answered request (and its mutation outcome, if it is one)."""
        method = observed.method if observed.method in KNOWN_METHODS else OTHER_METHOD
        labels = (method, observed.route, str(observed.status))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(observed.seconds)
        if observed.outcome is not None:
            self.mutations.labels(observed.method, observed.route, observed.outcome).inc()

    def observe_verification(self, fabric: str, check: str, seconds: float) -> None:
        """Record one verification's duration (tenancy/store/observers.py calls it)."""
        self.verifications.labels(fabric, check).observe(seconds)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format (reads the database: call off the loop)."""
        return generate_latest(self.registry)


METRICS_DESCRIPTION = """\
The service's metrics in the Prometheus text exposition format: requests and latency by route
template, mutations by outcome, verification durations and, per fabric, the verdict, identifier
pools, nodes by state and deploy targets' sync; the audit log's size and newest checkpoint, and the
usage feed's lag (docs/operators/monitoring.md). Who may read it is ISOFABRIC_METRICS_ACCESS:
`authenticated` (an operator or auditor token) or `open` (anyone).
"""


def install_metrics(app: FastAPI) -> Metrics:
    """Add ``GET /metrics`` and the request observer (metrics and the request log) to `app`.

    Call it after every other middleware is added: the observer must be the outermost one, so
    that it times and sees every answer.
    """
    uow: UnitOfWork = app.state.uow
    metrics = Metrics(uow)
    observe_verifications(uow.engine, metrics.observe_verification)
    guarded = uow.settings.metrics_access == "authenticated"

    def read_metrics() -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    app.add_api_route(
        METRICS_PATH,
        read_metrics,
        methods=["GET"],
        dependencies=[Depends(bearer_scheme), Depends(authorize)] if guarded else [],
        response_class=PlainTextResponse,
        summary="Prometheus metrics",
        description=METRICS_DESCRIPTION,
        tags=["operations"],
        responses={200: {"description": "The metrics (Prometheus text format 1.0.0)"}},
    )
    # HEAD as GET (RFC 9110 §9.1; see api/health.py), left out of the OpenAPI document.
    app.add_api_route(
        METRICS_PATH,
        read_metrics,
        methods=["HEAD"],
        dependencies=[Depends(bearer_scheme), Depends(authorize)] if guarded else [],
        include_in_schema=False,
    )
    app.add_middleware(ObserveRequests, sink=metrics)
    app.state.metrics = metrics
    return metrics
