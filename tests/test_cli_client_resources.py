"""Each REST client command group against a real server on the demo state (tests/cli_server.py):
what it sends is what the API then holds, what it prints is what the API answers.
"""

from __future__ import annotations

import json
from pathlib import Path

from cli import DEMO_TOPOLOGY, client
from tests.cli_server import served

__all__ = ["served"]  # the fixture


def test_fabrics_create_show_and_a_duplicate_refused(served):
    status, out, err = served.run(
        "fabrics", "create", "ib-west", "--kind", "infiniband", "--pkey-range", "0x0200-0x02ff"
    )
    assert status == 0, err
    assert "ib-west" in out

    shown = served.ok_json("fabrics", "show", "ib-west")
    assert shown["pkey_range"] == {"first": "0x0200", "last": "0x02ff"}
    again = served.run("fabrics", "create", "ib-west", "--kind", "infiniband")
    assert again[0] == client.REFUSED and again[2].startswith("error: ")


def test_fabrics_create_takes_a_roce_spec_file(served, tmp_path):
    spec = tmp_path / "roce.yaml"
    spec.write_text("vlan_range: {first: 200, last: 299}\nrt_asn: 65001\n")

    created = served.ok_json(
        "fabrics", "create", "roce-east", "--kind", "roce", "--spec", str(spec)
    )

    assert (created["kind"], created["vlan_range"]) == ("roce", {"first": 200, "last": 299})


def test_a_topology_dry_run_changes_no_node(served, tmp_path):
    fewer = tmp_path / "fewer.ibnetdiscover"
    fewer.write_text(DEMO_TOPOLOGY.read_text())  # the same fabric: nothing to change

    status, out, err = served.run(
        "topology", "upload", "--fabric", "ib-east", str(fewer), "--dry-run"
    )

    assert status == 0, err
    assert out.startswith("dry run: nothing written; isolation would hold")


def test_nodes_update_and_services_create(served):
    assert (
        served.ok_json("nodes", "update", "gpu0007", "--fabric", "ib-east", "--role", "storage")[
            "role"
        ]
        == "storage"
    )

    created = served.ok_json(
        "services", "create", "backup", "--fabric", "ib-east", "--nodes", "gpu0007"
    )

    assert created["nodes"] == ["gpu0007"] and created["segment"]["kind"] == "ib_partition"
    listed = served.ok_json("services", "list", "--fabric", "ib-east")
    assert [s["name"] for s in listed["data"]] == ["backup", "storage"]


def test_a_tenant_update_grant_revoke_release_and_offboard(served):
    assert served.ok_json("tenants", "update", "acme", "--max-nodes", "5")["max_nodes"] == 5
    grants = served.ok_json("grants", "list", "--tenant", "acme")["data"]
    ib_grant = next(g["id"] for g in grants if g["fabric"] == "ib-east")

    status, out, _ = served.run("grants", "revoke", ib_grant, "--tenant", "acme")
    assert status == 0 and out.startswith("done: DELETE")
    revoked = served.ok_json("grants", "list", "--tenant", "acme", "--state", "revoked")
    assert [g["id"] for g in revoked["data"]] == [ib_grant]

    allocations = served.ok_json("allocations", "list", "--tenant", "acme", "--fabric", "ib-east")
    allocation_id = allocations["data"][0]["id"]
    assert served.run("allocations", "release", allocation_id, "--tenant", "acme")[0] == 0
    shown = served.ok_json("allocations", "show", allocation_id, "--tenant", "acme")
    assert shown["released_at"] is not None

    assert served.ok_json("tenants", "offboard", "acme")["status"] == "offboarded"


def test_a_peering_requested_accepted_and_ended(served):
    served.ok_json("tenants", "create", "datapipe", "--kind", "internal")
    requested = served.ok_json(
        "peerings", "request", "--tenant", "research", "--fabric", "ib-east", "--peer", "datapipe"
    )
    pending = served.ok_json("peerings", "list", "--tenant", "datapipe", "--requests")
    assert [p["id"] for p in pending["data"]] == [requested["id"]]

    accepted = served.ok_json("peerings", "accept", requested["id"], "--tenant", "datapipe")
    assert accepted["state"] == "accepted"
    assert served.run("peerings", "end", requested["id"], "--tenant", "research")[0] == 0

    ended = served.ok_json("peerings", "list", "--tenant", "research", "--state", "ended")
    assert [p["state"] for p in ended["data"]] == ["ended"]


