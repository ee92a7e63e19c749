"""`isofabric partitions …` against a real server on the demo state (tests/cli_server.py): what the
commands send is what the API then holds, what they print is what it answers, and its refusals
exit as docs/operators/command-line.md's exit table says.
"""

from __future__ import annotations

import json

from cli import client
from tests.builders import PORT_GUIDS
from tests.cli_server import served

__all__ = ["served"]  # the fixture

ACME_PORTS = PORT_GUIDS["gpu0001"] + PORT_GUIDS["gpu0002"]  # acme's two nodes on ib-east
GLOBEX_PORT = PORT_GUIDS["gpu0005"][0]


def rows(out: str) -> list[str]:
    return [" ".join(line.split()) for line in out.splitlines() if line.strip()]


def test_create_list_show_and_delete_a_partition(served):
    status, out, err = served.run(
        "partitions", "create", "acme", "jobs", "--fabric", "ib-east", "--pkey", "0x0200",
        "--no-ipoib", "--index0",
    )  # fmt: skip

    assert status == 0, err
    assert {"pkey 0x0200", "ipoib no", "index0 yes", "name jobs"} <= set(rows(out))
    listed = served.ok_json("partitions", "list", "acme", "--fabric", "ib-east")
    assert [(p["name"], p["pkey"]) for p in listed["data"]][1:] == [("jobs", "0x0200")]
    assert listed["data"][0]["name"] == "default" and listed["count"] == 2
    status, out, _ = served.run("partitions", "list", "acme")
    assert status == 0 and "ib-east jobs 0x0200 gold no yes 0" in rows(out)

    shown = served.ok_json("partitions", "show", "acme", "jobs", "--fabric", "ib-east")
    assert (shown["ipoib"], shown["index0"], shown["members"]) == (False, True, [])

    status, out, err = served.run("partitions", "delete", "acme", "jobs")
    assert (status, out) == (0, "deleted partition jobs of tenant acme\n"), err
    missing = served.run("partitions", "show", "acme", "jobs")
    assert missing[0] == client.NOT_FOUND and missing[2].startswith("error: ")


def test_members_set_add_remove_reach_the_partition(served):
    served.ok_json("partitions", "create", "acme", "jobs", "--fabric", "ib-east")
    full, limited, third = ACME_PORTS[0], ACME_PORTS[2], ACME_PORTS[3]

    body = served.ok_json(
        "partitions", "members", "set", "acme", "jobs",
        "--member", full, "--member", f"{limited}=limited",
    )  # fmt: skip
    assert [(m["guid"], m["membership"], m["kind"]) for m in body["members"]] == [
        (full, "full", "port"),
        (limited, "limited", "port"),
    ]

    status, out, err = served.run(
        "partitions", "members", "add", "acme", "jobs", third, "--limited"
    )
    assert status == 0, err
    assert f"{third} limited port gpu0002" in rows(out)
    removed = served.ok_json("partitions", "members", "remove", "acme", "jobs", full)
    assert [m["guid"] for m in removed["members"]] == [limited, third]
    again = served.run("partitions", "members", "remove", "acme", "jobs", full)
    assert again[0] == client.NOT_FOUND


def test_members_set_reads_a_file_and_empties_with_an_empty_list(served, tmp_path):
    served.ok_json("partitions", "create", "acme", "jobs", "--fabric", "ib-east")
    members = tmp_path / "members.json"
    members.write_text(json.dumps({"members": [{"guid": ACME_PORTS[1], "membership": "full"}]}))

    body = served.ok_json("partitions", "members", "set", "acme", "jobs", "--file", str(members))

    assert [m["guid"] for m in body["members"]] == [ACME_PORTS[1]]
    members.write_text('{"members": []}')
    emptied = served.ok_json("partitions", "members", "set", "acme", "jobs", "--file", str(members))
    assert emptied["members"] == []


def test_members_set_wants_members_or_a_file_not_both_nor_neither(served, tmp_path):
    members = tmp_path / "members.json"
    members.write_text('{"members": []}')

    neither = served.run("partitions", "members", "set", "acme", "jobs")
    both = served.run(
        "partitions", "members", "set", "acme", "jobs", "--member", ACME_PORTS[0],
        "--file", str(members),
    )  # fmt: skip
    wrong = served.run(
        "partitions", "members", "set", "acme", "jobs", "--member", f"{ACME_PORTS[0]}=partial"
    )

    for status, _, err in (neither, both, wrong):
        assert status == client.TROUBLE and err.startswith("error: ") and err.count("\n") == 1


