"""The command line's REST client against a real server on the demo state (tests/cli_server.py):
output, pagination, problems and exit statuses, tokens, and the commands that are local without
--url and REST with it.
"""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path

import httpx2
import pytest

from cli import app, client
from tests.cli_server import ADMIN, runner, served

__all__ = ["served"]  # the fixture


def test_a_list_is_a_table_by_default_and_the_servers_json_with_json(served):
    status, out, err = served.run("tenants", "list")

    assert status == 0, err
    header, *rows = [line.split() for line in out.splitlines() if line.strip()]
    assert header[:4] == ["NAME", "KIND", "STATUS", "QOS"]
    assert [row[0] for row in rows if row[0].isalpha()] == ["acme", "globex", "research"]
    document = served.ok_json("tenants", "list")
    assert document["count"] == 3 and document["next"] is None
    assert [t["name"] for t in document["data"]] == ["acme", "globex", "research"]
    assert set(document["data"][0]) >= {"name", "kind", "status", "qos_class", "created_at"}


def test_a_list_follows_next_cursors_to_the_end(served, monkeypatch):
    monkeypatch.setattr(client, "PAGE_SIZE", 2)  # three tenants: two pages

    document = served.ok_json("tenants", "list")

    assert [t["name"] for t in document["data"]] == ["acme", "globex", "research"]
    assert (document["count"], document["next"]) == (3, None)


def test_limit_stops_early_and_says_more_follow(served):
    status, out, err = served.run("tenants", "list", "--limit", "2")

    assert status == 0, err
    assert "acme" in out and "globex" in out and "research" not in out
    assert "2 of 3 shown" in err
    document = served.ok_json("tenants", "list", "--limit", "2")
    assert len(document["data"]) == 2 and document["next"] is not None


def test_a_missing_tenant_is_one_line_and_exit_3(served):
    status, out, err = served.run("tenants", "show", "nobody")

    assert status == client.NOT_FOUND
    assert err.count("\n") == 1 and err.startswith("error: Resource not found: ")
    assert "nobody" in err and out == ""


def test_an_isolation_refusal_is_exit_4_with_the_reason_on_one_line(served):
    # research's nodes are research's: giving one to acme would put it in two partitions.
    nodes = served.ok_json("nodes", "list", "--fabric", "ib-east", "--tenant", "research")
    taken = nodes["data"][0]["name"]

    status, _, err = served.run(
        "allocations", "create", "--tenant", "acme", "--fabric", "ib-east", "--nodes", taken
    )

    assert status == client.REFUSED, err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert taken in err
    assert served.ok_json("allocations", "list", "--tenant", "acme")["count"] == 2


def test_json_on_a_refusal_prints_the_problem_document_too(served):
    status, out, err = served.run("tenants", "create", "acme", "--kind", "external", "--json")

    assert status == client.REFUSED
    problem = json.loads(out)
    assert problem["status"] == 409 and problem["type"].endswith("/conflict")
    assert err.startswith("error: ") and err.count("\n") == 1


def test_an_unreachable_server_is_one_line_and_exit_6():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    result = runner.invoke(app, ["fabrics", "list", "--url", f"http://127.0.0.1:{port}"])

    assert result.exit_code == client.UNAVAILABLE
    assert result.stderr.startswith("error: cannot reach the server")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "ftp://127.0.0.1/"])
def test_a_url_that_is_not_http_is_exit_2(url):
    result = runner.invoke(app, ["fabrics", "list", "--url", url])

    assert result.exit_code == client.TROUBLE
    assert result.stderr.startswith("error: --url must start with http:// or https://")


def test_no_url_is_exit_2_naming_how_to_give_one():
    result = runner.invoke(app, ["tenants", "list"], env={"ISOFABRIC_URL": ""})

    assert result.exit_code == client.TROUBLE
    assert result.stderr == f"error: {client.NO_URL}\n"


def test_the_token_is_required_and_taken_from_the_environment(served):
    status, _, err = served.run("fabrics", "list", token=None)
    assert status == client.DENIED
    assert err.startswith("error: Authentication required:")

    status, _, err = served.run("fabrics", "list", token="wrong")
    assert status == client.DENIED

    env = {"ISOFABRIC_URL": served.url, "ISOFABRIC_TOKEN": ADMIN}
    result = runner.invoke(app, ["fabrics", "list", "--json"], env=env)
    assert result.exit_code == 0, result.stderr
    assert [f["name"] for f in json.loads(result.stdout)["data"]] == ["ib-east", "roce-west"]


