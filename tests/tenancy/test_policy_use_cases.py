"""The policy in the service without HTTP (issue 13): versions, enforcement on every fabric and
every quota, PATCH of a tenant, default grants; on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from policies.errors import ConflictError, IsolationViolationError, NotFoundError
from tenancy.gate import full_check
from tenancy.gate.what_if import DryRunDone, rehearsing
from tenancy.schemas import AllocationCreate, GrantCreate, TenantCreate
from tenancy.schemas.changesets import ChangeSetCreate
from tenancy.schemas.policy import PolicyDocument
from tenancy.schemas.tenants import TenantPatch
from tenancy.schemas.what_if import DryRunView
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, changesets, policy, shared_services, tenant_patch, tenants
from tests.builders import FABRIC, audit_trail, rows

ONE_NODE = AllocationCreate(fabric=FABRIC, count=1)


def put(uow: UnitOfWork, document: dict[str, Any]) -> int:
    return policy.put_policy(uow, document=PolicyDocument.model_validate(document)).version


def patch(uow: UnitOfWork, tenant: str, **change: Any) -> Any:
    spec = TenantPatch.model_validate(change)
    return tenant_patch.patch_tenant(uow, name=tenant, spec=spec)


def rules(error: pytest.ExceptionInfo[IsolationViolationError]) -> list[str]:
    return [c["rule"] for c in error.value.extensions["counterexamples"]]


# --- versions and enforcement ------------------------------------------------------------------


def test_a_policy_change_rebuilds_the_digest_state_that_a_full_check_then_confirms(
    uow, onboarded, engine
):
    before = full_check.full_check(uow, fabric_name=FABRIC)

    version = put(uow, {"kinds": {"external": {"qos_classes": ["gold", "bronze"]}}})

    after = full_check.full_check(uow, fabric_name=FABRIC)
    assert version == 1
    assert after.matches and after.holds and after.alarm is None
    assert after.digest != before.digest
    newest = rows(
        engine, "SELECT digest, policy_version FROM snapshot_record ORDER BY id DESC LIMIT 1"
    )
    assert newest == [(after.digest, 1)]


def test_a_policy_without_fabrics_is_audited_once(uow, engine):
    assert put(uow, {"kinds": {"internal": {"max_nodes": 8}}}) == 1

    assert audit_trail(engine)[-1] == ("policy.update", "policy/versions/1")
    assert rows(engine, "SELECT version, created_by FROM policy_version") == [(1, "system")]


def test_a_refused_policy_writes_nothing(uow, onboarded, db_dump):
    before = db_dump()

    with pytest.raises(IsolationViolationError) as refused:
        put(uow, {"services": {"storage": "internal"}})  # acme (external) holds a grant

    assert rules(refused) == ["policy-service-visibility"]
    assert refused.value.extensions["counterexamples"][0]["fabric"] == FABRIC
    assert db_dump() == before
    assert policy.get_policy(uow).version == 0


# --- quotas ------------------------------------------------------------------------------------


def test_an_allocation_over_the_kinds_quota_is_refused_and_writes_nothing(uow, onboarded, db_dump):
    put(uow, {"kinds": {"external": {"max_nodes": 2}}})  # acme and globex hold 2 each
    before = db_dump()

    with pytest.raises(IsolationViolationError) as refused:
        allocations.allocate(uow, tenant_name="acme", spec=ONE_NODE)

    assert rules(refused) == ["policy-quota"]
    assert "holds 3 nodes" in refused.value.extensions["counterexamples"][0]["message"]
    assert db_dump() == before
    allocations.allocate(uow, tenant_name="research", spec=ONE_NODE)  # internal: no quota


def test_a_tenants_own_quota_wins_over_its_kinds(uow, onboarded):
    put(uow, {"kinds": {"internal": {"max_nodes": 2}}})
    assert patch(uow, "research", max_nodes=3).max_nodes == 3

    allocations.allocate(uow, tenant_name="research", spec=ONE_NODE)

    with pytest.raises(IsolationViolationError) as refused:
        allocations.allocate(uow, tenant_name="research", spec=ONE_NODE)
    assert "its own quota of 3" in refused.value.extensions["counterexamples"][0]["message"]


def test_a_change_set_over_a_quota_is_refused_whole(uow, onboarded, db_dump):
    patch(uow, "globex", max_nodes=3)
    before = db_dump()
    spec = ChangeSetCreate.model_validate(
        {
            "operations": [
                {"op": "allocate", "tenant": "globex", "fabric": FABRIC, "count": 1},
                {"op": "allocate", "tenant": "globex", "fabric": FABRIC, "count": 1},
            ]
        }
    )

    with pytest.raises(IsolationViolationError) as refused:
        changesets.apply_changeset(uow, spec=spec)

    assert refused.value.extensions["operation"] == 1 and rules(refused) == ["policy-quota"]
    assert db_dump() == before


# --- PATCH /v1/tenants/{tenant} ---------------------------------------------------------------


def test_a_quota_below_what_the_tenant_holds_is_refused(uow, onboarded, db_dump):
    before = db_dump()

    with pytest.raises(IsolationViolationError) as refused:
        patch(uow, "acme", max_nodes=1)

    assert rules(refused) == ["policy-quota"]
    assert db_dump() == before


def test_a_class_the_kind_may_not_hold_is_refused_even_with_nothing_held(uow, onboarded):
    put(uow, {"kinds": {"external": {"qos_classes": ["gold", "bronze"]}}})
    tenants.create_tenant(uow, spec=TenantCreate(name="initech", kind="external"))

    for tenant in ("initech", "acme"):
        with pytest.raises(IsolationViolationError) as refused:
            patch(uow, tenant, qos_class="silver")
        assert rules(refused) == ["policy-qos-class"]
    assert tenants.get_tenant(uow, name="acme").qos_class == "gold"


def test_a_class_change_is_verified_audited_and_restates_the_open_usage(
    uow, onboarded, engine, clock
):
    clock.advance(3600)

    view = patch(uow, "acme", qos_class="silver", billing_account="acct-7")

    assert (view.qos_class, view.billing_account) == ("silver", "acct-7")
    assert audit_trail(engine)[-1] == ("tenant.update", "tenants/acme")
    open_now = rows(
        engine,
        "SELECT u.qos_class, u.billing_account FROM usage_interval u JOIN tenant t "
        "ON t.id = u.tenant_id WHERE t.name = 'acme' AND u.ended_at IS NULL",
    )
    assert sorted(set(open_now)) == [("silver", "acct-7")] and len(open_now) == 3
    closed = rows(
        engine,
        "SELECT DISTINCT u.qos_class FROM usage_interval u JOIN tenant t ON t.id = u.tenant_id "
        "WHERE t.name = 'acme' AND u.ended_at IS NOT NULL",
    )
    assert closed == [("gold",)]


def test_a_patch_that_changes_nothing_writes_nothing(uow, onboarded, db_dump):
    before = db_dump()

    view = patch(uow, "acme", qos_class="gold", billing_account="acme", max_nodes=None)

    assert (view.qos_class, view.max_nodes) == ("gold", None)
    assert db_dump() == before


def test_a_dry_run_patch_writes_nothing(uow, onboarded, db_dump):
    before = db_dump()

    with pytest.raises(DryRunDone) as done:
        patch(rehearsing(uow), "acme", qos_class="silver")

    assert isinstance(done.value.answer, DryRunView)
    assert [(f.fabric, f.holds) for f in done.value.answer.fabrics] == [(FABRIC, True)]
    assert db_dump() == before


def test_an_unknown_class_or_an_offboarded_tenant_is_refused(uow, onboarded):
    with pytest.raises(NotFoundError):
        patch(uow, "acme", qos_class="platinum")
    tenants.offboard_tenant(uow, name="globex")
    with pytest.raises(ConflictError):
        patch(uow, "globex", max_nodes=4)


# --- default grants ----------------------------------------------------------------------------


def test_the_first_allocation_on_a_fabric_brings_the_kinds_default_grants(uow, onboarded, engine):
    put(uow, {"kinds": {"external": {"default_grants": ["storage", "telemetry"]}}})
    tenants.create_tenant(uow, spec=TenantCreate(name="initech", kind="external"))

    allocations.allocate(uow, tenant_name="initech", spec=ONE_NODE)
    allocations.allocate(uow, tenant_name="initech", spec=ONE_NODE)

    grants = shared_services.list_grants(uow, tenant_name="initech", limit=10, cursor=None)
    assert [(g.fabric, g.service) for g in grants.data] == [(FABRIC, "storage")]  # no telemetry
    trail = audit_trail(engine)
    assert [action for action, _ in trail[-3:]] == [
        "allocation.create",
        "grant.create",
        "allocation.create",
    ]


def test_a_default_grant_the_visibility_forbids_or_already_held_is_not_made(uow, onboarded):
    put(
        uow,
        {
            "kinds": {"internal": {"default_grants": ["storage"]}},
            "services": {"storage": "external"},
        },
    )
    tenants.create_tenant(uow, spec=TenantCreate(name="lab", kind="internal"))
    allocations.allocate(uow, tenant_name="lab", spec=ONE_NODE)
    assert shared_services.list_grants(uow, tenant_name="lab", limit=10, cursor=None).count == 0

    put(uow, {"kinds": {"external": {"default_grants": ["storage"]}}})
    tenants.create_tenant(uow, spec=TenantCreate(name="initech", kind="external"))
    shared_services.grant_service(
        uow, tenant_name="initech", spec=GrantCreate(fabric=FABRIC, service="storage")
    )
    allocations.allocate(uow, tenant_name="initech", spec=ONE_NODE)  # granted once, not twice
    assert shared_services.list_grants(uow, tenant_name="initech", limit=10, cursor=None).count == 1


def test_class_changes_on_roce_keep_the_incremental_digest_the_whole_ones(uow, roce_onboarded):
    for tenant, qos in (("acme", "silver"), ("globex", "gold"), ("acme", "bronze")):
        patch(uow, tenant, qos_class=qos)  # the gate's cross-check compares with the whole

        assert full_check.full_check(uow, fabric_name="roce-west").matches
