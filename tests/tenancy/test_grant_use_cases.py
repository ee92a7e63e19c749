"""Shared services and grants without HTTP: a service's own segment, grants as limited partition
membership on InfiniBand and as route leaks on RoCE, refusals verified before commit."""

from __future__ import annotations

import pytest

from policies.errors import ConflictError, IsolationViolationError, NotFoundError
from policies.findings import Severity
from policies.roce.parse_frr import parse_frr_conf
from tenancy.gate import verification
from tenancy.schemas import (
    AllocationCreate,
    GrantCreate,
    RoceSegmentView,
    SegmentView,
    ServiceCreate,
    TenantCreate,
)
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, nodes, shared_services, tenants
from tests.builders import (
    PORT_GUIDS,
    partition_members,
    uow_artifact_text,
    uow_create_fabric,
    uow_partitions_conf,
)

STORAGE = GrantCreate(fabric="ib-east", service="storage")
ROCE_STORAGE = GrantCreate(fabric="roce-west", service="storage")


def edges(uow: UnitOfWork, fabric: str = "ib-east") -> list[tuple[str, str, str, bool]]:
    verdict = verification.verify_fabric(uow, fabric_name=fabric)
    return [(e.source, e.target, e.segment, e.allowed) for e in verdict.reachability]


# --- services ----------------------------------------------------------------------------------


def test_a_service_on_a_free_node_gets_its_own_partition_and_holds_the_node(uow, onboarded, clock):
    view = shared_services.create_service(
        uow, fabric_name="ib-east", spec=ServiceCreate(name="scratch", nodes=["gpu0008"])
    )

    assert (view.name, view.fabric, view.nodes, view.created_at) == (
        "scratch",
        "ib-east",
        ["gpu0008"],
        clock.now,
    )
    assert view.segment == SegmentView(pkey="0x0104")
    assert nodes.get_node(uow, fabric_name="ib-east", node_name="gpu0008").service == "scratch"


def test_the_onboarded_storage_service_reads_back_with_its_nodes_and_key(uow, onboarded):
    view = shared_services.get_service(uow, fabric_name="ib-east", name="storage")
    listed = shared_services.list_services(uow, fabric_name="ib-east", limit=10, cursor=None)

    assert (view.nodes, view.segment) == (["stor01", "stor02"], SegmentView(pkey="0x0100"))
    assert listed.data == [view]


def test_a_second_service_named_storage_is_a_conflict(uow, onboarded, db_dump):
    before = db_dump()

    with pytest.raises(ConflictError, match="storage"):
        shared_services.create_service(
            uow, fabric_name="ib-east", spec=ServiceCreate(name="storage", nodes=["gpu0008"])
        )

    assert db_dump() == before


@pytest.mark.parametrize(
    "node", ["gpu0001", "sm01", "stor01"], ids=["allocated", "management", "held-by-a-service"]
)
def test_a_service_on_a_held_or_management_node_is_a_conflict_naming_it(
    uow, onboarded, db_dump, node
):
    before = db_dump()

    with pytest.raises(ConflictError, match=node):
        shared_services.create_service(
            uow, fabric_name="ib-east", spec=ServiceCreate(name="scratch", nodes=[node])
        )

    assert db_dump() == before


@pytest.mark.parametrize(
    ("fabric", "node"), [("ib-east", "gpu0999"), ("ib-nowhere", "gpu0008")], ids=["node", "fabric"]
)
def test_a_service_on_an_unknown_node_or_fabric_is_not_found_naming_it(
    uow, onboarded, db_dump, fabric, node
):
    before = db_dump()

    with pytest.raises(NotFoundError, match=node if fabric == "ib-east" else fabric):
        shared_services.create_service(
            uow, fabric_name=fabric, spec=ServiceCreate(name="scratch", nodes=[node])
        )

    assert db_dump() == before


def test_an_unknown_service_is_not_found(uow, onboarded):
    with pytest.raises(NotFoundError, match="backup"):
        shared_services.get_service(uow, fabric_name="ib-east", name="backup")


# --- grants on InfiniBand ----------------------------------------------------------------------


def test_a_grant_opens_the_service_to_the_tenant_through_the_service_partition(
    uow, onboarded, clock
):
    view = shared_services.grant_service(uow, tenant_name="research", spec=STORAGE)

    assert (view.tenant, view.fabric, view.service) == ("research", "ib-east", "storage")
    assert view.segment == SegmentView(pkey="0x0100")
    assert (view.created_at, view.revoked_at) == (clock.now, None)
    assert edges(uow) == [
        ("tenant:acme", "service:storage", "0x0100", True),
        ("tenant:research", "service:storage", "0x0100", True),
    ]


