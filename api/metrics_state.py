"""The /metrics families read from stored state at scrape time (tenancy/usecases/monitoring.py).

A custom collector: each scrape reads the fabrics, pools, nodes, deploy targets, audit log and
usage feed in one read-only transaction and yields gauges, so every replica reports the same
database-wide values (no counter kept in one process). If the database cannot be read, the scrape
still answers the process's own families with ``isofabric_state_read_ok 0``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from tenancy.store.uow import UnitOfWork
from tenancy.usecases.monitoring import SYNC_STATES, FabricState, ServiceState, service_state

log = logging.getLogger(__name__)

# name -> (HELP, label names); every family this collector can yield.
FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "isofabric_state_read_ok": (
        "1 when this scrape read the stored state (the families below), 0 when the database "
        "could not be read (they are then absent)",
        (),
    ),
    "isofabric_fabric_verdict": (
        "1 when the fabric's current committed state is known to be isolated, else 0: the "
        "whole-fabric verdict of exactly that state when the service computed it (a read of its "
        "verification or artifacts), else the stored verdict of the commit gate and the last full "
        "re-verification (0 while its alarm stands); no sample while neither is known",
        ("fabric", "kind"),
    ),
    "isofabric_fabric_counterexamples": (
        "Counterexamples of the fabric's current state (from the same verdict as "
        "isofabric_fabric_verdict; no sample when a failed verdict was not computed for it)",
        ("fabric",),
    ),
    "isofabric_fabric_verification_alarm": (
        "1 while the last full re-verification disagreed with the stored digest or verdict",
        ("fabric",),
    ),
    "isofabric_pool_used": (
        "Identifiers of the fabric's pool held, active or quarantined (neither can be claimed): "
        "pkey (InfiniBand P_Keys); vlan, l2vni, l3vni, subnet, rd (RoCE)",
        ("fabric", "pool"),
    ),
    "isofabric_pool_size": ("Identifiers in the fabric's pool", ("fabric", "pool")),
    "isofabric_nodes": (
        "Nodes of the fabric by state (management nodes apart: state=management)",
        ("fabric", "state"),
    ),
    "isofabric_deploy_targets": (
        "Deploy targets of the fabric by sync state: in_sync (its last report applied the "
        "fabric's current snapshot), pending (it applied or installed an older one), failed "
        "(its last report refused, failed or rolled back), unreported",
        ("fabric", "state"),
    ),
    "isofabric_deploy_target_seconds_since_in_sync": (
        "0 while the target enforces the fabric's current snapshot; else seconds since it left "
        "sync: when the snapshot it holds stopped being current or when it reported anything "
        "but applied, whichever came first (since its registration if it never held one)",
        ("fabric", "target"),
    ),
    "isofabric_untargeted_leaves": (
        "RoCE: leaves that carry a tenant's or a shared service's ports and have no deploy target "
        "(sync's untargeted): nothing enforces their files, so the fabric is not in sync while "
        "above 0; always 0 on InfiniBand",
        ("fabric",),
    ),
    "isofabric_audit_log_entries": ("Entries in the audit log", ()),
    "isofabric_audit_checkpoint_entries": (
        "Entries covered by the newest signed checkpoint of the audit log (no sample: none yet)",
        (),
    ),
    "isofabric_audit_checkpoint_age_seconds": (
        "Seconds since the newest signed checkpoint of the audit log was signed (no sample: none)",
        (),
    ),
    "isofabric_usage_metering_lag_seconds": (
        "Seconds between now and complete_until, the end of the last hour the usage feed "
        "(/v1/usage/events) can publish as final: now minus (now - 300 s grace, truncated to the "
        "UTC hour); between 300 and 3900 on a healthy service",
        (),
    ),
}


def _family(name: str) -> GaugeMetricFamily:
    help_text, labels = FAMILIES[name]
    return GaugeMetricFamily(name, help_text, labels=list(labels))


class StateCollector(Collector):
    """Yields the families of `FAMILIES` from the database at every scrape."""

    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow

    def describe(self) -> list[GaugeMetricFamily]:
        """The families without samples: registering must not read the database."""
        return [_family(name) for name in FAMILIES]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Read the state now; on a database failure only ``isofabric_state_read_ok 0``."""
        read_ok = _family("isofabric_state_read_ok")
        try:
            state = service_state(self.uow)
        except Exception:  # a scrape must answer while the database is away
            log.exception("/metrics could not read the stored state")
            read_ok.add_metric([], 0)
            yield read_ok
            return
        read_ok.add_metric([], 1)
        yield read_ok
        yield from _fabric_families(state.fabrics)
        yield from _service_families(state)


def _fabric_families(fabrics: tuple[FabricState, ...]) -> Iterator[GaugeMetricFamily]:
    verdict = _family("isofabric_fabric_verdict")
    counterexamples = _family("isofabric_fabric_counterexamples")
    alarm = _family("isofabric_fabric_verification_alarm")
    used, size = _family("isofabric_pool_used"), _family("isofabric_pool_size")
    nodes = _family("isofabric_nodes")
    for fabric in fabrics:
        if fabric.holds is not None:
            verdict.add_metric([fabric.name, fabric.kind], int(fabric.holds))
        if fabric.counterexamples is not None:
            counterexamples.add_metric([fabric.name], fabric.counterexamples)
        alarm.add_metric([fabric.name], int(fabric.alarm))
        for pool in fabric.pools:
            used.add_metric([fabric.name, pool.pool], pool.used)
            size.add_metric([fabric.name, pool.pool], pool.size)
        for state, count in fabric.nodes.items():
            nodes.add_metric([fabric.name, state], count)
    yield from (verdict, counterexamples, alarm, used, size, nodes)
    yield from _deploy_families(fabrics)


def _deploy_families(fabrics: tuple[FabricState, ...]) -> Iterator[GaugeMetricFamily]:
    targets = _family("isofabric_deploy_targets")
    since = _family("isofabric_deploy_target_seconds_since_in_sync")
    untargeted = _family("isofabric_untargeted_leaves")
    for fabric in fabrics:
        for sync in SYNC_STATES:
            count = sum(1 for t in fabric.targets if t.sync == sync)
            targets.add_metric([fabric.name, sync], count)
        for target in fabric.targets:
            since.add_metric([fabric.name, target.name], target.seconds_since_in_sync)
        untargeted.add_metric([fabric.name], len(fabric.untargeted))
    yield from (targets, since, untargeted)


def _service_families(state: ServiceState) -> Iterator[GaugeMetricFamily]:
    entries = _family("isofabric_audit_log_entries")
    entries.add_metric([], state.audit_entries)
    checkpoint = _family("isofabric_audit_checkpoint_entries")
    age = _family("isofabric_audit_checkpoint_age_seconds")
    if state.checkpoint_size is not None:
        checkpoint.add_metric([], state.checkpoint_size)
    if state.checkpoint_age_seconds is not None:
        age.add_metric([], state.checkpoint_age_seconds)
    lag = _family("isofabric_usage_metering_lag_seconds")
    lag.add_metric([], state.usage_lag_seconds)
    yield from (entries, checkpoint, age, lag)
