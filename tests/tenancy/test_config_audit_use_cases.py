"""Config audits and observations without HTTP: deployed files and live P_Key tables compared
with the record; findings, drift and counterexamples; what an audit is refused for."""

from __future__ import annotations

import pytest

from policies.errors import InputFormatError, InvalidValueError, NotFoundError
from tenancy.gate import verification
from tenancy.schemas import DriftView, ObservationCreate, PortDriftView
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import config_audits
from tests.builders import PORT_GUIDS, TENANT_PKEYS, uow_artifact_text, uow_partitions_conf

ACME_GUID = PORT_GUIDS["gpu0001"][0]
GLOBEX_LAST = PORT_GUIDS["gpu0006"][1]


def audit(uow: UnitOfWork, text: str, fmt: str = "partitions", leaf: str | None = None):
    fabric = "ib-east" if fmt == "partitions" else "roce-west"
    return config_audits.audit_config(uow, fabric_name=fabric, fmt=fmt, leaf=leaf, text=text)


def with_acme_in_globex(text: str) -> str:
    """partitions.conf with acme's first port added to globex's partition."""
    edited = text.replace(
        f"    {GLOBEX_LAST}=full ;", f"    {GLOBEX_LAST}=full,\n    {ACME_GUID}=full ;"
    )
    assert edited != text
    return edited


# --- InfiniBand --------------------------------------------------------------------------------


def test_the_rendered_partitions_conf_audits_clean_and_changes_nothing(uow, onboarded, db_dump):
    before = db_dump()

    report = audit(uow, uow_partitions_conf(uow))

    assert (report.fabric, report.format, report.leaf) == ("ib-east", "partitions", None)
    assert (
        report.snapshot_digest
        == verification.verify_fabric(uow, fabric_name="ib-east").snapshot_digest
    )
    assert report.holds
    assert report.findings == report.drift == report.counterexamples == []
    assert db_dump() == before


def test_an_acme_port_in_globex_partition_is_drift_and_a_counterexample(uow, onboarded):
    report = audit(uow, with_acme_in_globex(uow_partitions_conf(uow)))

    assert not report.holds
    assert report.drift == [
        DriftView(
            owner="tenant:globex", segment=TENANT_PKEYS["globex"], added=[ACME_GUID], missing=[]
        )
    ]
    [example] = report.counterexamples
    assert (example.rule, example.partition) == (
        "cross-tenant-reachability",
        TENANT_PKEYS["globex"],
    )
    assert example.a is not None and example.b is not None
    assert {example.a.owner, example.b.owner} == {"tenant:acme", "tenant:globex"}
    assert ACME_GUID in (example.a.guid, example.b.guid)


def test_a_port_missing_from_its_partition_is_drift_without_a_counterexample(uow, onboarded):
    text = uow_partitions_conf(uow).replace(f"    {GLOBEX_LAST}=full ;", "")
    text = text.replace(f"{PORT_GUIDS['gpu0006'][0]}=full,", f"{PORT_GUIDS['gpu0006'][0]}=full ;")

    report = audit(uow, text)

    assert [(d.owner, d.added, d.missing) for d in report.drift] == [
        ("tenant:globex", [], [GLOBEX_LAST])
    ]
    assert report.counterexamples == []


def test_a_guid_without_0x_is_a_critical_fail_open_finding(uow, onboarded):
    research = PORT_GUIDS["gpu0003"][0]  # ...0b: strtoul stops at the 'b', OpenSM discards it

    report = audit(uow, uow_partitions_conf(uow).replace(research, research[2:]))

    finding = next(f for f in report.findings if f.code == "guid-without-0x")
    assert finding.severity == "critical" and isinstance(finding.line, int)
    assert {"default-partition-full-member", "cross-tenant-reachability"} <= {
        c.rule for c in report.counterexamples
    }
    assert not report.holds


@pytest.mark.parametrize(
    ("fmt", "leaf", "named"),
    [
        ("opensm", None, "opensm"),
        ("partitions", "leaf01", "leaf"),
        ("frr", "leaf01", "frr"),
        ("config_db", "leaf01", "config_db"),
    ],
    ids=["unknown-format", "leaf-for-partitions", "frr-on-infiniband", "config-db-on-infiniband"],
)
def test_an_audit_in_a_format_that_does_not_apply_is_refused_naming_it(
    uow, onboarded, fmt, leaf, named
):
    with pytest.raises(InvalidValueError, match=named):
        config_audits.audit_config(
            uow, fabric_name="ib-east", fmt=fmt, leaf=leaf, text=uow_partitions_conf(uow)
        )


def test_an_audit_of_an_unknown_fabric_is_not_found(uow, onboarded):
    with pytest.raises(NotFoundError, match="nope"):
        config_audits.audit_config(uow, fabric_name="nope", fmt="partitions", leaf=None, text="")


