"""RoCE QoS classes and the VXLAN MTU budget: PFC, ECN, CNP, DSCP, ETS (docs/facts/roce.md §2)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from policies.roce.model import (
    CNP_DSCP,
    CNP_TC,
    RoceQos,
    RoceSettings,
)
from policies.roce.settings import (
    MAX_ECN_PROBABILITY,
    MAX_ETS_WEIGHT_TOTAL,
    mtu_problem,
)
from policies.verdict import (
    Counterexample,
    Rule,
)


def qos_violations(classes: tuple[RoceQos, ...], max_lossless: int) -> Iterator[Counterexample]:
    """Refute classes that break CNP handling, share a TC or DSCP, or pass the lossless limit."""
    yield from _cnp_conflicts(classes)
    yield from _traffic_class_conflicts(classes)
    lossless_tcs = sorted({c.tc for c in classes if c.lossless})
    if len(lossless_tcs) > max_lossless:
        # Every lossless priority reserves PFC headroom per port (docs/facts/roce.md §2).
        yield _qos_example(
            Rule.QOS_LOSSLESS_LIMIT,
            f"{len(lossless_tcs)} lossless traffic classes {lossless_tcs} exceed the fabric's "
            f"limit of {max_lossless}",
        )
    for qos in classes:
        if qos.lossless and not _ecn_valid(qos):
            yield _qos_example(
                Rule.QOS_ECN_MISSING,
                f"lossless class {qos.name} needs ECN marking with 0 < min ({qos.ecn_min_bytes}) "
                f"< max ({qos.ecn_max_bytes}) and probability 1-100 ({qos.ecn_probability})",
            )
    yield from _dscp_duplicates(classes)
    total = sum(c.ets_weight for c in classes)
    if total > MAX_ETS_WEIGHT_TOTAL:
        yield _qos_example(
            Rule.QOS_ETS_OVERCOMMIT, f"ETS weights add up to {total}%, more than 100%"
        )


def deployable_classes(
    defined: Iterable[RoceQos], used: Iterable[RoceQos], max_lossless: int
) -> tuple[RoceQos, ...]:
    """The classes every leaf of a fabric carries: those `used`, then each `defined` one that fits.

    Contract: the result holds every used class (so verifying it refutes exactly what verifying
    the used classes refutes), plus, in `defined` order, each other class that adds no
    `qos_violations`. Which unused classes fit depends only on the used ones, so routine
    onboarding and offboarding within the carried classes leave the fabric-wide QoS tables
    (DSCP maps, schedulers, queues, PFC) as they are; a class that does not fit is not carried
    until the classes in use make room, and a tenant of it is refused when it first needs it.
    """
    chosen = list(used)
    names = {qos.name for qos in chosen}
    for qos in defined:
        if qos.name in names:
            continue
        if not any(qos_violations((*chosen, qos), max_lossless)):
            chosen.append(qos)
            names.add(qos.name)
    return tuple(chosen)


def _qos_example(rule: Rule, message: str) -> Counterexample:
    return Counterexample(rule, message)


def _ecn_valid(qos: RoceQos) -> bool:
    thresholds = 0 < qos.ecn_min_bytes < qos.ecn_max_bytes
    return thresholds and 1 <= qos.ecn_probability <= MAX_ECN_PROBABILITY


def _cnp_conflicts(classes: Iterable[RoceQos]) -> Iterator[Counterexample]:
    # RoCEv2 CNPs travel on DSCP 48 / TC 6, strict priority and lossy (docs/facts/roce.md §2).
    for qos in classes:
        if qos.dscp == CNP_DSCP or qos.tc == CNP_TC:
            yield _qos_example(
                Rule.QOS_CNP_CONFLICT,
                f"class {qos.name} (DSCP {qos.dscp}, TC {qos.tc}) collides with the CNP "
                f"DSCP {CNP_DSCP} / TC {CNP_TC}",
            )


def _traffic_class_conflicts(classes: Iterable[RoceQos]) -> Iterator[Counterexample]:
    # PFC is per priority (TC): a TC is lossless for every class on it, so it must not mix, and
    # the CNP TC must never be paused.
    first: dict[int, RoceQos] = {}
    for qos in classes:
        if qos.lossless and qos.tc == CNP_TC:
            yield _qos_example(
                Rule.QOS_PFC_ON_LOSSY,
                f"lossless class {qos.name} would enable PFC on the CNP TC {CNP_TC}",
            )
        other = first.setdefault(qos.tc, qos)
        if other.lossless != qos.lossless:
            yield _qos_example(
                Rule.QOS_PFC_ON_LOSSY,
                f"classes {other.name} and {qos.name} share TC {qos.tc} but only one is lossless",
            )


def _dscp_duplicates(classes: Iterable[RoceQos]) -> Iterator[Counterexample]:
    # One fabric-wide DSCP_TO_TC_MAP: a DSCP value selects exactly one class.
    first: dict[int, RoceQos] = {}
    for qos in classes:
        other = first.setdefault(qos.dscp, qos)
        if other is not qos:
            yield _qos_example(
                Rule.QOS_DSCP_DUPLICATE,
                f"classes {other.name} and {qos.name} both use DSCP {qos.dscp}",
            )


def mtu_violations(settings: RoceSettings) -> Iterator[Counterexample]:
    """Refute an underlay MTU that cannot carry the host MTU plus VXLAN overhead."""
    problem = mtu_problem(settings)
    if problem:
        yield Counterexample(Rule.MTU_BUDGET, problem)
