"""Consented peering without HTTP (issue 13, item 4): request, accept, end, on both backends.

ib-east as onboarded (tests/builders.py) plus labs, a second internal tenant on gpu0007: under
the default policy internal tenants may peer with each other, external ones with nobody.
"""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from policies.errors import ConflictError, InvalidValueError, IsolationViolationError, NotFoundError
from policies.verdict import Rule
from tenancy import models as m
from tenancy.gate import verification
from tenancy.record.snapshot import load_snapshot
from tenancy.schemas import AllocationCreate, SegmentView, TenantCreate
from tenancy.schemas.peerings import PeeringCreate, PeeringView
from tenancy.schemas.policy import PolicyDocument
from tenancy.schemas.tenants import TenantPatch
from tenancy.store.lookups import fabric_named
from tenancy.store.uow import UnitOfWork
from tenancy.technology import verify_snapshot
from tenancy.usecases import allocations, peerings, policy, tenant_patch, tenants
from tests.builders import (
    FABRIC,
    PORT_GUIDS,
    Onboarded,
    RoceOnboarded,
    audit_trail,
    rows,
    uow_partitions_conf,
)

LABS_NODE = "gpu0007"
PEERING_PARTITION = "peer_labs_research"
# Onboarding holds 0x0100..0x0103 and labs 0x0104: an accepted peering gets the next key.
PEERING_PKEY = "0x0105"
WITH_LABS = PeeringCreate(fabric=FABRIC, peer="labs")


@pytest.fixture
def labs(uow: UnitOfWork, onboarded: Onboarded) -> str:
    tenants.create_tenant(uow, spec=TenantCreate(name="labs", kind="internal"))
    allocations.allocate(
        uow, tenant_name="labs", spec=AllocationCreate(fabric=FABRIC, nodes=[LABS_NODE])
    )
    return "labs"


def request(uow: UnitOfWork, tenant: str = "research", peer: str = "labs") -> PeeringView:
    return peerings.request_peering(
        uow, tenant_name=tenant, spec=PeeringCreate(fabric=FABRIC, peer=peer)
    )


def accepted(uow: UnitOfWork) -> PeeringView:
    """research requests, labs accepts."""
    return peerings.accept_peering(uow, tenant_name="labs", peering_id=request(uow).id)


def edges(uow: UnitOfWork, fabric: str = FABRIC) -> set[tuple[str, str, bool]]:
    verdict = verification.verify_fabric(uow, fabric_name=fabric)
    assert verdict.holds, verdict.counterexamples
    return {(e.source, e.target, e.allowed) for e in verdict.reachability}


def peering_members(uow: UnitOfWork) -> set[str]:
    text = uow_partitions_conf(uow)
    if f"{PEERING_PARTITION}=" not in text:
        return set()
    body = text.split(f"{PEERING_PARTITION}=")[1].split(";")[0]
    return {line.strip().rstrip(",") for line in body.splitlines()[1:] if line.strip()}


def full_members(*nodes: str) -> set[str]:
    return {f"{guid}=full" for node in nodes for guid in PORT_GUIDS[node]}


def segment_states(engine: Engine, peering_id: str) -> list[str]:
    found = rows(engine, "SELECT state FROM segment WHERE peering_id = :p", p=peering_id)
    return [str(state) for (state,) in found]


# --- request -----------------------------------------------------------------------------------


def test_a_request_is_pending_and_shown_to_both_sides_only(uow, labs, clock):
    view = request(uow)

    assert (view.requester, view.peer, view.fabric, view.state) == (
        "research",
        "labs",
        FABRIC,
        "requested",
    )
    assert (view.requested_at, view.requested_by, view.segment) == (clock.now, "system", None)
    pending = peerings.list_peering_requests(uow, tenant_name="labs", limit=10, cursor=None)
    assert [p.id for p in pending.data] == [view.id]
    assert (
        peerings.list_peering_requests(uow, tenant_name="research", limit=10, cursor=None).count
        == 0
    )
    for side in ("research", "labs"):
        assert peerings.list_peerings(uow, tenant_name=side, limit=10, cursor=None).data == [view]
    assert peerings.list_peerings(uow, tenant_name="acme", limit=10, cursor=None).count == 0


