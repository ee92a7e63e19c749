"""Config audits and observations through the API: deployed files and live tables vs. intent."""

from __future__ import annotations

import json
from collections.abc import Callable

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from cli import app
from tenancy.gate.verification import get_artifact
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.bootstrap import prepare_database
from tests.builders import (
    PORT_GUIDS,
    TENANT_PKEYS,
    TEXT_PLAIN,
    Dump,
    Onboarded,
    assert_problem,
    ok,
    uow_onboard,
)
from tests.keys import keys_create

AUDITS = "/v1/fabrics/ib-east/audits"
OBSERVATIONS = "/v1/fabrics/ib-east/observations"
ROCE_AUDITS = "/v1/fabrics/roce-west/audits"
PARTITIONS = "/v1/fabrics/ib-east/artifacts/opensm/partitions.conf"
ACME_GUID = PORT_GUIDS["gpu0001"][0]
GLOBEX_LAST = PORT_GUIDS["gpu0006"][1]


def audit(client: TestClient, text: str, query: str = "format=partitions", url: str = AUDITS):
    return client.post(f"{url}?{query}", content=text, headers=TEXT_PLAIN)


def rendered(client: TestClient) -> str:
    response = client.get(PARTITIONS)
    assert response.status_code == 200
    return response.text


def test_the_rendered_partitions_conf_audits_clean(client, onboarded: Onboarded, db_dump) -> None:
    before = db_dump()
    verdict = ok(client.get("/v1/fabrics/ib-east/verification"))

    report = ok(audit(client, rendered(client)))

    assert report["fabric"] == "ib-east" and report["format"] == "partitions"
    assert report["leaf"] is None
    assert report["snapshot_digest"] == verdict["snapshot_digest"]
    assert report["holds"] is True
    assert report["findings"] == report["drift"] == report["counterexamples"] == []
    assert db_dump() == before


def test_a_partitions_audit_derives_the_reachability_the_file_grants(
    client, onboarded: Onboarded
) -> None:
    """acme holds the storage grant on ib-east: the storage partition makes the two reach."""
    report = ok(audit(client, rendered(client)))

    edges = {(e["from"], e["to"]) for e in report["reachability"]}
    assert ("tenant:acme", "service:storage") in edges or (
        "service:storage",
        "tenant:acme",
    ) in edges
    assert all(e["allowed"] for e in report["reachability"])
    assert not any(e["from"] == e["to"] for e in report["reachability"])
    assert "P_Key" in report["reachability_scope"]


def test_an_acme_guid_in_globex_partition_is_drift_and_a_counterexample(
    client, onboarded: Onboarded, db_dump: Callable[[], Dump]
) -> None:
    before = db_dump()
    text = rendered(client).replace(
        f"    {GLOBEX_LAST}=full ;", f"    {GLOBEX_LAST}=full,\n    {ACME_GUID}=full ;"
    )

    report = ok(audit(client, text))

    assert report["holds"] is False
    assert report["drift"] == [
        {
            "owner": "tenant:globex",
            "segment": TENANT_PKEYS["globex"],
            "added": [ACME_GUID],
            "missing": [],
            "changed": [],
        }
    ]
    [example] = report["counterexamples"]
    assert example["rule"] == "cross-tenant-reachability"
    assert example["partition"] == TENANT_PKEYS["globex"]
    assert {example["a"]["owner"], example["b"]["owner"]} == {"tenant:acme", "tenant:globex"}
    assert ACME_GUID in (example["a"]["guid"], example["b"]["guid"])
    assert db_dump() == before