def test_observed_pkey_tables_report_drift_per_port_and_what_they_allow(uow, onboarded):
    document = ObservationCreate.model_validate(
        {
            "kind": "infiniband",
            "collected_at": "2026-01-01T00:00:00Z",
            "ports": [
                {"guid": ACME_GUID, "lid": 3, "pkeys": ["0x7fff", "0x8101", "0x0100", "0x8103"]},
                {"guid": GLOBEX_LAST, "lid": 4, "pkeys": ["0x7fff", "0x8103"]},
            ],
        }
    )

    report = config_audits.observe(uow, fabric_name="ib-east", document=document)

    acme = next(p for p in report.ports if p.guid == ACME_GUID)
    assert acme == PortDriftView(
        guid=ACME_GUID, node="gpu0001", owner="tenant:acme", missing=[], unexpected=["0x8103"]
    )
    assert not report.holds
    assert any(
        c.rule == "cross-tenant-reachability" and c.partition == TENANT_PKEYS["globex"]
        for c in report.counterexamples
    )


def test_observations_apply_to_infiniband_fabrics_only(uow, roce_onboarded):
    document = ObservationCreate.model_validate({"kind": "infiniband", "ports": []})

    with pytest.raises(InvalidValueError, match="InfiniBand"):
        config_audits.observe(uow, fabric_name="roce-west", document=document)


# --- RoCE --------------------------------------------------------------------------------------


@pytest.mark.parametrize("leaf", ["leaf01", "leaf02"])
@pytest.mark.parametrize(
    ("fmt", "path"), [("config_db", "sonic/{}/config_db.json"), ("frr", "frr/{}/frr.conf")]
)
def test_the_rendered_roce_artifacts_audit_clean(uow, roce_onboarded, leaf, fmt, path):
    report = audit(uow, uow_artifact_text(uow, "roce-west", path.format(leaf)), fmt, leaf)

    assert (report.leaf, report.format) == (leaf, fmt)
    assert report.holds, report
    assert report.drift == [] and report.counterexamples == []


def test_a_rendered_frr_conf_reports_granted_routes_as_reachability(uow, roce_onboarded):
    """A grant leaks routes both ways: the tenant reaches the service through the service's
    L3VNI and the service reaches the tenant through the tenant's; nothing else is reachable."""
    storage = roce_onboarded.service_segment["l3vni"]
    acme = roce_onboarded.segments["acme"]["l3vni"]
    assert set(roce_onboarded.grant_ids) == {"acme"}

    for leaf in ("leaf01", "leaf02"):
        text = uow_artifact_text(uow, "roce-west", f"frr/{leaf}/frr.conf")
        edges = audit(uow, text, "frr", leaf).reachability
        assert {(e.source, e.target, e.segment, e.allowed) for e in edges} == {
            ("tenant:acme", "service:storage", str(storage), True),
            ("service:storage", "tenant:acme", str(acme), True),
        }


def test_an_extra_route_target_import_in_frr_is_drift_and_a_counterexample(uow, roce_onboarded):
    globex, acme = roce_onboarded.segments["globex"], roce_onboarded.segments["acme"]
    own = f"  route-target import 65000:{globex['l3vni']}\n"
    text = uow_artifact_text(uow, "roce-west", "frr/leaf01/frr.conf")
    assert own in text
    leaked = text.replace(own, own + f"  route-target import 65000:{acme['l3vni']}\n", 1)

    report = audit(uow, leaked, "frr", "leaf01")

    assert report.drift == [
        DriftView(
            owner="tenant:globex",
            segment=globex["vrf"],
            added=[f"65000:{acme['l3vni']}"],
            missing=[],
        )
    ]
    [example] = report.counterexamples
    assert (example.rule, example.partition) == ("cross-tenant-reachability", str(globex["l3vni"]))
    assert not report.holds


@pytest.mark.parametrize(
    ("fmt", "leaf"),
    [("frr", None), ("frr", "spine01"), ("config_db", "leaf09"), ("partitions", None)],
    ids=["no-leaf", "a-spine", "unknown-leaf", "infiniband-format"],
)
def test_a_roce_audit_needs_a_leaf_of_the_fabric_and_a_roce_format(uow, roce_onboarded, fmt, leaf):
    text = uow_artifact_text(uow, "roce-west", "frr/leaf01/frr.conf")

    with pytest.raises(InvalidValueError):
        config_audits.audit_config(uow, fabric_name="roce-west", fmt=fmt, leaf=leaf, text=text)


def test_a_config_db_that_does_not_parse_is_an_input_format_error(uow, roce_onboarded):
    with pytest.raises(InputFormatError):
        audit(uow, "{not json", "config_db", "leaf01")
