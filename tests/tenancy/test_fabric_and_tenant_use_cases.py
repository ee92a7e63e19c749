"""Fabrics, QoS classes and tenants without HTTP: what creation records, names that must be
unique, lookups of unknown names, and the RoCE settings a fabric is refused for."""

from __future__ import annotations

from typing import Any

import pytest

from policies.errors import ConflictError, InvalidValueError, NotFoundError
from tenancy.schemas import PKeyRange, QosClassCreate, RoceFabricCreate, TenantCreate
from tenancy.usecases import fabrics, tenants
from tests.builders import ROCE_FABRIC_SPEC, audit_trail, fabric_spec, rows

ACME = TenantCreate(name="acme", kind="external", qos_class="gold")


# --- fabrics -----------------------------------------------------------------------------------


def test_an_infiniband_fabric_records_its_range_and_the_default_key_budget(uow, clock):
    view = fabrics.create_fabric(uow, spec=fabric_spec())

    assert view.model_dump(exclude_none=True) == {
        "name": "ib-east",
        "kind": "infiniband",
        "pkey_range": {"first": "0x0100", "last": "0x7ffe"},
        "pkeys_per_port": 128,
        "virtual_guids": {"enabled": False, "ranges": [], "sm": "nvidia"},
        "created_at": clock.now,
    }
    assert fabrics.get_fabric(uow, name="ib-east") == view


def test_the_pkey_range_is_kept_in_canonical_lower_case_four_digit_hex(uow):
    view = fabrics.create_fabric(uow, spec=fabric_spec("ib-west", first="0X1A", last="0x7FFE"))

    assert view.pkey_range == PKeyRange(first="0x001a", last="0x7ffe")


def test_fabrics_are_listed_by_name_with_their_count(uow):
    for name in ("ib-west", "ib-east"):
        fabrics.create_fabric(uow, spec=fabric_spec(name))

    page = fabrics.list_fabrics(uow, limit=10, cursor=None)

    assert ([f.name for f in page.data], page.count, page.next) == (["ib-east", "ib-west"], 2, None)


def test_creating_a_fabric_is_audited(uow, engine):
    fabrics.create_fabric(uow, spec=fabric_spec())

    assert audit_trail(engine) == [("fabric.create", "fabrics/ib-east")]


def test_an_unknown_fabric_is_not_found_naming_it(uow):
    with pytest.raises(NotFoundError, match="ib-nowhere"):
        fabrics.get_fabric(uow, name="ib-nowhere")


def test_a_roce_fabric_records_every_setting_and_no_pkey_fields(uow, clock):
    view = fabrics.create_fabric(uow, spec=RoceFabricCreate.model_validate(ROCE_FABRIC_SPEC))

    assert view.model_dump(mode="json", exclude_none=True) == {
        **ROCE_FABRIC_SPEC,
        "created_at": "2026-03-01T12:00:00Z",
    }
    assert (view.pkey_range, view.pkeys_per_port) == (None, None)


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        pytest.param({"l2vni_range": {"first": 10000, "last": 50000}}, "overlap", id="vni-overlap"),
        # A 4-byte rt_asn is the schema's to refuse (tests/api/test_strict_bodies.py).
        pytest.param({"host_mtu": 9200}, "9250", id="host-mtu-without-vxlan-room"),
        pytest.param({"tenant_prefix_length": 8}, "/8", id="prefix-shorter-than-pool"),
    ],
)
def test_inconsistent_roce_settings_are_refused_naming_the_setting(
    uow, engine, overrides: dict[str, Any], named
):
    spec = RoceFabricCreate.model_validate({**ROCE_FABRIC_SPEC, **overrides})

    with pytest.raises(InvalidValueError, match=named):
        fabrics.create_fabric(uow, spec=spec)

    assert rows(engine, "SELECT count(*) FROM fabric") == [(0,)]


# --- QoS classes -------------------------------------------------------------------------------