def test_refusals_exit_by_their_kind_and_change_nothing(served):
    served.ok_json("partitions", "create", "acme", "jobs", "--fabric", "ib-east")

    foreign = served.run("partitions", "members", "add", "acme", "jobs", GLOBEX_PORT)
    unknown = served.run("partitions", "members", "add", "acme", "jobs", "0x0200000000000001")
    roce = served.run("partitions", "create", "acme", "jobs", "--fabric", "roce-west")
    default = served.run("partitions", "delete", "acme", "default", "--fabric", "ib-east")

    assert foreign[0] == client.REFUSED and "does not hold" in foreign[2]
    assert unknown[0] == client.TROUBLE and "virtual GUID ranges" in unknown[2]
    assert roce[0] == client.REFUSED and "RoCE" in roce[2]
    assert default[0] == client.REFUSED
    shown = served.ok_json("partitions", "show", "acme", "jobs")
    assert shown["members"] == []


def test_a_dry_run_shows_the_change_and_writes_nothing(served):
    served.ok_json("partitions", "create", "acme", "jobs", "--fabric", "ib-east")

    status, out, err = served.run(
        "partitions", "members", "add", "acme", "jobs", ACME_PORTS[0], "--dry-run"
    )

    assert status == 0, err
    assert out.startswith("dry run: nothing written; isolation would hold")
    assert rows(out)[-1].startswith("ib-east yes 0 +0 -0 opensm/partitions.conf")
    assert served.ok_json("partitions", "show", "acme", "jobs")["members"] == []


def test_json_on_a_refusal_prints_the_problem_document(served):
    status, out, _ = served.run(
        "partitions", "create", "acme", "default", "--fabric", "ib-east", "--json"
    )

    assert status == client.REFUSED
    assert json.loads(out)["type"].endswith("/conflict")


VGUID_RANGE = "0x0200000000000000-0x02000000000000ff"
VGUID = "0x0200000000000001"


def test_set_virtual_guids_reads_back_and_an_empty_ledger_is_an_empty_table(served):
    status, out, err = served.run(
        "fabrics", "set-virtual-guids", "ib-east", "--enable",
        "--range", "0x200000000000000-0x2000000000000ff",
    )  # fmt: skip

    assert status == 0, err
    assert f'"ranges":["{VGUID_RANGE}"]' in out
    assert served.ok_json("fabrics", "show", "ib-east")["virtual_guids"] == {
        "enabled": True,
        "ranges": [VGUID_RANGE],
        "sm": "nvidia",
    }
    ledger = served.ok_json("fabrics", "virtual-guids", "ib-east")
    assert (ledger["data"], ledger["count"], ledger["next"]) == ([], 0, None)
    status, out, _ = served.run("fabrics", "virtual-guids", "ib-east")
    assert status == 0 and out.split()[:3] == ["GUID", "TENANT", "STATE"]


def test_bad_ranges_exit_2_and_roce_exits_4(served):
    bad = served.run("fabrics", "set-virtual-guids", "ib-east", "--enable", "--range", "0x02-0x01")
    roce = served.run("fabrics", "set-virtual-guids", "roce-west", "--enable")

    assert bad[0] == client.TROUBLE and bad[2].startswith("error: ")
    assert roce[0] == client.REFUSED and "RoCE" in roce[2]


def test_a_virtual_member_shows_in_the_ledger_and_blocks_disabling(served):
    served.ok_json("fabrics", "set-virtual-guids", "ib-east", "--enable", "--range", VGUID_RANGE)
    served.ok_json("partitions", "create", "acme", "vfs", "--fabric", "ib-east")

    added = served.ok_json("partitions", "members", "add", "acme", "vfs", VGUID)

    assert [(m["guid"], m["kind"], m["node"]) for m in added["members"]] == [
        (VGUID, "virtual", None)
    ]
    status, out, _ = served.run("fabrics", "virtual-guids", "ib-east")
    assert status == 0 and f"{VGUID} acme bound vfs" in " ".join(out.split())
    disabled = served.run("fabrics", "set-virtual-guids", "ib-east", "--disable")
    assert disabled[0] == client.REFUSED and VGUID in disabled[2]


def test_a_file_that_is_not_utf8_and_an_empty_membership_exit_2_in_one_line(served, tmp_path):
    binary = tmp_path / "members.json"
    binary.write_bytes(b"\xff\xfe")

    not_text = served.run("partitions", "members", "set", "acme", "jobs", "--file", str(binary))
    empty = served.run(
        "partitions", "members", "set", "acme", "jobs", "--member", f"{ACME_PORTS[0]}="
    )

    for status, _, err in (not_text, empty):
        assert status == client.TROUBLE and err.startswith("error: ") and err.count("\n") == 1
    assert "UTF-8" in not_text[2]
