"""The isolation matrix: the verdict's reachability relation and counterexamples as owner pairs.

Nothing here decides isolation: every cell restates the verdict GET /v1/fabrics/{fabric}/
verification returns (tenancy/gate/cached_reads.py). An allowed edge is "allowed" (intended), an
edge that is not allowed or a counterexample between two owners is a "violation" (linked to its
counterexample), and a pair with neither is "blocked" (no shared segment). Unassigned nodes are
one owner on the axes ("unassigned"): the verdict names each node, the matrix groups them.

Large fabrics (2,000 tenants) are paged by blocks of `BLOCK` owners on each axis, with an
overview of every block pair coloured by its worst cell.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlencode

from markupsafe import Markup, escape

from tenancy.schemas import VerificationView

UNASSIGNED = "unassigned"
BLOCK = 50
# Worst first: a block of the overview shows the worst cell it holds.
SEVERITY = {"violation": 3, "allowed": 2, "blocked": 1, "self": 0}
_KIND_ORDER = {"tenant": 0, "service": 1, UNASSIGNED: 2}


@dataclass
class PairFacts:
    """What the verdict says of one unordered owner pair."""

    allowed: set[str] = field(default_factory=set)  # segments of intended edges
    violating: set[str] = field(default_factory=set)  # segments of edges or counterexamples
    rules: set[str] = field(default_factory=set)
    examples: list[int] = field(default_factory=list)  # counterexample indexes

    @property
    def status(self) -> str:
        """Violation beats allowed: one unintended path is enough."""
        return "violation" if self.violating or self.examples else "allowed"


@dataclass(frozen=True, slots=True)
class Cell:
    """One matrix cell: its status, the title shown on hover and where a click leads."""

    row: str
    col: str
    status: str
    title: str
    href: str | None


def axis_owner(owner: str) -> str:
    """The owner as the axes show it: every ``unassigned:<node>`` is one ``unassigned``."""
    return UNASSIGNED if owner.startswith(f"{UNASSIGNED}:") else owner


def owner_order(owner: str) -> tuple[int, str]:
    """Tenants, then services, then the unassigned nodes (as `policies.model.Owner` sorts)."""
    kind, _, name = owner.partition(":")
    return (_KIND_ORDER.get(kind, 3), name)


def short_name(owner: str) -> str:
    """``tenant:acme`` -> ``acme``; services and unassigned keep a marker of their kind."""
    kind, _, name = owner.partition(":")
    return name if kind == "tenant" else owner


class Relation:
    """The verdict's facts indexed by unordered owner pair (axis owners)."""

    def __init__(self, view: VerificationView, fabric: str) -> None:
        self.fabric = fabric
        self.view = view
        self.pairs: dict[tuple[str, str], PairFacts] = {}
        for edge in view.reachability:
            facts = self._facts(edge.source, edge.target)
            (facts.allowed if edge.allowed else facts.violating).add(edge.segment)
        for index, example in enumerate(view.counterexamples):
            if example.a is None or example.b is None:
                continue
            facts = self._facts(example.a.owner, example.b.owner)
            facts.examples.append(index)
            facts.rules.add(example.rule)
            if example.partition is not None:
                facts.violating.add(example.partition)

    def _facts(self, a: str, b: str) -> PairFacts:
        return self.pairs.setdefault(pair(axis_owner(a), axis_owner(b)), PairFacts())

    def owners(self) -> set[str]:
        """Every axis owner the relation names."""
        return {o for p in self.pairs for o in p}

    def status(self, a: str, b: str) -> str:
        """The pair's status: violation, allowed, blocked, or self (an owner with itself)."""
        facts = self.pairs.get(pair(a, b))
        if facts is None:
            return "self" if a == b else "blocked"
        return facts.status

    def cell(self, a: str, b: str, segment_name: str) -> Cell:
        """The cell of row `a`, column `b`: status, hover text, counterexample link."""
        facts = self.pairs.get(pair(a, b))
        status = self.status(a, b)
        if facts is None:
            text = "the same owner" if a == b else f"blocked: no shared {segment_name}"
            return Cell(a, b, status, f"{a} ↔ {b}: {text}", None)
        if status == "allowed":
            segments = ", ".join(sorted(facts.allowed))
            title = f"{a} ↔ {b}: allowed and intended, {segment_name} {segments}"
            return Cell(a, b, status, title, None)
        segments = ", ".join(sorted(facts.violating | facts.allowed))
        rules = ", ".join(sorted(facts.rules)) or "unintended reachability"
        title = f"{a} ↔ {b}: VIOLATION ({rules}), {segment_name} {segments or '?'}"
        return Cell(a, b, status, title, self.example_href(facts))

    def example_href(self, facts: PairFacts) -> str:
        """The first counterexample of the pair, else the counterexample list."""
        base = f"/ui/fabrics/{self.fabric}/counterexamples"
        return f"{base}#cx-{facts.examples[0]}" if facts.examples else base


