"""Compare an intended ``frr.conf`` with FRR's running configuration; texts for staged reloads.

`running_differences` is the read-back check; `removed_imports` / `without_imports` give phase 1
(route leaks removed before anything else changes); `with_new_vrfs` is the reload step that
creates new VRFs before the target file is reloaded (its docstring says why).

A reload with ``frr-reload.py`` is not trusted on its own: FRR has a record of reload bugs
around VRFs and EVPN route targets (frr#13604, #17430, #6082; docs/facts/deploy.md, FRR), so the
agent reads ``vtysh -c 'show running-config'`` back and compares it with the file it deployed.

Both texts are read as FRR writes them, nesting by indentation (one space per level: vtysh's
``show running-config`` and isofabric's renderer alike), into entries ``context > line``, e.g.
``router bgp 65101 vrf Vrf50001 > address-family l2vpn evpn > route-target import 65000:50000``.
Order does not count: FRR writes lines in its own order (``network`` before ``neighbor ...
activate``, L2VNI blocks in hash order, RTs sorted), so entries are compared as sets.

Only what isofabric renders is compared: the top-level ``router bgp`` blocks (default and VRF
instances) and zebra's ``vrf`` blocks (the L3VNI). Everything else is not isofabric's:

* ``frr version``, ``frr defaults``: vtysh prints the running version and profile first;
* ``hostname``: vtysh prints the daemons' host name, which is the system's (uname) on SONiC;
* ``log ...``, ``service integrated-vtysh-config``: written by the switch's own frr.conf/vtysh.conf
  (SONiC's docker-fpm-frr ``docker_init.sh`` writes the service line to vtysh.conf);
* ``no ip forwarding`` / ``ip forwarding`` and the IPv6 pair: zebra reports the kernel's sysctl;
* ``fpm address 127.0.0.1`` / ``no fpm use-next-hop-groups``: docker_init.sh appends them in
  ``split-unified`` mode (render_frr's docstring);
* ``!`` comments, ``exit``, ``exit-address-family``, ``exit-vni``, ``exit-vrf``, ``end`` and
  vtysh's ``Building configuration...`` / ``Current configuration:`` banner: syntax, not config.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

CONTEXT_SEPARATOR = " > "
# Top-level blocks isofabric renders (render_frr.py): everything else on the switch is not ours.
_COMPARED_BLOCKS = ("router bgp ", "vrf ")
_SYNTAX = frozenset({"exit", "exit-address-family", "exit-vni", "exit-vrf", "end", "!"})
_BANNER = frozenset({"Building configuration...", "Current configuration:"})
_IMPORT = "route-target import "
# The renderer's comment before each extra import: the grant or peering that allows it.
_LABELS = ("! grant ", "! peering ")


@dataclass(frozen=True, slots=True)
class _Line:
    """One configuration line of a text: its index, its enclosing blocks and its words."""

    index: int
    indent: int
    context: tuple[str, ...]
    text: str

    @property
    def entry(self) -> str:
        return CONTEXT_SEPARATOR.join((*self.context, self.text))

    @property
    def block(self) -> str:
        return CONTEXT_SEPARATOR.join(self.context)


def running_differences(intended: str, running: str) -> list[str]:
    """The entries of isofabric's blocks that are in one text and not the other, sorted.

    Contract: each entry is ``context > line`` with whitespace collapsed (the module docstring
    says which lines count); order and repetition of lines do not count. An empty list means
    the running configuration holds exactly what `intended` renders, for the blocks isofabric
    renders; anything else running (a foreign block, FRR's own lines) is ignored.
    """
    return sorted(_entries(intended) ^ _entries(running))


def removed_imports(current: str, target: str) -> list[tuple[str, str]]:
    """``(block context, route target)`` of each RT import in `current` that `target` lacks.

    Contract: every ``route-target import RT`` line of `current` whose block (e.g.
    ``router bgp 65101 vrf Vrf50000 > address-family l2vpn evpn``) in `target` does not import
    RT: a revoked grant or peering, or a VRF leaving the leaf. In `current`'s order, no repeats.
    """
    kept = {(line.block, _imported(line)) for line in _config_lines(target) if _imported(line)}
    removed: list[tuple[str, str]] = []
    for line in _config_lines(current):
        pair = (line.block, _imported(line))
        if pair[1] and pair not in kept and pair not in removed:
            removed.append(pair)
    return removed


def without_imports(current: str, target: str) -> str:
    """Phase 1's frr.conf: `current` without the RT imports that `target` lacks.

    Contract: the lines `removed_imports(current, target)` names are dropped from `current`,
    each with the comment line right before it when that comment is its label (``! grant ...``
    or ``! peering ...`` at the same indentation, as the renderer writes it); every other byte
    of `current` is kept, so the result reloads only the route leaks that must go first.
    """
    removed = set(removed_imports(current, target))
    raw = current.splitlines(keepends=True)
    dropped: set[int] = set()
    for line in _config_lines(current):
        if (line.block, _imported(line)) in removed:
            dropped.add(line.index)
            if line.index > 0 and _is_label(raw[line.index - 1], line.indent):
                dropped.add(line.index - 1)
    return "".join(text for index, text in enumerate(raw) if index not in dropped)


def _entries(text: str) -> set[str]:
    return {line.entry for line in _config_lines(text)}


def _config_lines(text: str) -> Iterator[_Line]:
    """The configuration lines inside isofabric's top-level blocks, with their context."""
    stack: list[tuple[int, str]] = []
    for index, raw in enumerate(text.splitlines()):
        words = " ".join(raw.split())
        if not words or words in _SYNTAX or words in _BANNER or words.startswith("!"):
            continue
        indent = len(raw) - len(raw.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        context = tuple(line for _, line in stack)
        stack.append((indent, words))
        top = context[0] if context else words
        if top.startswith(_COMPARED_BLOCKS):
            yield _Line(index, indent, context, words)


def _imported(line: _Line) -> str:
    """The RT a ``route-target import RT`` line imports, else the empty string."""
    return line.text[len(_IMPORT) :] if line.text.startswith(_IMPORT) else ""


def _is_label(raw: str, indent: int) -> bool:
    stripped = raw.strip()
    own_indent = len(raw) - len(raw.lstrip())
    return own_indent == indent and stripped.startswith(_LABELS)


def with_new_vrfs(current: str, target: str) -> str:
    """`current` plus `target`'s zebra ``vrf`` blocks that `current` lacks: a reload step first.

    Contract: the blocks (``vrf VrfN`` / `` vni N`` / ``exit-vrf`` / ``!``, as `target` writes
    them) go right before `current`'s first ``router bgp`` line (else before ``end``, else at
    the end); `current`'s bytes are otherwise kept. Returns `current` unchanged when no VRF is
    new.

    Why: FRR 8.4's frr-reload.py lists the lines it adds to contexts the running config has
    before whole new contexts (``compare_context_objects``) and sends them to vtysh without
    ``exit`` (``lines_to_config``). A new ``vrf VrfN`` after an addition inside ``router bgp``
    (a grant's RT import of an existing VRF) is then read in the BGP node, where ``vrf``
    abbreviates ``vrf-policy``, and ``vni N`` falls to the top level: the new VRF loses its
    L3VNI. Reloading this text first creates the new VRFs alone (nothing else differs from a
    running config that holds `current`), so the reload of `target` that follows adds no
    ``vrf`` context.
    """
    known = {line.strip() for line in current.splitlines() if line.startswith("vrf ")}
    blocks: list[str] = []
    for block in _vrf_blocks(target):
        if block[0].strip() not in known:
            blocks += block
    if not blocks:
        return current
    raw = current.splitlines(keepends=True)
    at = next((i for i, line in enumerate(raw) if line.startswith("router bgp ")), None)
    if at is None:
        at = next((i for i, line in enumerate(raw) if line.strip() == "end"), len(raw))
    if raw and not raw[-1].endswith("\n") and at == len(raw):
        raw[-1] += "\n"
    return "".join([*raw[:at], *blocks, *raw[at:]])


def _vrf_blocks(text: str) -> Iterator[list[str]]:
    """Each top-level ``vrf`` block of `text` with its lines up to ``exit-vrf`` and a ``!``."""
    block: list[str] = []
    for line in text.splitlines():
        if line.startswith("vrf "):
            block = [line]
        elif block:
            block.append(line)
            if line.strip() == "exit-vrf" or not line.startswith(" "):
                yield [*(b + "\n" for b in block if b.strip() != "!"), "!\n"]
                block = []