def test_customers_may_not_peer_exit_4(served):
    status, _, err = served.run(
        "peerings", "request", "--tenant", "acme", "--fabric", "ib-east", "--peer", "globex"
    )

    assert status == client.REFUSED
    assert err.startswith("error: ") and err.count("\n") == 1


def test_policy_put_dry_run_then_put_then_show(served, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text("kinds:\n  external:\n    max_nodes: 4\n")

    status, out, err = served.run("policy", "put", str(policy), "--dry-run")
    assert status == 0, err
    assert out.startswith("dry run: nothing written; isolation would hold")
    assert served.ok_json("policy", "show")["version"] == 0

    assert served.ok_json("policy", "put", str(policy))["version"] == 1
    status, out, _ = served.run("policy", "show")
    assert status == 0
    assert "external" in out and "ISOLATION" in out
    assert [v["version"] for v in served.ok_json("policy", "versions")["data"]] == [1]


def test_a_policy_the_state_violates_is_refused_in_a_dry_run_too_exit_4(served, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text("kinds:\n  external:\n    max_nodes: 1\n")  # acme holds 4 nodes

    status, out, err = served.run("policy", "put", str(policy), "--dry-run")

    assert status == client.REFUSED and out == ""
    assert err.startswith("error: Isolation violation: ")
    assert "tenant:acme (external) holds 4 nodes" in err and err.count("\n") == 1
    assert served.ok_json("policy", "show")["version"] == 0


def test_a_dry_run_that_would_break_isolation_exits_1_naming_the_counterexamples(capsys):
    from cli import output

    answer = {
        "dry_run": True,
        "holds": False,
        "fabrics": [
            {
                "fabric": "ib-east",
                "holds": False,
                "counterexamples": [{"rule": "ib-exclusive-port", "message": "port in two"}],
                "reachability": {"added": [{"from": "a", "to": "b"}], "removed": []},
                "artifacts": [{"path": "opensm/partitions.conf", "diff": "-x\n+y"}],
            }
        ],
    }

    status = output.dry_run(answer, as_json=False)

    out = capsys.readouterr().out
    assert status == client.CHECK_FAILED
    assert out.startswith("dry run: nothing written; isolation would NOT hold")
    assert "ib-east: ib-exclusive-port: port in two" in out
    assert "ib-east no 1 +1 -0 opensm/partitions.conf" in " ".join(out.split())


def test_usage_records_as_json_and_csv(served):
    since = ("--from", "2026-01-01T00:00:00Z", "--to", "2026-01-31T00:00:00Z")

    records = served.ok_json("usage", "records", *since)
    status, csv, err = served.run("usage", "records", *since, "--csv")

    assert set(records) == {"data", "count", "complete_until", "next"}
    assert status == 0, err
    assert csv.splitlines()[0].startswith("BillingAccountId,")
    events = served.ok_json("usage", "events", "--limit", "5")
    assert set(events) == {"data", "next"}


def test_artifacts_get_prints_the_file_byte_for_byte(served, tmp_path):
    out = tmp_path / "bundle"
    assert served.run("render", "--fabric", "ib-east", "--out", str(out))[0] == 0

    status, text, err = served.run(
        "artifacts", "get", "opensm/partitions.conf", "--fabric", "ib-east"
    )

    assert status == 0, err
    assert text == (out / "opensm" / "partitions.conf").read_text()
    missing = served.run("artifacts", "get", "opensm/nothing.conf", "--fabric", "ib-east")
    assert missing[0] == client.NOT_FOUND


def test_tenants_reachability_is_a_table_of_edges(served):
    status, out, err = served.run("tenants", "reachability", "acme")

    assert status == 0, err
    rows = [" ".join(line.split()) for line in out.splitlines()]
    assert "ib-east tenant:acme service:storage 0x0100 yes yes" in rows


def test_nodes_list_filters_by_tenant_and_freedom(served):
    held = served.ok_json("nodes", "list", "--fabric", "ib-east", "--tenant", "globex")
    free = served.ok_json("nodes", "list", "--fabric", "ib-east", "--free", "--role", "compute")

    assert [n["name"] for n in held["data"]] == ["gpu0005", "gpu0006"]
    assert [n["name"] for n in free["data"]] == ["gpu0007", "gpu0008"]


def test_json_output_is_the_servers_document(served):
    shown = served.ok_json("tenants", "show", "acme")

    assert set(shown) >= {"name", "kind", "status", "qos_class", "billing_account", "created_at"}
    assert json.loads(json.dumps(shown)) == shown
    assert Path(served.db.removeprefix("sqlite:///")).exists()