def test_a_dry_run_shows_the_change_and_writes_nothing(served):
    free = served.ok_json("nodes", "list", "--fabric", "ib-east", "--free", "--role", "compute")
    node = free["data"][0]["name"]

    status, out, err = served.run(
        "allocations", "create", "--tenant", "acme", "--fabric", "ib-east",
        "--nodes", node, "--dry-run",
    )  # fmt: skip

    assert status == 0, err
    assert out.startswith("dry run: nothing written; isolation would hold")
    assert "opensm/partitions.conf" in out
    assert served.ok_json("allocations", "list", "--tenant", "acme")["count"] == 2
    assert served.ok_json("nodes", "show", node, "--fabric", "ib-east")["state"] == "free"


def test_an_idempotency_key_makes_a_retry_change_nothing(served):
    args = ("tenants", "create", "initech", "--kind", "external", "--idempotency-key", "k-1")

    first = served.ok_json(*args)
    again = served.ok_json(*args)

    assert first == again and first["name"] == "initech"
    assert served.ok_json("tenants", "list")["count"] == 4


def test_render_with_url_downloads_every_artifact_with_the_manifests_sha256(served, tmp_path):
    out = tmp_path / "bundle"

    status, stdout, err = served.run("render", "--fabric", "ib-east", "--out", str(out))

    assert status == 0, err
    listed = served.ok_json("artifacts", "list", "--fabric", "ib-east")
    assert [f["path"] for f in listed["files"]] == [
        "opensm/opensm.conf",
        "opensm/partitions.conf",
        "opensm/qos-policy.conf",
    ]
    for entry in listed["files"]:
        content = (out / entry["path"]).read_bytes()
        assert hashlib.sha256(content).hexdigest() == entry["sha256"]
        assert len(content) == entry["bytes"]
    assert json.loads((out / "manifest.json").read_text()) == listed
    assert (out / "opensm" / "opensm.conf").stat().st_mode & 0o077 == 0  # holds the keys
    assert stdout == f"downloaded 3 files for snapshot {listed['snapshot_digest']} to {out}\n"


def test_render_with_url_writes_what_render_writes_locally(served, tmp_path):
    remote, local = tmp_path / "remote", tmp_path / "local"

    assert served.run("render", "--fabric", "roce-west", "--out", str(remote))[0] == 0
    result = runner.invoke(
        app, ["render", "--fabric", "roce-west", "--out", str(local), "--db", served.db]
    )

    assert result.exit_code == 0, result.output
    files = sorted(p.relative_to(local) for p in local.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(remote) for p in remote.rglob("*") if p.is_file())
    for name in files:
        assert (remote / name).read_bytes() == (local / name).read_bytes(), name


def test_verify_goes_over_rest_with_url_and_stays_local_without(served):
    status, out, _ = served.run("verify", "--fabric", "ib-east")
    assert status == 0
    assert out.startswith("ib-east: isolation holds (snapshot ")
    assert "tenant:acme" in out and "service:storage" in out

    remote = served.ok_json("verify", "--fabric", "ib-east")
    local = runner.invoke(app, ["verify", "--fabric", "ib-east", "--db", served.db])
    assert local.exit_code == 0, local.output
    assert json.loads(local.stdout)["snapshot_digest"] == remote["snapshot_digest"]
    assert json.loads(local.stdout)["reachability"] == remote["reachability"]


def test_db_and_url_together_are_refused(served):
    status, _, err = served.run("verify", "--fabric", "ib-east", "--db", served.db)

    assert status == client.TROUBLE
    assert "--db and --url" in err


def test_token_create_list_revoke_over_rest(served):
    status, secret, err = served.run(
        "token", "create", "--role", "tenant-viewer", "--tenant", "acme", "--name", "acme-ro"
    )
    assert status == 0, err
    assert secret.startswith("isf_")

    mine = served.run("tenants", "list", "--json", token=secret.strip())
    assert [t["name"] for t in json.loads(mine[1])["data"]] == ["acme"]
    assert served.run("tenants", "show", "globex", token=secret.strip())[0] == client.NOT_FOUND

    listed = served.ok_json("token", "list")["data"]
    token_id = next(t["id"] for t in listed if t["name"] == "acme-ro")
    assert served.run("token", "revoke", token_id) == (0, f"revoked {token_id}\n", "")
    assert served.run("tenants", "list", token=secret.strip())[0] == client.DENIED


def test_token_reissue_over_rest_and_locally_keeps_a_token_its_parent_took(served):
    ops = served.run("token", "create", "--role", "operator", "--name", "ops-2")[1].strip()
    viewer = served.run(
        "token", "create", "--role", "tenant-viewer", "--tenant", "acme", "--name", "dash",
        token=ops,
    )[1].strip()  # fmt: skip
    by_name = {t["name"]: t for t in served.ok_json("token", "list")["data"]}
    dash, ops_id = by_name["dash"]["id"], by_name["ops-2"]["id"]
    assert by_name["dash"]["parent"] == ops_id

    assert served.run("token", "reissue", dash) == (
        0,
        f"reissued {dash} under no parent (a root)\n",  # the admin token roots a lineage
        "",
    )
    served.run("token", "revoke", ops_id)
    assert served.run("tenants", "list", token=viewer)[0] == 0  # it outlived ops-2
    local = runner.invoke(app, ["token", "reissue", dash, "--db", served.db, "--json"])
    assert local.exit_code == 0 and json.loads(local.stdout)["parent"] is None


