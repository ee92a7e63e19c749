"""RFC 6902 JSON Patches from a leaf's running CONFIG_DB to its target, restricted by ownership.

Owned keys (policies/roce/ownership.py) are made exactly the target's: stale ones removed,
missing ones added, differing entries replaced whole. Declared keys (in the target, not owned:
ports, fabric-wide QoS, buffers, the VTEP) are merged field by field and kept apart as
*disruptive*: QoS and buffer changes can restart swss, so they are applied only on request.
Foreign keys (neither) are never touched.

SONiC's generic config updater refuses a patch that leaves a table empty (it validates the
result against YANG, where an empty container is not a table), so removing a table's last key
is ``remove /T``, and adding a key to a table the switch lacks is ``add /T`` with the entries.
Paths are RFC 6901 JSON Pointers: ``Vlan100|10.64.0.1/24`` is ``Vlan100|10.64.0.1~124``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import jsonpatch

from policies.errors import ConflictError, PatchRefusedError
from policies.roce.ownership import LeafOwnership
from policies.roce.render_sonic import ConfigDb as ConfigDb  # re-exported: the contract's name

Operation = dict[str, Any]

_KINDS = frozenset({"add", "remove", "replace", "move", "copy", "test"})


@dataclass(frozen=True)
class LeafPatch:
    """A leaf's patch in two parts: `owned` (routine) and `disruptive` (declared keys)."""

    owned: tuple[Operation, ...]
    disruptive: tuple[Operation, ...]

    def operations(self, *, allow_disruptive: bool) -> list[Operation]:
        """The owned operations, plus the disruptive ones if allowed, in patch order.

        Removals first, then the rest by (table, key, field); a disruptive operation may rely on
        an owned ``add /T`` before it, so disruptive ones are never applied alone.
        """
        chosen = [*self.owned, *self.disruptive] if allow_disruptive else [*self.owned]
        return sorted(chosen, key=_order)


def leaf_patch(running: ConfigDb, target: ConfigDb, ownership: LeafOwnership) -> LeafPatch:
    """The patch that makes `running`'s owned keys exactly `target`'s and merges declared ones.

    Owned: removes owned keys `target` lacks, adds missing ones, replaces differing entries
    whole. Declared: only the fields of a target entry that are missing or different in
    `running` (``add``/``replace /T/k/field``, ``add /T/k``, ``add /T``); running's extra fields
    and keys stay. Foreign keys are never named. Deterministic: equal inputs, equal patches.
    """
    owned = _owned_operations(running, target, ownership)
    present = _tables_after(running, owned)
    declared = _declared_operations(running, target, ownership, present)
    return LeafPatch(tuple(sorted(owned, key=_order)), tuple(sorted(declared, key=_order)))


def _owned_operations(
    running: ConfigDb, target: ConfigDb, ownership: LeafOwnership
) -> list[Operation]:
    """Per table: exact owned keys, as key operations or a whole-table add/remove."""
    mine, theirs = _owned_view(target, ownership), _owned_view(running, ownership)
    operations: list[Operation] = []
    for table in sorted(set(mine) | set(theirs)):
        wanted, held = mine.get(table, {}), theirs.get(table, {})
        if table not in running:
            operations.append(_op("add", (table,), wanted))
        elif not wanted and len(held) == len(running[table]):
            operations.append(_op("remove", (table,)))  # its last keys: GCU refuses empty tables
        else:
            operations += _key_operations(table, held, wanted)
    return operations


def _key_operations(
    table: str, held: dict[str, dict[str, Any]], wanted: dict[str, dict[str, Any]]
) -> Iterator[Operation]:
    for key in sorted(set(held) | set(wanted)):
        if key not in wanted:
            yield _op("remove", (table, key))
        elif key not in held:
            yield _op("add", (table, key), wanted[key])
        elif held[key] != wanted[key]:
            yield _op("replace", (table, key), wanted[key])


def _tables_after(running: ConfigDb, owned: Iterable[Operation]) -> set[str]:
    """The tables that exist once the owned operations are applied."""
    tables = set(running)
    for operation in owned:
        parts = jsonpatch.path_split(operation["path"])
        if len(parts) == 1:
            (tables.add if operation["op"] == "add" else tables.discard)(parts[0])
    return tables


def _declared_operations(
    running: ConfigDb, target: ConfigDb, ownership: LeafOwnership, present: set[str]
) -> Iterator[Operation]:
    """Field-level merge of the target's declared entries into `running` (module docstring)."""
    for table in sorted(target):
        declared = {k: v for k, v in target[table].items() if not ownership.owns(table, k)}
        if not declared:
            continue
        if table not in present:
            yield _op("add", (table,), declared)
            continue
        held = running.get(table, {})
        for key in sorted(declared):
            yield from _field_operations(table, key, held.get(key), declared[key])


def _field_operations(
    table: str, key: str, held: dict[str, Any] | None, wanted: dict[str, Any]
) -> Iterator[Operation]:
    if held is None:
        yield _op("add", (table, key), wanted)
        return
    for field in sorted(wanted):
        if field not in held:
            yield _op("add", (table, key, field), wanted[field])
        elif held[field] != wanted[field]:
            yield _op("replace", (table, key, field), wanted[field])