def test_a_grant_makes_the_tenants_ports_limited_members_of_the_service_partition(uow, onboarded):
    shared_services.grant_service(uow, tenant_name="research", spec=STORAGE)

    storage = partition_members(uow_partitions_conf(uow), "service_storage")

    for guid in (*PORT_GUIDS["gpu0003"], *PORT_GUIDS["gpu0004"]):
        assert f"{guid}=limited" in storage
    assert f"{PORT_GUIDS['stor01'][0]}=full" in storage
    assert PORT_GUIDS["gpu0005"][0] not in storage  # globex holds no grant


def test_tenants_granted_the_same_service_still_cannot_reach_each_other(uow, onboarded):
    shared_services.grant_service(uow, tenant_name="globex", spec=STORAGE)

    verdict = verification.verify_fabric(uow, fabric_name="ib-east")

    assert verdict.holds
    assert {(e.source, e.target) for e in verdict.reachability} == {
        ("tenant:acme", "service:storage"),
        ("tenant:globex", "service:storage"),
    }


def test_a_granted_tenant_lists_and_reads_its_grant(uow, onboarded):
    grant_id = onboarded.grant_ids["acme"]

    page = shared_services.list_grants(uow, tenant_name="acme", limit=10, cursor=None)
    one = shared_services.get_grant(uow, tenant_name="acme", grant_id=grant_id)

    assert (page.count, page.next, page.data) == (1, None, [one])
    assert (one.id, one.service) == (grant_id, "storage")


@pytest.mark.parametrize(
    ("tenant", "grant", "named"),
    [
        ("initech", STORAGE, "initech"),
        ("acme", GrantCreate(fabric="ib-east", service="backup"), "backup"),
        ("acme", GrantCreate(fabric="ib-nowhere", service="storage"), "ib-nowhere"),
    ],
    ids=["unknown-tenant", "unknown-service", "unknown-fabric"],
)
def test_a_grant_naming_something_unknown_is_not_found_naming_it(
    uow, onboarded, db_dump, tenant, grant, named
):
    before = db_dump()

    with pytest.raises(NotFoundError, match=named):
        shared_services.grant_service(uow, tenant_name=tenant, spec=grant)

    assert db_dump() == before


def test_revoking_a_grant_closes_the_service_and_the_grant_is_gone(uow, onboarded):
    grant_id = onboarded.grant_ids["acme"]

    shared_services.revoke_grant(uow, tenant_name="acme", grant_id=grant_id)

    assert edges(uow) == []
    assert shared_services.list_grants(uow, tenant_name="acme", limit=10, cursor=None).count == 0
    with pytest.raises(NotFoundError):
        shared_services.get_grant(uow, tenant_name="acme", grant_id=grant_id)
    with pytest.raises(NotFoundError):
        shared_services.revoke_grant(uow, tenant_name="acme", grant_id=grant_id)


def test_a_revoked_grant_takes_the_tenants_ports_out_of_the_service_partition(uow, onboarded):
    shared_services.revoke_grant(uow, tenant_name="acme", grant_id=onboarded.grant_ids["acme"])

    storage = partition_members(uow_partitions_conf(uow), "service_storage")

    assert "=limited" not in storage
    assert PORT_GUIDS["gpu0001"][0] not in storage


def test_revoking_another_tenants_grant_is_not_found_and_changes_nothing(uow, onboarded, db_dump):
    before = db_dump()

    with pytest.raises(NotFoundError):
        shared_services.revoke_grant(
            uow, tenant_name="globex", grant_id=onboarded.grant_ids["acme"]
        )

    assert db_dump() == before


def test_a_tenant_may_be_granted_the_service_again_after_a_revocation(uow, onboarded):
    shared_services.revoke_grant(uow, tenant_name="acme", grant_id=onboarded.grant_ids["acme"])

    again = shared_services.grant_service(uow, tenant_name="acme", spec=STORAGE)

    assert again.id != onboarded.grant_ids["acme"]
    assert edges(uow) == [("tenant:acme", "service:storage", "0x0100", True)]


@pytest.fixture
def tight(uow):
    """ib-tight: 3 P_Keys a port; storage (stor01) and scratch (stor02); acme on gpu0001, granted
    storage: gpu0001's ports hold 0x7fff, acme's key and storage's, the whole budget."""
    uow_create_fabric(uow, "ib-tight", last="0x01ff", pkeys_per_port=3)
    for service, node in (("storage", "stor01"), ("scratch", "stor02")):
        shared_services.create_service(
            uow, fabric_name="ib-tight", spec=ServiceCreate(name=service, nodes=[node])
        )
    tenants.create_tenant(uow, spec=TenantCreate(name="acme", kind="external", qos_class="gold"))
    allocations.allocate(
        uow, tenant_name="acme", spec=AllocationCreate(fabric="ib-tight", nodes=["gpu0001"])
    )
    shared_services.grant_service(
        uow, tenant_name="acme", spec=GrantCreate(fabric="ib-tight", service="storage")
    )
    return uow