def test_a_pending_request_changes_no_reachability_and_no_partition(uow, labs):
    before = edges(uow)

    request(uow)

    assert edges(uow) == before
    assert peering_members(uow) == set()


def test_the_default_policy_refuses_an_external_tenants_request_naming_the_rule(
    uow, onboarded, engine
):
    before = rows(engine, "SELECT count(*) FROM peering")

    with pytest.raises(ConflictError) as refused:
        request(uow, tenant="acme", peer="globex")

    assert refused.value.extensions["rule"] == Rule.PEERING_NOT_ALLOWED.value == "policy-peering"
    assert "policy-peering" in refused.value.detail
    assert rows(engine, "SELECT count(*) FROM peering") == before


def test_a_tenant_cannot_peer_with_itself(uow, labs):
    with pytest.raises(InvalidValueError):
        request(uow, tenant="labs", peer="labs")


def test_an_unknown_and_an_offboarded_peer_are_the_same_404(uow, labs):
    tenants.offboard_tenant(uow, name="labs")

    with pytest.raises(NotFoundError) as offboarded:
        request(uow, peer="labs")
    with pytest.raises(NotFoundError) as unknown:
        request(uow, peer="nobody")

    assert offboarded.value.detail.replace("labs", "X") == unknown.value.detail.replace(
        "nobody", "X"
    )


def test_an_offboarded_requester_and_an_unknown_fabric_are_refused(uow, labs):
    with pytest.raises(NotFoundError):
        peerings.request_peering(
            uow, tenant_name="research", spec=PeeringCreate(fabric="ib-nowhere", peer="labs")
        )
    tenants.offboard_tenant(uow, name="research")
    with pytest.raises(ConflictError):
        request(uow)


@pytest.mark.parametrize(("second_by", "second_peer"), [("research", "labs"), ("labs", "research")])
def test_a_second_open_request_between_the_two_is_a_conflict_either_way(
    uow, labs, second_by, second_peer
):
    request(uow)

    with pytest.raises(ConflictError):
        request(uow, tenant=second_by, peer=second_peer)


def test_an_ended_peering_can_be_requested_again(uow, labs):
    first = accepted(uow)
    peerings.end_peering(uow, tenant_name="research", peering_id=first.id)

    again = request(uow, tenant="labs", peer="research")

    assert again.state == "requested" and again.id != first.id


def test_neither_tenant_needs_nodes_on_the_fabric(uow, onboarded):
    for name in ("team-a", "team-b"):
        tenants.create_tenant(uow, spec=TenantCreate(name=name, kind="internal"))
    view = request(uow, tenant="team-a", peer="team-b")

    done = peerings.accept_peering(uow, tenant_name="team-b", peering_id=view.id)

    assert done.state == "accepted" and done.segment is not None
    assert "peer_team-a_team-b" not in uow_partitions_conf(uow)  # no member: left out


# --- accept ------------------------------------------------------------------------------------


def test_accepting_shares_a_partition_where_both_tenants_are_full_members(uow, labs, clock):
    view = accepted(uow)

    assert (view.state, view.accepted_at, view.accepted_by) == ("accepted", clock.now, "system")
    assert view.segment == SegmentView(pkey=PEERING_PKEY)
    assert peering_members(uow) == full_members("gpu0003", "gpu0004", LABS_NODE)
    assert ("tenant:labs", "tenant:research", True) in edges(uow)
    assert peerings.list_peering_requests(uow, tenant_name="labs", limit=10, cursor=None).count == 0


def test_every_state_change_is_audited_under_the_acting_tenant(uow, labs, engine):
    view = accepted(uow)
    peerings.end_peering(uow, tenant_name="labs", peering_id=view.id)

    trail = [entry for entry in audit_trail(engine) if entry[0].startswith("peering.")]

    assert trail == [
        ("peering.request", f"tenants/research/peerings/{view.id}"),
        ("peering.accept", f"tenants/labs/peerings/{view.id}"),
        ("peering.end", f"tenants/labs/peerings/{view.id}"),
    ]
    digests = rows(
        engine, "SELECT digest_after FROM audit_entry WHERE action LIKE 'peering.%' ORDER BY 1"
    )
    assert all(digest for (digest,) in digests)