def check_patch(
    operations: Iterable[Operation],
    running: ConfigDb,
    target: ConfigDb,
    ownership: LeafOwnership,
    *,
    allow_disruptive: bool,
) -> None:
    """Refuse a patch that touches a foreign key, or a declared one without `allow_disruptive`.

    A key is touched by an operation on it or below it, by ``add``/``replace``/``remove`` of its
    whole table (``remove /T`` touches every key of running's T), and by ``move``'s ``from``.
    ``test`` touches nothing. Malformed operations (unknown ``op``, a path that is not a JSON
    Pointer, the whole document, ``move``/``copy`` of a whole table) are refused as
    ``invalid``.

    Raises:
        PatchRefusedError: naming each offending path with ``foreign``, ``disruptive`` or
            ``invalid``; extension ``refused``: ``[{"op", "path", "reason"}]``.
    """
    refused = []
    for operation in operations:
        reason = _refusal(operation, running, target, ownership, allow_disruptive)
        if reason is not None:
            fields = operation if isinstance(operation, dict) else {}
            op, path = fields.get("op"), fields.get("path", repr(operation))
            refused.append({"op": op, "path": path, "reason": reason})
    if refused:
        named = "; ".join(f"{r['op']} {r['path']} ({r['reason']})" for r in refused)
        raise PatchRefusedError(f"patch refused: {named}", refused=refused)


def _refusal(
    operation: Any,
    running: ConfigDb,
    target: ConfigDb,
    ownership: LeafOwnership,
    allow_disruptive: bool,
) -> str | None:
    """``foreign``, ``disruptive`` or ``invalid`` for an offending operation, else None."""
    try:
        touched = list(_touched_keys(operation, running))
    except (ValueError, TypeError, KeyError, AttributeError, jsonpatch.JsonPointerException):
        return "invalid"
    reasons = {_class_of(table, key, target, ownership) for table, key in touched}
    if "foreign" in reasons:
        return "foreign"
    if "declared" in reasons and not allow_disruptive:
        return "disruptive"
    return None


def _touched_keys(operation: Any, running: ConfigDb) -> Iterator[tuple[str, str]]:
    """Every (table, key) the operation changes; ValueError for a malformed operation."""
    if not isinstance(operation, dict) or operation.get("op") not in _KINDS:
        raise ValueError("not an RFC 6902 operation")
    kind = operation["op"]
    if kind == "test":
        return
    locations = [operation["path"]] + ([operation["from"]] if kind == "move" else [])
    for location in locations:
        parts = jsonpatch.path_split(location)
        if len(parts) > 1:
            yield parts[0], parts[1]
        elif not parts or kind in ("move", "copy"):
            # The whole document, or a table whose new content is copied from elsewhere.
            raise ValueError("not a key-level operation")
        else:
            yield from ((parts[0], key) for key in running.get(parts[0], {}))
            if kind != "remove":
                yield from ((parts[0], key) for key in _object(operation["value"]))


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError("a table's value must be an object")
    return value


def _class_of(table: str, key: str, target: ConfigDb, ownership: LeafOwnership) -> str:
    if ownership.owns(table, key):
        return "owned"
    return "declared" if key in target.get(table, {}) else "foreign"


def apply_patch(document: ConfigDb, operations: Iterable[Operation]) -> ConfigDb:
    """A new document: `operations` applied in order to a copy of `document` (jsonpatch).

    Raises:
        ConflictError: an operation does not apply (a path is missing, a test fails): the
            document is not the one the patch was computed from.
    """
    try:
        result: ConfigDb = jsonpatch.apply_patch(document, list(operations))
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
        raise ConflictError(f"the patch does not apply to the document: {error}") from None
    return result


def access_removals(
    running: ConfigDb, target: ConfigDb, ownership: LeafOwnership
) -> list[Operation]:
    """Phase 1: remove the owned VLAN_MEMBER keys `target` lacks (ports leaving tenant VLANs).

    ``remove /VLAN_MEMBER`` instead when that removes every key of running's table.
    """
    table = "VLAN_MEMBER"
    held = running.get(table, {})
    wanted = target.get(table, {})
    leaving = sorted(k for k in held if ownership.owns(table, k) and k not in wanted)
    if leaving and len(leaving) == len(held):
        return [_op("remove", (table,))]
    return [_op("remove", (table, key)) for key in leaving]


def owned_entries(document: ConfigDb, ownership: LeafOwnership) -> ConfigDb:
    """The owned keys of `document` only (copies), by table; tables without any are left out."""
    return copy.deepcopy(_owned_view(document, ownership))


def _owned_view(document: ConfigDb, ownership: LeafOwnership) -> ConfigDb:
    """`owned_entries` sharing `document`'s entries (read-only use: `_op` copies values)."""
    owned: ConfigDb = {}
    for table, entries in document.items():
        mine = {k: v for k, v in entries.items() if ownership.owns(table, k)}
        if mine:
            owned[table] = mine
    return owned


def _op(kind: str, parts: tuple[str, ...], value: Any = None) -> Operation:
    operation: Operation = {"op": kind, "path": jsonpatch.path_join(parts)}
    if kind != "remove":
        operation["value"] = copy.deepcopy(value)
    return operation


def _order(operation: Operation) -> tuple[bool, tuple[str, ...]]:
    """Removals first, then by (table, key, field): a table's ``add /T`` before its keys."""
    return operation["op"] != "remove", jsonpatch.path_split(operation["path"])