def test_a_grant_that_overflows_a_ports_pkey_table_is_an_isolation_violation(tight, db_dump):
    before = db_dump()

    with pytest.raises(IsolationViolationError) as refused:
        shared_services.grant_service(
            tight, tenant_name="acme", spec=GrantCreate(fabric="ib-tight", service="scratch")
        )

    examples = refused.value.extensions["counterexamples"]
    assert {e["rule"] for e in examples} == {"pkey-budget-exceeded"}
    assert {e["a"]["guid"] for e in examples} <= set(PORT_GUIDS["gpu0001"])
    assert refused.value.extensions["snapshot_digest"].startswith("v2:")
    assert db_dump() == before


def test_a_refused_grant_leaves_the_verdict_and_the_artifacts_as_they_were(tight):
    verdict = verification.verify_fabric(tight, fabric_name="ib-tight")
    manifest = verification.list_artifacts(tight, fabric_name="ib-tight")

    with pytest.raises(IsolationViolationError):
        shared_services.grant_service(
            tight, tenant_name="acme", spec=GrantCreate(fabric="ib-tight", service="scratch")
        )

    assert verdict.holds
    assert verification.verify_fabric(tight, fabric_name="ib-tight") == verdict
    assert verification.list_artifacts(tight, fabric_name="ib-tight") == manifest
    assert shared_services.list_grants(tight, tenant_name="acme", limit=10, cursor=None).count == 1


# --- grants on RoCE: route leaks ---------------------------------------------------------------


def test_a_roce_grant_is_the_one_route_leak_edge_of_the_fabric(uow, roce_onboarded):
    verdict = verification.verify_fabric(uow, fabric_name="roce-west")

    assert verdict.holds
    assert edges(uow, "roce-west") == [("tenant:acme", "service:storage", "50000", True)]
    assert "route-leak" in verdict.rules


def test_a_roce_grant_shows_the_services_vrf_segment(uow, roce_onboarded):
    view = shared_services.get_grant(
        uow, tenant_name="acme", grant_id=roce_onboarded.grant_ids["acme"]
    )

    assert isinstance(view.segment, RoceSegmentView)
    assert view.segment.model_dump(mode="json") == roce_onboarded.service_segment
    assert (view.segment.vrf, view.segment.l3vni) == ("Vrf50000", 50000)


def test_a_second_roce_grant_adds_a_second_route_leak_edge(uow, roce_onboarded):
    shared_services.grant_service(uow, tenant_name="globex", spec=ROCE_STORAGE)

    assert edges(uow, "roce-west") == [
        ("tenant:acme", "service:storage", "50000", True),
        ("tenant:globex", "service:storage", "50000", True),
    ]


@pytest.mark.parametrize("leaf", ["leaf01", "leaf02"])
def test_only_the_granted_tenants_vrf_imports_the_storage_route_target(uow, roce_onboarded, leaf):
    parsed = parse_frr_conf(uow_artifact_text(uow, "roce-west", f"frr/{leaf}/frr.conf"))

    assert [f for f in parsed.findings if f.severity is Severity.ERROR] == []
    assert {b.vrf: set(b.rt_imports) for b in parsed.bgp if b.vrf is not None} == {
        "Vrf50000": {"65000:50000", "65000:50001"},
        "Vrf50001": {"65000:50001", "65000:50000"},
        "Vrf50002": {"65000:50002"},
        "Vrf50003": {"65000:50003"},
    }


def test_revoking_a_roce_grant_withdraws_the_route_leak(uow, roce_onboarded):
    shared_services.revoke_grant(uow, tenant_name="acme", grant_id=roce_onboarded.grant_ids["acme"])

    parsed = parse_frr_conf(uow_artifact_text(uow, "roce-west", "frr/leaf01/frr.conf"))
    imports = {b.vrf: set(b.rt_imports) for b in parsed.bgp if b.vrf is not None}
    assert edges(uow, "roce-west") == []
    assert imports["Vrf50000"] == {"65000:50000"}
    assert imports["Vrf50001"] == {"65000:50001"}


def test_a_grant_of_an_unknown_service_on_roce_is_not_found(uow, roce_onboarded, db_dump):
    before = db_dump()

    with pytest.raises(NotFoundError, match="scratch"):
        shared_services.grant_service(
            uow, tenant_name="research", spec=GrantCreate(fabric="roce-west", service="scratch")
        )

    assert db_dump() == before
