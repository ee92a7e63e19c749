"""docs/operators/command-line.md "Onboarding a tenant with the CLI alone" covers onboarding.

The example runner (tests/docs/test_examples.py) runs the section against a real service and
checks its ``# ->`` claims; this test keeps the section whole: every step of an onboarding is
there, with the CLI alone.
"""

from __future__ import annotations

import shlex

from tests.builders import REPO
from tests.docs.examples import Command, blocks, commands

PAGE = REPO / "docs" / "operators" / "command-line.md"
SECTION = "### Onboarding a tenant with the CLI alone"


def section_commands() -> list[Command]:
    """The commands of the first sh block after the section's heading."""
    heading_line = PAGE.read_text().splitlines().index(SECTION) + 1
    block = next(b for b in blocks(PAGE) if b.kind == "sh" and b.line > heading_line)
    return commands(block)


def test_the_section_onboards_a_tenant_end_to_end_with_the_cli_alone():
    section = section_commands()
    words = [shlex.split(command.text) for command in section]
    verbs = [argv[1:3] for argv in words if argv[0] == "isofabric"]

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
        assert needed in verbs, needed
    assert all(argv[0] in ("isofabric", "export") for argv in words)
    assert sum(len(command.claims) for command in section) >= 8