@pytest.mark.parametrize("by", ["research", "acme"], ids=["the-requester", "a-third-tenant"])
def test_only_the_peer_can_accept(uow, labs, by):
    view = request(uow)

    with pytest.raises(NotFoundError):
        peerings.accept_peering(uow, tenant_name=by, peering_id=view.id)


def test_an_ended_or_accepted_request_cannot_be_accepted(uow, labs):
    view = accepted(uow)

    with pytest.raises(NotFoundError):
        peerings.accept_peering(uow, tenant_name="labs", peering_id=view.id)
    peerings.end_peering(uow, tenant_name="labs", peering_id=view.id)
    with pytest.raises(NotFoundError):
        peerings.accept_peering(uow, tenant_name="labs", peering_id=view.id)


def test_a_policy_change_before_acceptance_refuses_it(uow, labs, engine):
    view = request(uow)
    closed = PolicyDocument.model_validate({"kinds": {"internal": {"peering": []}}})
    policy.put_policy(uow, document=closed)

    with pytest.raises(ConflictError) as refused:
        peerings.accept_peering(uow, tenant_name="labs", peering_id=view.id)

    assert refused.value.extensions["rule"] == "policy-peering"
    assert segment_states(engine, view.id) == []


def test_a_policy_that_forbids_an_accepted_peering_is_refused_with_the_counterexample(uow, labs):
    accepted(uow)
    closed = PolicyDocument.model_validate({"kinds": {"internal": {"peering": []}}})

    with pytest.raises(IsolationViolationError) as refused:
        policy.put_policy(uow, document=closed)

    rules = {c["rule"] for c in refused.value.extensions["counterexamples"]}
    assert Rule.PEERING_NOT_ALLOWED.value in rules
    assert policy.get_policy(uow).version == 0


def test_a_policy_that_lets_external_tenants_peer_lets_them(uow, onboarded):
    open_ = PolicyDocument.model_validate({"kinds": {"external": {"peering": ["external"]}}})
    policy.put_policy(uow, document=open_)
    view = request(uow, tenant="acme", peer="globex")

    peerings.accept_peering(uow, tenant_name="globex", peering_id=view.id)

    assert ("tenant:acme", "tenant:globex", True) in edges(uow)


def test_patching_a_peered_tenant_that_holds_nothing_restates_the_fabrics_digest(uow, onboarded):
    for name in ("team-a", "team-b"):
        tenants.create_tenant(uow, spec=TenantCreate(name=name, kind="internal"))
    view = request(uow, tenant="team-a", peer="team-b")
    peerings.accept_peering(uow, tenant_name="team-b", peering_id=view.id)

    # A peered tenant's facts are in its digest group: the class change is a change of ib-east.
    tenant_patch.patch_tenant(uow, name="team-a", spec=TenantPatch(qos_class="gold"))

    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, FABRIC)
        whole = verify_snapshot(load_snapshot(tx.session, fabric))
        stored = tx.session.get(m.FabricDigest, fabric.id)
    assert stored is not None and stored.digest == whole.snapshot_digest


def test_a_peer_that_releases_its_nodes_stays_peered_with_no_ports_in_the_partition(
    uow, labs, onboarded
):
    view = accepted(uow)
    held = allocations.list_allocations(uow, tenant_name="labs", limit=10, cursor=None).data
    allocations.release_allocation(uow, tenant_name="labs", allocation_id=held[0].id)

    assert peerings.list_peerings(uow, tenant_name="labs", limit=10, cursor=None).data[0].id == (
        view.id
    )
    assert peering_members(uow) == full_members("gpu0003", "gpu0004")
    allocations.allocate(
        uow, tenant_name="labs", spec=AllocationCreate(fabric=FABRIC, nodes=["gpu0008"])
    )
    assert peering_members(uow) == full_members("gpu0003", "gpu0004", "gpu0008")


