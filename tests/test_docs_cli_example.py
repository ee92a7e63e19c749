"""docs/operators/command-line.md "Onboarding a tenant with the CLI alone", replayed line by line.

The commands are the section's own, parsed from that page and run with typer's CliRunner in a
fresh directory, as the section says: ``isofabric keys create``, a service on ./isofabric.db (a
real uvicorn server in a thread), then each line. The `export` line's URL and token become the
test server's URL and the token the first line printed. Every ``# ->`` line is a claim checked
against the command just before it: its text (fragments separated by ``…``) is in the output
with runs of spaces made one, or, after ``exit N:``, the exit status and the line on stderr.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from api.app import create_app
from cli import app
from tenancy.store.settings import load_settings
from tests.builders import REPO
from tests.live_server import live_server

SECTION = "### Onboarding a tenant with the CLI alone"
EXIT_CLAIM = re.compile(r"^exit (\d+): (.*)$")
runner = CliRunner()


def readme_section() -> str:
    text = (REPO / "docs" / "operators" / "command-line.md").read_text()
    return re.split(r"\n#{2,3} ", text.split(f"\n{SECTION}\n", 1)[1], maxsplit=1)[0]


def sh_block(section: str) -> str:
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


@dataclass
class Step:
    """One line of the block: a command (or an export) and the claims made about it."""

    words: list[str]
    claims: list[str] = field(default_factory=list)

    @property
    def redirect(self) -> str | None:
        return self.words[self.words.index(">") + 1] if ">" in self.words else None

    @property
    def args(self) -> list[str]:
        return self.words[1 : self.words.index(">")] if ">" in self.words else self.words[1:]


def steps(sh: str) -> list[Step]:
    parsed: list[Step] = []
    for line in sh.replace("\\\n", " ").splitlines():
        if line.startswith("# -> "):
            parsed[-1].claims.append(line.removeprefix("# -> "))
        elif line.strip() and not line.startswith("#"):
            parsed.append(Step(shlex.split(line, comments=True)))
    return parsed


def spaced(text: str) -> str:
    return " ".join(text.split())


def check(step: Step, result: Result) -> None:
    where = f"`{shlex.join(step.words)}`"
    for claim in step.claims:
        matched = EXIT_CLAIM.match(claim)
        if matched:
            assert result.exit_code == int(matched[1]), (where, result.output)
            assert spaced(matched[2]) in spaced(result.stderr), (where, result.stderr)
            assert result.stderr.count("\n") == 1, (where, result.stderr)
            continue
        assert result.exit_code == 0, (where, result.output)
        for fragment in filter(None, (spaced(part) for part in claim.split("…"))):
            assert fragment in spaced(result.stdout), (where, fragment, result.stdout)
    assert step.claims or result.exit_code == 0, (where, result.output)


@pytest.fixture
def fresh_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The section's starting point: an empty directory holding the repository's examples."""
    monkeypatch.chdir(tmp_path)
    for name in ("ISOFABRIC_URL", "ISOFABRIC_TOKEN", "ISOFABRIC_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    created = runner.invoke(app, ["keys", "create"])  # the section's `isofabric keys create`
    assert created.exit_code == 0, created.output
    yield tmp_path


def test_the_readme_cli_onboarding_does_what_its_comments_say(fresh_directory):
    server = create_app(load_settings())  # `isofabric serve` in this directory
    env: dict[str, str | None] = {"ISOFABRIC_URL": None, "ISOFABRIC_TOKEN": None}
    printed_token = ""
    try:
        with live_server(server) as url:
            for step in steps(sh_block(readme_section())):
                if step.words[0] == "export":
                    names = dict(word.split("=", 1) for word in step.words[1:])
                    assert set(names) == {"ISOFABRIC_URL", "ISOFABRIC_TOKEN"}
                    env = {"ISOFABRIC_URL": url, "ISOFABRIC_TOKEN": printed_token}
                    continue
                assert step.words[0] == "isofabric", step.words
                result = runner.invoke(app, step.args, env=env)
                check(step, result)
                if step.args[:2] == ["token", "create"]:
                    printed_token = result.stdout.strip()
                if step.redirect:
                    Path(step.redirect).write_text(result.stdout)
            offboarded = runner.invoke(app, ["tenants", "show", "acme", "--json"], env=env)
    finally:
        server.state.uow.engine.dispose()

    assert json.loads(offboarded.stdout)["status"] == "offboarded"
    assert (fresh_directory / "ib-east" / "manifest.json").is_file()


def test_the_section_onboards_a_tenant_end_to_end_with_the_cli_alone():
    block = steps(sh_block(readme_section()))
    commands = [step.args[:2] for step in block if step.words[0] == "isofabric"]

    for needed in (
        ["tenants", "create"],
        ["allocations", "create"],
        ["grants", "create"],
        ["verify", "--fabric"],
        ["render", "--fabric"],
        ["proof", "issue"],
        ["proof", "verify"],
        ["tenants", "offboard"],
    ):
        assert needed in commands, needed
    assert all(step.words[0] in ("isofabric", "export") for step in block)
    assert sum(len(step.claims) for step in block) >= 8