def test_token_commands_stay_local_without_url(served):
    created = runner.invoke(
        app, ["token", "create", "--role", "auditor", "--name", "local", "--db", served.db]
    )
    assert created.exit_code == 0, created.output

    listed = runner.invoke(app, ["token", "list", "--db", served.db, "--json"])
    assert [t["name"] for t in json.loads(listed.stdout)["data"]] == ["local"]
    assert json.loads(listed.stdout) == served.ok_json("token", "list")


def test_token_list_prints_the_same_table_locally_and_over_rest(served):
    for name in ("ci", "dashboard"):
        runner.invoke(
            app, ["token", "create", "--role", "auditor", "--name", name, "--db", served.db]
        )

    local = runner.invoke(app, ["token", "list", "--db", served.db])
    status, remote, _ = served.run("token", "list")

    assert (local.exit_code, status) == (0, 0), local.output
    assert local.stdout == remote
    assert local.stdout.split()[:3] == ["ID", "NAME", "ROLE"]
    assert "dashboard" in local.stdout and "isf_" not in local.stdout


def test_orchestrator_tokens_over_rest_and_locally_name_their_fabric(served):
    made = {
        "k8s-acme": served.run(
            "token", "create", "--role", "orchestrator", "--fabric", "ib-east",
            "--tenant", "acme", "--name", "k8s-acme",
        ),
        "slurm": served.run(
            "token", "create", "--role", "orchestrator", "--fabric", "ib-east", "--name", "slurm"
        ),
    }  # fmt: skip
    local = runner.invoke(
        app,
        ["token", "create", "--role", "orchestrator", "--fabric", "ib-east", "--tenant",
         "globex", "--name", "bm-globex", "--db", served.db],
    )  # fmt: skip
    assert local.exit_code == 0, local.output
    for status, secret, err in made.values():
        assert status == 0 and secret.startswith("isf_"), err
    for secret in [out.strip() for _, out, _ in made.values()] + [local.stdout.strip()]:
        answer = httpx2.get(
            served.url + "/ufmRest/app/ufm_version", auth=("k8s", secret), timeout=30
        )
        assert answer.status_code == 200, answer.text  # the facade takes it as a password

    listed = {t["name"]: t for t in served.ok_json("token", "list")["data"]}
    scopes = {n: (t["role"], t["tenant"], t["fabric"]) for n, t in listed.items()}
    assert scopes == {
        "k8s-acme": ("orchestrator", "acme", "ib-east"),
        "slurm": ("orchestrator", None, "ib-east"),
        "bm-globex": ("orchestrator", "globex", "ib-east"),
    }
    table = runner.invoke(app, ["token", "list", "--db", served.db]).stdout
    assert table == served.run("token", "list")[1]
    row = next(line.split() for line in table.splitlines() if "k8s-acme" in line)
    assert row[1:5] == ["k8s-acme", "orchestrator", "acme", "ib-east"]


def test_an_orchestrator_token_needs_an_infiniband_fabric_locally_and_over_rest(served):
    status, _, err = served.run("token", "create", "--role", "orchestrator", "--name", "x")
    assert status == client.TROUBLE, err  # 422
    assert "role 'orchestrator' needs a fabric" in err
    local = runner.invoke(
        app, ["token", "create", "--role", "orchestrator", "--name", "x", "--db", served.db]
    )
    assert local.exit_code == 2
    assert local.stderr == (
        "error: invalid token request: role 'orchestrator' needs a fabric and has no target\n"
    )
    roce = ["token", "create", "--role", "orchestrator", "--fabric", "roce-west", "--name", "x"]
    assert served.run(*roce)[0] == client.REFUSED
    assert "is RoCE" in runner.invoke(app, [*roce, "--db", served.db]).stderr
    assert served.ok_json("token", "list")["count"] == 0


def test_token_create_help_says_which_roles_take_a_fabric():
    shown = runner.invoke(app, ["token", "create", "--help"], env={"COLUMNS": "200"}).stdout

    assert "tenant-viewer|agent|orchestrator" in shown
    assert "The fabric (agent and orchestrator roles only)" in shown
    assert "The deploy target (agent role only)" in shown


