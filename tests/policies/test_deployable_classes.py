"""Which QoS classes a RoCE fabric's leaves carry (`verify_qos.deployable_classes`)."""

from __future__ import annotations

from policies.roce.model import RoceQos
from policies.roce.verify_qos import deployable_classes, qos_violations
from tests.policies.roce_snapshots import BRONZE, GOLD, SILVER

PLATINUM = RoceQos("platinum", dscp=34, tc=5, lossless=True, ets_weight=1)
IRON = RoceQos("iron", dscp=12, tc=2, lossless=False, ets_weight=0)


def names(classes: tuple[RoceQos, ...]) -> list[str]:
    return [q.name for q in classes]


def test_every_defined_class_that_fits_is_carried_whether_used_or_not() -> None:
    carried = deployable_classes((GOLD, SILVER, BRONZE, IRON), [BRONZE], max_lossless=2)

    assert names(carried) == ["bronze", "gold", "silver", "iron"]


def test_a_class_past_the_budget_is_not_carried_while_the_classes_in_use_fill_it() -> None:
    defined = (GOLD, SILVER, BRONZE, PLATINUM)

    carried = deployable_classes(defined, [GOLD], max_lossless=2)

    # silver comes first in definition order and takes the second lossless priority
    assert names(carried) == ["gold", "silver", "bronze"]
    assert not list(qos_violations(carried, 2))


def test_which_unused_classes_fit_does_not_change_with_routine_use() -> None:
    defined = (GOLD, SILVER, BRONZE, PLATINUM)
    by_use = [
        deployable_classes(defined, used, max_lossless=2)
        for used in ([], [GOLD], [BRONZE], [GOLD, SILVER, BRONZE], [SILVER])
    ]

    assert {frozenset(names(c)) for c in by_use} == {frozenset({"gold", "silver", "bronze"})}


def test_used_classes_that_break_the_budget_are_carried_alone_so_verification_refutes_them() -> (
    None
):
    used = [GOLD, SILVER, PLATINUM]

    carried = deployable_classes((GOLD, SILVER, BRONZE, PLATINUM), used, max_lossless=2)

    assert names(carried) == ["gold", "silver", "platinum"]
    assert {c.rule.value for c in qos_violations(carried, 2)} == {"qos-lossless-limit"}
