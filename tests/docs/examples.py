"""The documentation's shell examples, read and run as a reader would (docs/examples.md).

Every fenced block of the README and of docs/ is one of three kinds:

- ``sh``: run, in page order, by one bash process per page (``set -u``: a variable no earlier
  line of the page set is an error) in a directory of its own, against a fresh service;
- ``sh {.host}``: runs only on an SM node, a switch or against an external system; never run
  here, but each such block has a lab test that runs the same command line
  (``host_argv`` reads it from the page; ``HOST_BLOCKS`` says which test);
- anything else (``ini``, ``yaml``, ``json``, ``text``): shown, not run.

A command is a complete bash command (a line, or several joined by ``\\``, quotes or a
here-document). The ``# ->`` comment lines after it are claims about what it printed: the text,
split at ``…`` into fragments that must appear in that order, compared without whitespace (so a
claim may be spaced for reading; the service answers compact JSON). ``…`` stands for any number
of items, their commas included: ``[{…},…]`` also matches a list whose claimed item comes last.
``# -> exit N: text`` claims the exit status too; without it a command must exit 0. ``curl`` is
wrapped to note each HTTP status: one outside 2xx fails the command unless a claim names it (a
problem document's ``"status":409``), so a wrong path or a missing token cannot pass silently.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.builders import REPO

FENCE = re.compile(r"^([ \t]*)```([^\n`]*)\n(.*?)^\1```[ \t]*$", re.S | re.M)
HOST_INFO = re.compile(r"^sh\s*\{[^}]*\.host\b[^}]*\}$")
BLOCK_ID = re.compile(r"#([\w-]+)")
CLAIM = re.compile(r"^\s*# -> ?(.*)$")
CLAIM_CONTINUED = re.compile(r"^\s*#\s{2,}(\S.*)$")
EXIT_CLAIM = re.compile(r"^exit (\d+):?(.*)$")
HTTP_STATUS = re.compile(r"@@http (\d{3})@@\n?")
EMPTY_DATABASE = "<!-- examples: empty database -->"
# Where the pages say the service is (make run's address); the runner serves elsewhere.
DOCUMENTED_URL = "http://127.0.0.1:8000"


@dataclass(frozen=True)
class Block:
    """One fenced block: its page, the line its fence opens on, its info string and its text."""

    page: Path
    line: int
    info: str
    text: str

    @property
    def kind(self) -> str:
        if self.info.strip() == "sh":
            return "sh"
        return "host" if HOST_INFO.match(self.info.strip()) else "other"

    @property
    def block_id(self) -> str | None:
        found = BLOCK_ID.search(self.info)
        return found[1] if found else None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


@dataclass
class Command:
    """A complete bash command of an ``sh`` block and the claims written under it."""

    block: Block
    line: int
    text: str
    claims: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.block.page.relative_to(REPO)}:{self.line}"


def pages() -> list[Path]:
    """The README and every page of the documentation site, in a stable order."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [
        Block(page, text.count("\n", 0, found.start()) + 1, found[2], textwrap.dedent(found[3]))
        for found in FENCE.finditer(text)
    ]


def wants_empty_database(page: Path) -> bool:
    """A page that starts from an empty database says so in an HTML comment on its own line."""
    return EMPTY_DATABASE in page.read_text().splitlines()


def is_complete(text: str) -> bool:
    """Whether bash would parse `text` as whole commands (no open quote, here-document, ``\\``)."""
    if text.rstrip().endswith("\\"):
        return False
    checked = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    # bash -n accepts an unterminated here-document with only a warning on stderr.
    return checked.returncode == 0 and "here-document" not in checked.stderr


def commands(block: Block) -> list[Command]:
    """The block's commands in order, each with the ``# ->`` claims that follow it."""
    parsed: list[Command] = []
    pending: list[str] = []
    in_claim = False
    for number, line in enumerate(block.text.splitlines(), start=block.line + 1):
        if not pending and _takes_claim(line, parsed, in_claim):
            in_claim = True
            continue
        in_claim = False
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending.append(line)
        if is_complete("\n".join(pending)):
            first = number - len(pending) + 1
            parsed.append(Command(block, first, "\n".join(pending)))
            pending = []
    if pending:
        raise ValueError(f"{block.where}: an unfinished command: {pending[0]!r}")
    return parsed


def _takes_claim(line: str, parsed: list[Command], in_claim: bool) -> bool:
    """Add `line` to the last command's claims if it is a claim or continues one."""
    claim = CLAIM.match(line)
    if claim and parsed:
        parsed[-1].claims.append(claim[1])
        return True
    continued = CLAIM_CONTINUED.match(line)
    if in_claim and continued:
        parsed[-1].claims[-1] += continued[1]
        return True
    return False


def runnable_pages() -> list[Path]:
    return [page for page in pages() if any(b.kind == "sh" for b in blocks(page))]


def all_blocks() -> Iterator[Block]:
    for page in pages():
        yield from blocks(page)


