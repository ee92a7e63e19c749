"""Claims inside one change set: each still takes the lowest free value, releases included.

A change set runs its operations in one transaction, which remembers where each pool's last
claim ended (tenancy/store/tx_memo.py); these pin that the value claimed is the one a claim in a
transaction of its own would get.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from policies.errors import ConflictError
from tenancy.schemas import AllocationCreate, SegmentView, TenantCreate
from tenancy.schemas.changesets import ChangeSetCreate
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, changesets, tenants
from tests.builders import FABRIC, uow_create_fabric


def apply(uow: UnitOfWork, *operations: dict[str, Any]) -> list[Any]:
    spec = ChangeSetCreate.model_validate({"operations": list(operations)})
    view = changesets.apply_changeset(uow, spec=spec)
    return [r["result"] for r in view.model_dump(mode="json", by_alias=True)["results"]]


def onboard(name: str, node: str) -> tuple[dict[str, Any], dict[str, Any]]:
    create = {"op": "create_tenant", "name": name, "kind": "external"}
    return create, {"op": "allocate", "tenant": name, "fabric": FABRIC, "nodes": [node]}


def pkeys(results: list[Any]) -> list[str]:
    return [r["segment"]["pkey"] for r in results if r is not None and "segment" in r]


def without_quarantine(uow: UnitOfWork) -> UnitOfWork:
    return dataclasses.replace(
        uow, settings=dataclasses.replace(uow.settings, pkey_quarantine_seconds=0)
    )


def test_claims_in_one_change_set_take_the_lowest_free_keys_in_turn(uow):
    uow_create_fabric(uow, first="0x0a00", last="0x0a0f")

    results = apply(
        uow,
        *onboard("acme", "gpu0001"),
        *onboard("globex", "gpu0002"),
        *onboard("initech", "gpu0003"),
    )

    assert pkeys(results) == ["0x0a00", "0x0a01", "0x0a02"]


def test_a_change_set_fills_a_gap_below_the_held_keys_first(uow, clock):
    fast = without_quarantine(uow)
    uow_create_fabric(fast, first="0x0a00", last="0x0a0f")
    apply(
        fast,
        *onboard("acme", "gpu0001"),
        *onboard("globex", "gpu0002"),
        *onboard("initech", "gpu0003"),
    )
    tenants.offboard_tenant(fast, name="globex")  # 0x0a01 quarantined, free at the next claim

    results = apply(fast, *onboard("hooli", "gpu0004"), *onboard("umbrella", "gpu0005"))

    assert pkeys(results) == ["0x0a01", "0x0a03"]


def test_a_key_released_after_a_claim_of_the_same_change_set_is_claimed_again_without_quarantine(
    uow,
):
    fast = without_quarantine(uow)
    uow_create_fabric(fast, first="0x0a00", last="0x0a0f")
    first = apply(fast, *onboard("acme", "gpu0001"), *onboard("globex", "gpu0002"))
    release = {"op": "release", "tenant": "acme", "allocation_id": first[1]["id"]}

    results = apply(fast, *onboard("initech", "gpu0003"), release, *onboard("hooli", "gpu0004"))

    assert pkeys(results) == ["0x0a02", "0x0a00"]


def test_a_key_released_earlier_in_the_same_change_set_stays_quarantined(uow):
    uow_create_fabric(uow, first="0x0a00", last="0x0a0f")
    first = apply(uow, *onboard("acme", "gpu0001"), *onboard("globex", "gpu0002"))
    release = {"op": "release", "tenant": "acme", "allocation_id": first[1]["id"]}

    results = apply(uow, *onboard("initech", "gpu0003"), release, *onboard("hooli", "gpu0004"))

    assert pkeys(results) == ["0x0a02", "0x0a03"]


def test_a_tenant_released_and_allocated_again_in_one_change_set_gets_the_lowest_free_key(uow):
    fast = without_quarantine(uow)
    uow_create_fabric(fast, first="0x0a00", last="0x0a0f")
    first = apply(fast, *onboard("acme", "gpu0001"), *onboard("globex", "gpu0002"))
    release = {"op": "release", "tenant": "acme", "allocation_id": first[1]["id"]}
    again = {"op": "allocate", "tenant": "acme", "fabric": FABRIC, "count": 1}

    results = apply(fast, release, again)

    assert pkeys(results) == ["0x0a00"]
    view = allocations.get_allocation(fast, tenant_name="acme", allocation_id=results[1]["id"])
    assert view.segment == SegmentView(pkey="0x0a00")


def test_an_allocation_by_count_takes_free_compute_nodes_in_name_order(uow):
    uow_create_fabric(uow)
    tenants.create_tenant(uow, spec=TenantCreate(name="acme", kind="external"))

    view = allocations.allocate(
        uow, tenant_name="acme", spec=AllocationCreate(fabric=FABRIC, count=3)
    )

    assert view.nodes == ["gpu0001", "gpu0002", "gpu0003"]


def test_a_node_released_after_a_hold_of_the_same_change_set_is_held_again_first(uow):
    uow_create_fabric(uow)
    by_count = [{"op": "create_tenant", "name": n, "kind": "external"} for n in ("b", "c")]
    first = apply(uow, *by_count, {"op": "allocate", "tenant": "b", "fabric": FABRIC, "count": 1})
    release = {"op": "release", "tenant": "b", "allocation_id": first[2]["id"]}

    results = apply(
        uow,
        {"op": "allocate", "tenant": "c", "fabric": FABRIC, "count": 1},
        release,
        {"op": "allocate", "tenant": "c", "fabric": FABRIC, "count": 2},
    )

    assert [results[0]["nodes"], results[2]["nodes"]] == [["gpu0002"], ["gpu0001", "gpu0003"]]


def test_a_tenant_created_and_offboarded_in_one_change_set_can_no_longer_allocate(uow):
    uow_create_fabric(uow)
    create, allocate = onboard("acme", "gpu0001")
    offboard = {"op": "offboard", "tenant": "acme"}
    again = {"op": "allocate", "tenant": "acme", "fabric": FABRIC, "count": 1}

    with pytest.raises(ConflictError, match="offboarded"):
        apply(uow, create, allocate, offboard, again)


def test_a_tenant_created_in_a_change_set_claims_again_after_its_release_in_it(uow):
    fast = without_quarantine(uow)
    uow_create_fabric(fast, first="0x0a00", last="0x0a0f")
    create, allocate = onboard("acme", "gpu0001")
    offboard = {"op": "offboard", "tenant": "acme"}
    other, other_allocation = onboard("globex", "gpu0002")

    results = apply(fast, create, allocate, offboard, other, other_allocation)

    assert pkeys(results) == ["0x0a00", "0x0a00"]