def test_bad_format_or_leaf_is_a_422_problem(client, onboarded: Onboarded, db_dump) -> None:
    before = db_dump()
    text = rendered(client)

    assert_problem(audit(client, text, "format=opensm"), 422)
    assert_problem(audit(client, text, ""), 422)
    assert_problem(audit(client, text, "format=partitions&leaf=leaf01"), 422)
    assert_problem(audit(client, text, "format=frr&leaf=leaf01"), 422)  # not a RoCE fabric
    assert_problem(audit(client, text, "format=partitions&leaf=Bad%20Leaf"), 422)
    assert_problem(audit(client, text, url="/v1/fabrics/nope/audits"), 404)
    assert db_dump() == before


def test_observed_tables_report_drift_and_reachability(client, onboarded: Onboarded) -> None:
    ports = [
        {"guid": ACME_GUID, "lid": 3, "pkeys": ["0x7fff", "0x8101", "0x0100", "0x8103"]},
        {"guid": GLOBEX_LAST, "lid": 4, "pkeys": ["0x7fff", "0x8103"]},
    ]
    body = {"kind": "infiniband", "collected_at": "2026-01-01T00:00:00Z", "ports": ports}

    report = ok(client.post(OBSERVATIONS, json=body))

    acme = next(p for p in report["ports"] if p["guid"] == ACME_GUID)
    assert acme == {
        "guid": ACME_GUID,
        "node": "gpu0001",
        "owner": "tenant:acme",
        "missing": [],
        "unexpected": ["0x8103"],
    }
    assert report["holds"] is False
    assert any(
        c["rule"] == "cross-tenant-reachability" and c["partition"] == TENANT_PKEYS["globex"]
        for c in report["counterexamples"]
    )
    assert_problem(client.post(OBSERVATIONS, json={"kind": "roce", "ports": []}), 422)
    bad_guid = {"kind": "infiniband", "ports": [{"guid": "12", "lid": 1, "pkeys": []}]}
    assert_problem(client.post(OBSERVATIONS, json=bad_guid), 422)


def test_a_port_the_collector_could_not_read_is_unobserved_not_empty(
    client, onboarded: Onboarded
) -> None:
    acme = {"guid": ACME_GUID, "lid": 3, "pkeys": ["0x7fff", "0x8101", "0x0100"]}
    failed = {"guid": GLOBEX_LAST, "lid": 4, "error": "smpquery pkeys 4 exited 255: ibwarn"}
    read_as_empty = {"guid": GLOBEX_LAST, "lid": 4, "pkeys": []}  # what must not happen

    report = ok(client.post(OBSERVATIONS, json={"kind": "infiniband", "ports": [acme, failed]}))
    empty = ok(
        client.post(OBSERVATIONS, json={"kind": "infiniband", "ports": [acme, read_as_empty]})
    )

    assert GLOBEX_LAST not in {p["guid"] for p in report["ports"]}
    assert report["unobserved"] == [
        {"guid": GLOBEX_LAST, "node": "gpu0006", "error": failed["error"]}
    ]
    globex = next(p for p in empty["ports"] if p["guid"] == GLOBEX_LAST)
    assert globex["missing"] == ["0x7fff", "0x8103"] and empty["unobserved"] == []


def test_a_port_has_pkeys_or_an_error_not_both_nor_neither(client, onboarded: Onboarded) -> None:
    port = {"guid": ACME_GUID, "lid": 3}
    both, long_error = {**port, "pkeys": [], "error": "x"}, {**port, "error": "x" * 4097}
    for bad in (both, port, {**port, "error": ""}, long_error):
        body = {"kind": "infiniband", "ports": [bad]}
        problem = assert_problem(client.post(OBSERVATIONS, json=body), 422)
        assert problem["errors"][0]["pointer"].startswith("/body/ports/0")
    problem = assert_problem(
        client.post(OBSERVATIONS, json={"kind": "infiniband", "ports": [both]}), 422
    )
    assert "either 'pkeys' (read) or 'error' (not read)" in problem["detail"]
    legacy = {"kind": "infiniband", "ports": [{**port, "pkeys": []}]}  # clients before issue 14
    assert ok(client.post(OBSERVATIONS, json=legacy))["unobserved"] == []