def test_local_token_list_stops_at_the_limit_and_says_more_follow(served):
    for name in ("a", "b", "c"):
        runner.invoke(
            app, ["token", "create", "--role", "auditor", "--name", name, "--db", served.db]
        )

    limited = runner.invoke(app, ["token", "list", "--db", served.db, "--limit", "2", "--json"])

    page = json.loads(limited.stdout)
    assert (len(page["data"]), page["count"]) == (2, 3) and page["next"] is not None


def test_proof_issue_over_rest_verifies_offline_against_the_downloaded_artifacts(served, tmp_path):
    status, out, err = served.run("proof", "issue", "--tenant", "acme", "--fabric", "ib-east")
    assert status == 0, err
    issued = json.loads(out)
    proof = tmp_path / "proof.json"
    shown = served.run("proof", "show", issued["id"], "--out", str(proof))
    assert shown[0] == 0, shown[2]
    assert served.run("render", "--fabric", "ib-east", "--out", str(tmp_path / "a"))[0] == 0

    keyring = Path(served.db.removeprefix("sqlite:///")).with_name("cli-keyring.jsonl")
    checked = runner.invoke(
        app,
        [
            "proof",
            "verify",
            str(proof),
            "--keyring",
            str(keyring),
            "--artifacts",
            str(tmp_path / "a"),
        ],
    )

    assert checked.exit_code == 0, checked.output
    assert "proof OK: tenant acme on fabric ib-east (full view)" in checked.stdout
    listed = served.ok_json("proof", "list", "--tenant", "acme")
    assert [p["id"] for p in listed["data"]] == [issued["id"]]


def test_proof_issue_stays_local_without_url(served):
    result = runner.invoke(
        app, ["proof", "issue", "--tenant", "acme", "--fabric", "ib-east", "--db", served.db]
    )

    assert result.exit_code == 0, result.output
    issued = json.loads(result.stdout)
    assert served.ok_json("proof", "show", issued["id"])["id"] == issued["id"]


def test_topology_upload_reconciles_and_reports_counts(served, tmp_path):
    from cli import DEMO_TOPOLOGY

    status, out, err = served.run("topology", "upload", "--fabric", "ib-east", str(DEMO_TOPOLOGY))

    assert status == 0, err
    counts = dict(line.split(None, 1) for line in out.splitlines() if line.strip())
    counts = {name: value.strip() for name, value in counts.items()}
    assert (counts["switches"], counts["nodes"], counts["ports"]) == ("4", "11", "19")
    assert counts["added"] == "0" and counts["missing"] == "0"


def test_progress_draws_on_a_terminal_and_stays_quiet_otherwise():
    import io

    from rich.console import Console

    from cli.output import progress

    terminal = io.StringIO()
    with progress(
        "upload", 100, quiet=False, console=Console(file=terminal, force_terminal=True)
    ) as advance:
        advance(100)
    piped = io.StringIO()
    with progress("upload", 100, quiet=False, console=Console(file=piped)) as advance:
        advance(100)
    quiet = io.StringIO()
    with progress(
        "upload", 100, quiet=True, console=Console(file=quiet, force_terminal=True)
    ) as advance:
        advance(100)

    assert "upload" in terminal.getvalue() and "100" in terminal.getvalue()
    assert piped.getvalue() == "" and quiet.getvalue() == ""


@pytest.mark.parametrize(
    ("status", "problem_type", "expected"),
    [
        (404, "/problems/not-found", client.NOT_FOUND),
        (410, "/problems/not-retained", client.NOT_FOUND),
        (404, "about:blank", client.NOT_FOUND),
        (409, "/problems/isolation-violation", client.REFUSED),
        (422, "/problems/idempotency-key-reused", client.REFUSED),
        (401, "/problems/unauthorized", client.DENIED),
        (403, "/problems/forbidden", client.DENIED),
        (503, "/problems/key-unavailable", client.UNAVAILABLE),
        (429, "/problems/too-many-requests", client.UNAVAILABLE),
        (502, None, client.UNAVAILABLE),
        (422, "/problems/validation-error", client.TROUBLE),
        (415, "/problems/unsupported-media-type", client.TROUBLE),
    ],
)
def test_exit_status_by_problem_type_then_status(status, problem_type, expected):
    assert client.exit_status(status, problem_type) == expected


def test_every_problem_type_of_the_api_has_the_exit_status_of_its_kind():
    from api.problem_types import INTERNAL, PROBLEM_TYPES

    by_status = {401: 5, 403: 5, 404: 3, 409: 4, 410: 3, 429: 6}
    for kind in (*PROBLEM_TYPES.values(), INTERNAL):
        expected = 6 if kind.status >= 500 else by_status.get(kind.status, 2)
        if kind.slug == "idempotency-key-reused":  # a 422, but a refusal: the key is taken
            expected = 4
        assert client.exit_status(kind.status, kind.uri) == expected, kind