def test_gold_silver_and_bronze_are_seeded_with_their_treatment(uow):
    page = tenants.list_qos_classes(uow, limit=10, cursor=None)

    assert [
        (q.name, q.ib_sl, q.vlarb_weight, q.roce_dscp, q.roce_tc, q.lossless, q.ets_weight)
        for q in page.data
    ] == [
        ("bronze", 1, 16, 10, 1, False, 20),
        ("gold", 3, 128, 26, 3, True, 50),
        ("silver", 2, 64, 28, 4, True, 30),
    ]
    assert page.count == 3


def test_a_new_qos_class_takes_the_defaults_for_what_it_leaves_out(uow):
    view = tenants.create_qos_class(uow, spec=QosClassCreate(name="platinum", ib_sl=4))

    assert view.model_dump() == {
        "name": "platinum",
        "ib_sl": 4,
        "ib_rate": 3,
        "ib_mtu": 4,
        "vlarb_weight": 32,
        "roce_dscp": 0,
        "roce_tc": 0,
        "lossless": False,
        "ets_weight": 10,
        "ecn_min_bytes": 153600,
        "ecn_max_bytes": 1536000,
        "ecn_probability": 5,
    }
    assert tenants.list_qos_classes(uow, limit=10, cursor=None).count == 4


def test_a_second_qos_class_named_gold_is_a_conflict(uow, db_dump):
    before = db_dump()

    with pytest.raises(ConflictError, match="gold"):
        tenants.create_qos_class(uow, spec=QosClassCreate(name="gold", ib_sl=5))

    assert db_dump() == before


# --- tenants -----------------------------------------------------------------------------------


def test_a_new_tenant_is_active_and_billed_to_its_own_name(uow, clock):
    view = tenants.create_tenant(uow, spec=ACME)

    assert view.model_dump() == {
        "name": "acme",
        "kind": "external",
        "status": "active",
        "qos_class": "gold",
        "created_at": clock.now,
        "offboarded_at": None,
        "billing_account": "acme",
        "max_nodes": None,
    }
    assert tenants.get_tenant(uow, name="acme") == view


def test_a_tenant_without_a_qos_class_gets_bronze(uow):
    view = tenants.create_tenant(uow, spec=TenantCreate(name="initech", kind="internal"))

    assert view.qos_class == "bronze"


def test_tenants_are_listed_by_name_and_filtered_by_kind_and_status(uow, onboarded):
    everyone = tenants.list_tenants(uow, limit=10, cursor=None)
    external = tenants.list_tenants(uow, limit=10, cursor=None, kind="external")
    offboarded = tenants.list_tenants(uow, limit=10, cursor=None, status="offboarded")

    assert ([t.name for t in everyone.data], everyone.count) == (["acme", "globex", "research"], 3)
    assert ([t.name for t in external.data], external.count) == (["acme", "globex"], 2)
    assert (offboarded.data, offboarded.count) == ([], 0)


def test_a_tenant_scoped_listing_shows_only_that_tenant(uow, onboarded):
    page = tenants.list_tenants(uow, limit=10, cursor=None, only="globex")

    assert ([t.name for t in page.data], page.count) == (["globex"], 1)


def test_a_second_tenant_named_acme_is_a_conflict_naming_it(uow, db_dump):
    tenants.create_tenant(uow, spec=ACME)
    before = db_dump()

    with pytest.raises(ConflictError, match="acme"):
        tenants.create_tenant(uow, spec=TenantCreate(name="acme", kind="internal"))

    assert db_dump() == before


def test_a_tenant_with_an_unknown_qos_class_is_refused_naming_the_class(uow, db_dump):
    before = db_dump()

    with pytest.raises(NotFoundError, match="platinum"):
        tenants.create_tenant(
            uow, spec=TenantCreate(name="acme", kind="external", qos_class="platinum")
        )

    assert db_dump() == before


def test_a_taken_name_is_the_conflict_even_with_an_unknown_qos_class(uow, db_dump):
    tenants.create_tenant(uow, spec=ACME)
    before = db_dump()

    with pytest.raises(ConflictError, match="acme"):
        tenants.create_tenant(
            uow, spec=TenantCreate(name="acme", kind="external", qos_class="platinum")
        )

    assert db_dump() == before


def test_an_unknown_tenant_is_not_found_naming_it(uow):
    with pytest.raises(NotFoundError, match="initech"):
        tenants.get_tenant(uow, name="initech")