@dataclass
class Outcome:
    """What one command did: its exit status (None: the shell stopped before it finished)."""

    command: Command
    status: int | None
    output: str
    http_statuses: list[int]


MARKER = "printf '\\n@@docs-example %d %d@@\\n' {index} $?"
MARKER_FOUND = re.compile(r"\n?@@docs-example (\d+) (\d+)@@\n")
CURL_WRAPPER = """#!/bin/bash
# Notes each transfer's HTTP status on stderr for the example runner (tests/docs/examples.py).
exec {curl} --write-out '%{{stderr}}@@http %{{http_code}}@@\\n' "$@"
"""


def script(page_commands: list[Command], url: str) -> str:
    """One bash script for a page: each command, then a marker with its index and exit status."""
    lines = ["set -u"]
    for index, command in enumerate(page_commands):
        lines.append(command.text.replace(DOCUMENTED_URL, url))
        lines.append(MARKER.format(index=index))
    return "\n".join(lines) + "\n"


def run_page(page: Path, url: str, workdir: Path, env: dict[str, str]) -> list[Outcome]:
    """Run the page's ``sh`` blocks in order in `workdir`, against the service at `url`."""
    page_commands = [c for b in blocks(page) if b.kind == "sh" for c in commands(b)]
    finished = subprocess.run(
        ["bash", "-c", script(page_commands, url)],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    return _outcomes(page_commands, finished.stdout)


def _outcomes(page_commands: list[Command], printed: str) -> list[Outcome]:
    outcomes: list[Outcome] = []
    rest = printed
    for command in page_commands:
        found = MARKER_FOUND.search(rest)
        output, status = (rest[: found.start()], int(found[2])) if found else (rest, None)
        statuses = [int(code) for code in HTTP_STATUS.findall(output)]
        outcomes.append(Outcome(command, status, HTTP_STATUS.sub("", output), statuses))
        if not found:
            break
        rest = rest[found.end() :]
    return outcomes


def failures(outcome: Outcome) -> list[str]:
    """Why the command's run contradicts the page: its exit status, HTTP statuses or claims."""
    command, claims = outcome.command, outcome.command.claims
    exit_claims = [EXIT_CLAIM.match(claim) for claim in claims]
    expected_status = next((int(m[1]) for m in exit_claims if m), 0)
    found: list[str] = []
    if outcome.status is None:
        found.append("the shell stopped before the command finished")
    elif outcome.status != expected_status:
        found.append(f"exit status {outcome.status}, expected {expected_status}")
    claimed = " ".join(claims)
    for code in outcome.http_statuses:
        if not 200 <= code < 300 and str(code) not in claimed:
            found.append(f"HTTP {code}, which no claim names")
    for claim, matched in zip(claims, exit_claims, strict=True):
        text = matched[2] if matched else claim
        if not matches(text, outcome.output):
            found.append(f"claim not met: {claim}")
    return [f"{command.where}: {reason}" for reason in found]


def squeezed(text: str) -> str:
    return "".join(text.split())


def matches(claim: str, output: str) -> bool:
    """Whether the claim's fragments (split at ``…``) appear in the output in that order.

    A comma next to ``…`` belongs to the elided items, so it is not part of a fragment.
    """
    printed, start = squeezed(output), 0
    for fragment in filter(None, (squeezed(part).strip(",") for part in claim.split("…"))):
        start = printed.find(fragment, start)
        if start < 0:
            return False
        start += len(fragment)
    return True


def host_argv(page: str, block_id: str) -> list[list[str]]:
    """Each command of the page's ``sh {.host #block_id}`` block as an argument vector."""
    block = next(b for b in blocks(REPO / page) if b.kind == "host" and b.block_id == block_id)
    return [
        shlex.split(command.text.replace("\\\n", " "), comments=True) for command in commands(block)
    ]


def in_lab(argv: list[str], values: Mapping[str, str | tuple[str, ...]]) -> list[str]:
    """The documented command line with the lab's values for the named options.

    Every option named in `values` must be on the documented line (``--opt value`` or
    ``--opt=value``), so a lab test and its page cannot drift apart unnoticed; a key without
    ``--`` replaces the program (``"program": "/path/to/isofabric-agent"``); a tuple replaces
    the option and its value, for what the lab cannot have (``"--systemd-unit": ("--pid-file",
    path)``; ``"--interval": ("--once",)``: one cycle for a loop).
    """
    lab = list(argv)
    for option, value in values.items():
        if not option.startswith("--"):
            lab[0] = str(value)
            continue
        if option in lab and isinstance(value, tuple):
            at = lab.index(option)
            lab[at : at + 2] = list(value)
            continue
        if option in lab:
            lab[lab.index(option) + 1] = str(value)
            continue
        spelled = next((i for i, word in enumerate(lab) if word.startswith(f"{option}=")), None)
        if spelled is None:
            raise LookupError(f"the documented command line has no {option}: {argv}")
        lab[spelled] = f"{option}={value}"
    return lab
