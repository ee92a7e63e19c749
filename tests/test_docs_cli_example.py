"""docs/operators/command-line.md "Onboarding a tenant with the CLI alone" covers onboarding.

The example runner (tests/docs/test_examples.py) runs the section against a real service and
checks its ``# ->`` claims; this test keeps the section whole: every step of an onboarding is
there, with the CLI alone.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from tests.builders import REPO

SECTION = "### Onboarding a tenant with the CLI alone"


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
