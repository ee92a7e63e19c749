"""The REST client's deployment and change-set commands: targets, sync, deployments, snapshots,
changesets; each answers what its route answers (compared with the route's JSON)."""

from __future__ import annotations

import json

import httpx2

from tests.cli_server import ADMIN, served

__all__ = ["served"]  # the fixture


def api(served, method: str, path: str, **kwargs) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {ADMIN}"}
    return httpx2.request(method, served.url + path, headers=headers, timeout=30, **kwargs)


def test_a_target_is_registered_listed_shown_and_removed(served):
    registered = served.ok_json(
        "targets", "register", "sm01", "--fabric", "ib-east", "--kind", "opensm"
    )
    listed = served.ok_json("targets", "list", "--fabric", "ib-east")
    shown = served.ok_json("targets", "show", "sm01", "--fabric", "ib-east")

    assert (registered["name"], registered["kind"], registered["state"]) == ("sm01", "opensm", None)
    assert listed == api(served, "GET", "/v1/fabrics/ib-east/targets").json()
    assert shown == registered
    status, out, err = served.run("targets", "remove", "sm01", "--fabric", "ib-east")
    assert (status, out.strip(), err) == (0, "removed target sm01 of ib-east", "")
    assert served.ok_json("targets", "list", "--fabric", "ib-east")["data"] == []


def test_sync_shows_the_targets_and_exits_1_while_one_is_behind(served):
    served.ok_json("targets", "register", "sm01", "--fabric", "ib-east", "--kind", "opensm")

    status, out, _ = served.run("sync", "show", "--fabric", "ib-east", "--json")
    table_status, table, _ = served.run("sync", "show", "--fabric", "ib-east")

    assert (status, table_status) == (1, 1)  # sm01 never reported: not in sync
    assert json.loads(out) == api(served, "GET", "/v1/fabrics/ib-east/sync").json()
    assert "behind: sm01" in table.splitlines()[0]


def test_sync_names_the_leaves_that_carry_tenants_ports_without_a_target(served):
    served.ok_json("targets", "register", "leaf01", "--fabric", "roce-west", "--kind", "sonic")

    status, table, _ = served.run("sync", "show", "--fabric", "roce-west")

    assert status == 1
    assert table.splitlines()[0].endswith(": behind: leaf01; untargeted: leaf02")


def test_snapshots_and_deployments_list_what_the_routes_list(served):
    snapshots = served.ok_json("snapshots", "list", "--fabric", "ib-east")
    deployments = served.ok_json("deployments", "list", "--fabric", "ib-east")

    assert (
        snapshots
        == api(served, "GET", "/v1/fabrics/ib-east/snapshots", params={"limit": 1000}).json()
    )
    assert snapshots["data"] and any(s["current"] for s in snapshots["data"])
    assert deployments == {"data": [], "count": 0, "next": None}


def test_a_change_set_from_a_file_applies_all_or_nothing(served, tmp_path):
    document = {
        "operations": [
            {"op": "create_tenant", "name": "initech", "kind": "internal"},
            {"op": "allocate", "tenant": "initech", "fabric": "ib-east", "count": 1},
        ]
    }
    path = tmp_path / "changes.json"
    path.write_text(json.dumps(document))

    rehearsed = served.ok_json("changesets", "apply", str(path), "--dry-run")
    assert rehearsed["dry_run"] is True
    assert api(served, "GET", "/v1/tenants/initech").status_code == 404  # nothing written
    status, out, err = served.run("changesets", "apply", str(path))

    assert status == 0, err
    assert out.startswith("applied 2 operations")
    assert api(served, "GET", "/v1/tenants/initech").json()["status"] == "active"


def test_a_change_set_that_breaks_a_rule_changes_nothing_and_exits_4(served, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "operations:\n"
        "  - {op: create_tenant, name: hooli, kind: external}\n"
        "  - {op: allocate, tenant: hooli, fabric: ib-east, nodes: [gpu0001]}\n"
    )

    status, _, err = served.run("changesets", "apply", str(path))

    assert status == 4, err  # refused: gpu0001 is acme's
    assert api(served, "GET", "/v1/tenants/hooli").status_code == 404
