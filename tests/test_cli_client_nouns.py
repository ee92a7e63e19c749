"""The issue's nouns for the REST client (`verification`, `artifacts download`, `tokens`,
`proofs`) are the existing commands under a second name, never a second implementation: each
gives exactly what its counterpart gives, over REST.
"""

from __future__ import annotations

import json
from pathlib import Path

from cli import app
from tests.cli_server import runner, served

__all__ = ["served"]  # the fixture


def files_of(directory: Path) -> dict[Path, bytes]:
    return {p.relative_to(directory): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def test_artifacts_download_writes_what_render_writes(served, tmp_path):
    via_render, via_artifacts = tmp_path / "render", tmp_path / "artifacts"

    assert served.run("render", "--fabric", "ib-east", "--out", str(via_render))[0] == 0
    status, _, err = served.run(
        "artifacts", "download", "--fabric", "ib-east", "--out", str(via_artifacts)
    )

    assert status == 0, err
    downloaded = files_of(via_artifacts)
    assert downloaded == files_of(via_render)
    manifest = json.loads(downloaded[next(p for p in downloaded if p.name == "manifest.json")])
    assert (
        manifest["snapshot_digest"]
        == served.ok_json("verify", "--fabric", "ib-east")["snapshot_digest"]
    )


def test_verification_show_is_verify(served):
    assert served.ok_json("verification", "show", "--fabric", "roce-west") == served.ok_json(
        "verify", "--fabric", "roce-west"
    )
    status, out, _ = served.run("verification", "show", "--fabric", "ib-east")
    assert status == 0 and out.startswith("ib-east: isolation holds (snapshot ")


def test_plural_tokens_and_proofs_are_the_same_groups(served):
    assert served.ok_json("tokens", "list") == served.ok_json("token", "list")
    assert served.ok_json("proofs", "list") == served.ok_json("proof", "list")


def test_the_aliases_stay_out_of_the_help():
    commands = [
        line.split()[1]
        for line in runner.invoke(app, ["--help"]).stdout.splitlines()
        if line.startswith("│ ") and len(line.split()) > 2
    ]
    assert "token" in commands and "tokens" not in commands
    assert "proof" in commands and "proofs" not in commands
    assert "verification" in commands
