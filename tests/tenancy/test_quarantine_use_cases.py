"""Quarantine by read-back without HTTP, on both backends: what the HTTP tier cannot time.

ib-east as onboarded (tests/builders.py): storage 0x0100, acme, research and globex 0x0101 to
0x0103, gpu0007 and gpu0008 free; sm-a is its one deploy target (an OpenSM node). A key no
target can have received is free at its release; one a target may hold is kept from other
owners (not from its own) until the targets read back its release.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

import pytest

from tenancy.gate import cached_reads
from tenancy.schemas import (
    AllocationCreate,
    ReportCreate,
    SegmentView,
    TargetCreate,
    TenantCreate,
)
from tenancy.schemas.changesets import ChangeSetCreate
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, changesets, deploy, snapshot_history, tenants
from tests.builders import FABRIC, Onboarded, rows

TARGET = "sm-a"


@pytest.fixture
def targeted(uow: UnitOfWork, onboarded: Onboarded) -> Onboarded:
    """ib-east with its deploy target registered, and initech, a new tenant."""
    deploy.put_target(uow, fabric_name=FABRIC, name=TARGET, spec=TargetCreate(kind="opensm"))
    tenants.create_tenant(uow, spec=TenantCreate(name="initech", kind="external"))
    return onboarded


def allocate(uow: UnitOfWork, tenant: str, node: str) -> tuple[str, str]:
    """The allocation's id and its tenant's P_Key."""
    view = allocations.allocate(
        uow, tenant_name=tenant, spec=AllocationCreate(fabric=FABRIC, nodes=[node])
    )
    assert isinstance(view.segment, SegmentView) and view.segment.pkey
    return view.id, view.segment.pkey


def manifest_digest(uow: UnitOfWork) -> str:
    """The snapshot digest the signed manifest binds, fetched as an agent fetches it."""
    envelope = snapshot_history.signed_manifest(uow, fabric_name=FABRIC)
    return str(json.loads(base64.b64decode(envelope.payload))["snapshot_digest"])


def current_digest(uow: UnitOfWork) -> str:
    return cached_reads.list_artifacts(uow, fabric_name=FABRIC).snapshot_digest


def key_state(engine: Any, pkey: str) -> list[str]:
    found = rows(engine, "SELECT state FROM segment WHERE value = :v", v=int(pkey, 16))
    return [str(state) for (state,) in found]


def test_a_tenant_takes_its_deployed_key_back_while_other_owners_skip_it(uow, targeted, engine):
    manifest_digest(uow)  # every onboarded key may be on sm-a now
    allocations.release_allocation(
        uow, tenant_name="globex", allocation_id=targeted.allocation_ids["globex"]
    )
    assert key_state(engine, "0x0103") == ["quarantined"]

    _, other = allocate(uow, "initech", "gpu0007")
    _, own = allocate(uow, "globex", "gpu0008")

    assert (other, own) == ("0x0104", "0x0103")
    assert key_state(engine, "0x0103") == ["active"]


def test_a_key_a_target_reported_stays_quarantined_without_a_manifest_fetch(uow, targeted, engine):
    allocation, pkey = allocate(uow, "initech", "gpu0007")
    digest = current_digest(uow)
    deploy.post_report(
        uow,
        fabric_name=FABRIC,
        target_name=TARGET,
        report=ReportCreate(state="applied", digest=digest, role="master", observed_digest=digest),
    )

    allocations.release_allocation(uow, tenant_name="initech", allocation_id=allocation)

    assert (pkey, key_state(engine, pkey)) == ("0x0104", ["quarantined"])


def test_a_key_taken_and_released_in_one_change_set_is_free_for_the_next_owner_in_it(uow, targeted):
    spec = ChangeSetCreate.model_validate(
        {
            "operations": [
                {"op": "allocate", "tenant": "initech", "fabric": FABRIC, "nodes": ["gpu0007"]},
                {"op": "create_tenant", "name": "hooli", "kind": "external"},
            ]
        }
    )
    first = changesets.apply_changeset(uow, spec=spec).model_dump(mode="json")["results"]
    release = {"op": "release", "tenant": "initech", "allocation_id": first[0]["result"]["id"]}
    again = {"op": "allocate", "tenant": "hooli", "fabric": FABRIC, "nodes": ["gpu0008"]}

    view = changesets.apply_changeset(
        uow, spec=ChangeSetCreate.model_validate({"operations": [release, again]})
    )

    # 0x0104 was committed but never fetched nor reported: no target can hold it.
    assert view.model_dump(mode="json")["results"][1]["result"]["segment"]["pkey"] == "0x0104"


def test_a_release_committing_while_a_manifest_is_rendered_makes_it_render_again(
    uow, targeted, engine, monkeypatch
):
    allocation, pkey = allocate(uow, "initech", "gpu0007")
    holding = current_digest(uow)
    render = cached_reads.current_artifacts
    released: list[str] = []

    def release_while_rendering(uow: UnitOfWork, *, fabric_name: str) -> Any:
        rendered = render(uow, fabric_name=fabric_name)
        if not released:  # the key is released between this rendering and the manifest's mark
            allocations.release_allocation(uow, tenant_name="initech", allocation_id=allocation)
            released.append(allocation)
        return rendered

    monkeypatch.setattr(cached_reads, "current_artifacts", release_while_rendering)

    served = manifest_digest(uow)

    # The release saw no fetch, so the key is free: a manifest still holding it is never served.
    assert key_state(engine, pkey) == []
    assert served == current_digest(uow) != holding


def test_with_targets_no_quarantine_period_frees_a_deployed_key_not_even_within_a_change_set(
    uow, targeted
):
    fast = dataclasses.replace(
        uow, settings=dataclasses.replace(uow.settings, pkey_quarantine_seconds=0)
    )
    manifest_digest(fast)  # globex's 0x0103 may be on sm-a now
    release = {
        "op": "release",
        "tenant": "globex",
        "allocation_id": targeted.allocation_ids["globex"],
    }
    allocate_initech = {"op": "allocate", "tenant": "initech", "fabric": FABRIC, "count": 1}

    view = changesets.apply_changeset(
        fast, spec=ChangeSetCreate.model_validate({"operations": [release, allocate_initech]})
    )

    assert view.model_dump(mode="json")["results"][1]["result"]["segment"]["pkey"] == "0x0104"