def pair(a: str, b: str) -> tuple[str, str]:
    """An unordered pair as a sorted tuple (reachability is symmetric on a fabric)."""
    return (a, b) if a <= b else (b, a)


def axis(relation: Relation, owners: Iterable[str], query: str) -> list[str]:
    """The owners on both axes, in owner order, filtered by `query` (a substring, any case).

    The fabric's `owners`, those the relation names, and `unassigned`.
    """
    every = set(owners) | relation.owners() | {UNASSIGNED}
    wanted = query.strip().lower()
    return sorted((o for o in every if wanted in o.lower()), key=owner_order)


def blocks(count: int) -> int:
    """How many blocks of `BLOCK` owners an axis of `count` owners has (at least one)."""
    return max(1, -(-count // BLOCK))


def block_overview(relation: Relation, owners: list[str]) -> list[list[str]]:
    """The worst status of every block pair (row block, column block) of the axis."""
    position = {o: i // BLOCK for i, o in enumerate(owners)}
    size = blocks(len(owners))
    grid = [["blocked"] * size for _ in range(size)]
    for a, b in relation.pairs:
        if a in position and b in position:
            status = relation.status(a, b)
            for r, c in ((position[a], position[b]), (position[b], position[a])):
                if SEVERITY[status] > SEVERITY[grid[r][c]]:
                    grid[r][c] = status
    return grid


def page_cells(
    relation: Relation, rows: list[str], cols: list[str], segment_name: str
) -> list[list[Cell]]:
    """The cells of one page: `rows` by `cols`."""
    return [[relation.cell(a, b, segment_name) for b in cols] for a in rows]


def violation_pairs(relation: Relation) -> list[tuple[str, str, PairFacts]]:
    """Every violating owner pair, in owner order: the summary shown above the matrix."""
    found = [(a, b, f) for (a, b), f in relation.pairs.items() if f.status == "violation"]
    return sorted(found, key=lambda t: (owner_order(t[0]), owner_order(t[1])))


SYMBOLS = {"allowed": "✓", "self": "—", "blocked": "·", "violation": "✗"}


def rows_markup(cells: list[list[Cell]]) -> Markup:
    """The matrix's body rows, escaped: built here, as 2,500 cells take Jinja2 ten times longer."""
    lines = []
    for line in cells:
        head = line[0].row
        parts = [f'<tr><th class="mx-row" scope="row" title="{escape(head)}">']
        parts.append(f"{escape(short_name(head))}</th>")
        for cell in line:
            symbol = SYMBOLS[cell.status]
            inner = f'<a href="{escape(cell.href)}">{symbol}</a>' if cell.href else symbol
            parts.append(
                f'<td class="mx-cell mx-{cell.status}" data-row="{escape(cell.row)}" '
                f'data-col="{escape(cell.col)}" data-status="{cell.status}" '
                f'title="{escape(cell.title)}">{inner}</td>'
            )
        lines.append("".join(parts) + "</tr>")
    return Markup("\n".join(lines))


def overview_markup(
    grid: list[list[str]], page_url: str, query: str, current: tuple[int, int]
) -> Markup:
    """The block overview's rows: each block pair a link to its page, coloured by its worst."""
    lines, prefix = [], escape(f"{page_url}?{urlencode({'q': query})}")
    for r, line in enumerate(grid):
        parts = []
        for c, status in enumerate(line):
            here = " current" if (r, c) == current else ""
            span = f"owners {r * BLOCK + 1}-{(r + 1) * BLOCK} x {c * BLOCK + 1}-{(c + 1) * BLOCK}"
            parts.append(
                f'<td class="mx-{status}{here}"><a href="{prefix}&amp;rows={r}&amp;cols={c}" '
                f'title="{span}: {status}"></a></td>'
            )
        lines.append("<tr>" + "".join(parts) + "</tr>")
    return Markup("\n".join(lines))