# --- RoCE -----------------------------------------------------------------------------------------


def roce_artifact(client: TestClient, path: str) -> str:
    response = client.get(f"/v1/fabrics/roce-west/artifacts/{path}")
    assert response.status_code == 200
    return response.text


def test_roce_config_db_and_frr_audit_clean(client, roce_onboarded, db_dump) -> None:
    before = db_dump()
    for leaf in ("leaf01", "leaf02"):
        for fmt, path in (
            ("config_db", f"sonic/{leaf}/config_db.json"),
            ("frr", f"frr/{leaf}/frr.conf"),
        ):
            report = ok(
                audit(client, roce_artifact(client, path), f"format={fmt}&leaf={leaf}", ROCE_AUDITS)
            )
            assert report["leaf"] == leaf and report["format"] == fmt
            assert report["holds"] is True, report
            assert report["drift"] == [] and report["counterexamples"] == []
    assert db_dump() == before


def test_every_format_derives_the_reachability_it_can_and_says_from_what(
    client, roce_onboarded
) -> None:
    """acme holds a storage grant on roce-west: frr.conf shows it; config_db.json, L2 only,
    cannot (its scope says so, so its empty list does not read as 'nothing reachable')."""
    edge = {"from": "tenant:acme", "to": "service:storage"}
    shown = {}
    for fmt, path in (("config_db", "sonic/leaf01/config_db.json"), ("frr", "frr/leaf01/frr.conf")):
        text = roce_artifact(client, path)
        report = ok(audit(client, text, f"format={fmt}&leaf=leaf01", ROCE_AUDITS))
        shown[fmt] = [{k: e[k] for k in edge} for e in report["reachability"]]
        assert report["reachability_scope"]
    assert edge in shown["frr"] and shown["config_db"] == []


def test_roce_audits_need_a_leaf_of_the_fabric(client, roce_onboarded) -> None:
    text = roce_artifact(client, "frr/leaf01/frr.conf")

    assert_problem(audit(client, text, "format=frr", ROCE_AUDITS), 422)
    assert_problem(audit(client, text, "format=frr&leaf=spine01", ROCE_AUDITS), 422)
    assert_problem(audit(client, text, "format=partitions", ROCE_AUDITS), 422)
    assert_problem(audit(client, "{not json", "format=config_db&leaf=leaf01", ROCE_AUDITS), 422)


# --- CLI ----------------------------------------------------------------------------------------


def test_cli_audit_config_prints_the_report_and_exits_1_on_violation(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    keys_create(url)  # the OpenSM secret beside cli.db: the OpenSM files render with it
    engine = make_engine(url)
    prepare_database(engine)
    uow = UnitOfWork(engine, Settings(database_url=url))
    uow_onboard(uow)
    text = get_artifact(uow, fabric_name="ib-east", path="opensm/partitions.conf")[
        0
    ].content.decode()
    engine.dispose()
    clean, edited = tmp_path / "partitions.conf", tmp_path / "edited.conf"
    clean.write_text(text)
    edited.write_text(
        text.replace(
            f"    {GLOBEX_LAST}=full ;", f"    {GLOBEX_LAST}=full,\n    {ACME_GUID}=full ;"
        )
    )
    runner = CliRunner()

    good = runner.invoke(app, ["audit-config", str(clean), "--fabric", "ib-east", "--db", url])
    bad = runner.invoke(
        app,
        ["audit-config", str(edited), "--fabric", "ib-east", "--format", "partitions", "--db", url],
    )

    assert good.exit_code == 0, good.output
    assert json.loads(good.output)["holds"] is True
    assert bad.exit_code == 1, bad.output
    assert json.loads(bad.output)["drift"][0]["added"] == [ACME_GUID]

    monkeypatch.setenv("PATH", str(tmp_path))  # no ibnetdiscover here
    missing = runner.invoke(app, ["collect", "ib"])
    assert missing.exit_code == 2