# --- end ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("by", ["research", "labs"])
def test_either_side_ends_a_peering_and_its_key_is_quarantined(uow, labs, engine, clock, by):
    view = accepted(uow)

    peerings.end_peering(uow, tenant_name=by, peering_id=view.id)

    ended = peerings.list_peerings(
        uow, tenant_name="research", limit=10, cursor=None, state="ended"
    )
    assert [(p.id, p.state, p.ended_at, p.segment) for p in ended.data] == [
        (view.id, "ended", clock.now, None)
    ]
    assert peerings.list_peerings(uow, tenant_name="labs", limit=10, cursor=None).count == 0
    assert segment_states(engine, view.id) == ["quarantined"]
    assert peering_members(uow) == set()
    assert ("tenant:labs", "tenant:research", True) not in edges(uow)


def test_a_request_is_withdrawn_or_declined_by_ending_it(uow, labs, engine):
    withdrawn = request(uow)
    peerings.end_peering(uow, tenant_name="research", peering_id=withdrawn.id)
    declined = request(uow)
    peerings.end_peering(uow, tenant_name="labs", peering_id=declined.id)

    listed = peerings.list_peerings(uow, tenant_name="labs", limit=10, cursor=None, state="all")

    assert {(p.id, p.state, p.accepted_at) for p in listed.data} == {
        (withdrawn.id, "ended", None),
        (declined.id, "ended", None),
    }
    assert segment_states(engine, withdrawn.id) == segment_states(engine, declined.id) == []


def test_a_peering_ends_once_and_not_through_a_third_tenant(uow, labs):
    view = accepted(uow)

    with pytest.raises(NotFoundError):
        peerings.end_peering(uow, tenant_name="acme", peering_id=view.id)
    peerings.end_peering(uow, tenant_name="labs", peering_id=view.id)
    with pytest.raises(NotFoundError):
        peerings.end_peering(uow, tenant_name="research", peering_id=view.id)


def test_a_new_acceptance_after_an_end_gets_a_new_key(uow, labs):
    first = accepted(uow)
    peerings.end_peering(uow, tenant_name="labs", peering_id=first.id)

    second = accepted(uow)

    assert first.segment == SegmentView(pkey=PEERING_PKEY)
    assert second.segment is not None and second.segment != first.segment  # 0x0105 quarantined


def test_offboarding_ends_the_tenants_peerings_and_requests(uow, labs, engine, onboarded):
    tenants.create_tenant(uow, spec=TenantCreate(name="team-c", kind="internal"))
    peering = accepted(uow)
    pending = request(uow, tenant="team-c", peer="labs")

    tenants.offboard_tenant(uow, name="labs")

    listed = peerings.list_peerings(uow, tenant_name="research", limit=10, cursor=None, state="all")
    assert [(p.id, p.state) for p in listed.data] == [(peering.id, "ended")]
    team_c = peerings.list_peerings(uow, tenant_name="team-c", limit=10, cursor=None, state="all")
    assert [(p.id, p.state) for p in team_c.data] == [(pending.id, "ended")]
    assert segment_states(engine, peering.id) == ["quarantined"]
    assert peering_members(uow) == set()
    ended = [t for a, t in audit_trail(engine) if a == "peering.end"]
    assert sorted(ended) == sorted(
        [f"tenants/labs/peerings/{peering.id}", f"tenants/labs/peerings/{pending.id}"]
    )


# --- RoCE --------------------------------------------------------------------------------------


def test_a_roce_peering_imports_route_targets_between_the_two_vrfs(
    uow, roce_onboarded: RoceOnboarded
):
    acme = roce_onboarded.allocation_ids["acme"]
    allocations.release_allocation(uow, tenant_name="acme", allocation_id=acme)
    tenants.create_tenant(uow, spec=TenantCreate(name="labs", kind="internal"))
    allocations.allocate(
        uow, tenant_name="labs", spec=AllocationCreate(fabric="roce-west", count=2)
    )
    view = peerings.request_peering(
        uow, tenant_name="research", spec=PeeringCreate(fabric="roce-west", peer="labs")
    )

    done = peerings.accept_peering(uow, tenant_name="labs", peering_id=view.id)

    assert (done.state, done.segment) == ("accepted", None)  # no identifier of its own
    assert ("tenant:labs", "tenant:research", True) in edges(uow, "roce-west")
    peerings.end_peering(uow, tenant_name="research", peering_id=view.id)
    assert ("tenant:labs", "tenant:research", True) not in edges(uow, "roce-west")
