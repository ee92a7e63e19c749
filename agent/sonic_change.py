"""One leaf's cycle: its signed files, and the change of the phase the service publishes.

A RoCE manifest lists every leaf's files; a leaf takes ``sonic/<leaf>/config_db.json``,
``sonic/<leaf>/ownership.json`` and, when it deploys FRR, ``frr/<leaf>/frr.conf``
(`leaf_files`). The service publishes each snapshot in phases (policies/roce/rollout.py):

* phase 1 removes access only: the owned VLAN_MEMBER keys the target lacks
  (`policies.roce.patch.access_removals`) and the route-target imports the target's frr.conf
  lacks (`policies.roce.frr_running.without_imports` of the installed file);
* phase 2 makes the leaf the target: `leaf_patch` (owned keys exactly, declared keys merged
  field by field only with ``--allow-disruptive``; without it a disruptive patch is refused as a
  whole), checked by `check_patch`, and the target frr.conf.

The target document is read through SONiC's stored layout (`agent.config_db`), so it compares
with what is read from the switch type for type (numbers as strings, list fields as lists).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.config_db import ConfigDb, flatten, unflatten
from agent.cycle import RefusedError
from policies.errors import InvalidValueError, PatchRefusedError
from policies.evidence.manifest import FileRule
from policies.roce.frr_running import without_imports
from policies.roce.ownership import OWNERSHIP_FILE, LeafOwnership
from policies.roce.patch import access_removals, apply_patch, check_patch, leaf_patch

CONFIG_DB_FILE = "config_db.json"
FRR_FILE = "frr.conf"
PHASES = (1, 2)

Operation = dict[str, Any]


def leaf_files(leaf: str, *, with_frr: bool) -> FileRule:
    """The manifest files of `leaf` this agent takes (other leaves' files are left alone)."""
    paths = {f"sonic/{leaf}/{CONFIG_DB_FILE}", f"sonic/{leaf}/{OWNERSHIP_FILE}"}
    if with_frr:
        paths.add(f"frr/{leaf}/{FRR_FILE}")
    return FileRule(frozenset(paths), frozenset(paths), others_refused=False)


@dataclass(frozen=True)
class LeafTarget:
    """The signed target of one leaf: CONFIG_DB (as stored), ownership, frr.conf (or None)."""

    config_db: ConfigDb
    ownership: LeafOwnership
    frr: str | None


def parse_target(contents: Mapping[str, bytes]) -> LeafTarget:
    """The leaf's files (by base name) as a `LeafTarget`.

    Raises:
        RefusedError: a file is not what the renderer writes (the signed snapshot is at fault).
    """
    try:
        document = json.loads(contents[CONFIG_DB_FILE])
        if not isinstance(document, dict) or not all(
            isinstance(v, dict) and all(isinstance(e, dict) for e in v.values())
            for v in document.values()
        ):
            raise ValueError("not an object of tables of entries")
        ownership = LeafOwnership.from_json(contents[OWNERSHIP_FILE].decode())
        frr = contents[FRR_FILE].decode() if FRR_FILE in contents else None
    except (ValueError, UnicodeDecodeError, InvalidValueError) as error:
        raise RefusedError(f"the signed leaf files are malformed: {error}") from error
    return LeafTarget(unflatten(flatten(document)), ownership, frr)


@dataclass(frozen=True)
class LeafChange:
    """What a phase changes: CONFIG_DB operations (and the result), the frr.conf to install.

    `frr` None: FRR is left as it is.
    """

    phase: int
    operations: list[Operation]
    intended: ConfigDb
    frr: str | None

    def paths(self) -> list[str]:
        """The operations as ``op path``."""
        return [f"{op['op']} {op['path']}" for op in self.operations]


def phase_change(
    phase: int,
    running: ConfigDb,
    installed_frr: str,
    target: LeafTarget,
    *,
    allow_disruptive: bool,
    first_deployment: bool = False,
) -> LeafChange:
    """The change of `phase` from `running` (and the installed frr.conf) towards `target`.

    Raises:
        PatchRefusedError: phase 2 touches a foreign key, or declared keys without
            `allow_disruptive` (every disruptive path named in `refused`, the tables in the
            message, which says which option would apply them; nothing is to be applied).
    """
    if phase == 1:
        operations = access_removals(running, target.config_db, target.ownership)
        frr = None
        if target.frr is not None and installed_frr:
            frr = without_imports(installed_frr, target.frr)
        return LeafChange(1, operations, apply_patch(running, operations), frr)
    patch = leaf_patch(running, target.config_db, target.ownership)
    if patch.disruptive and not allow_disruptive:
        raise disruptive_refusal(patch.disruptive, first_deployment=first_deployment)
    operations = patch.operations(allow_disruptive=allow_disruptive)
    check_patch(
        operations, running, target.config_db, target.ownership, allow_disruptive=allow_disruptive
    )
    return LeafChange(2, operations, apply_patch(running, operations), target.frr)


def remaining(
    change: LeafChange, read_back: ConfigDb, target: LeafTarget, *, allow_disruptive: bool
) -> list[str]:
    """What the read-back CONFIG_DB still lacks of the phase's change (empty: it holds it)."""
    if change.phase == 1:
        left = access_removals(read_back, target.config_db, target.ownership)
    else:
        patch = leaf_patch(read_back, target.config_db, target.ownership)
        left = patch.operations(allow_disruptive=allow_disruptive)
    return [f"{op['op']} {op['path']}" for op in left]


def disruptive_refusal(
    disruptive: tuple[Operation, ...], *, first_deployment: bool
) -> PatchRefusedError:
    """A short refusal: how many changes, their tables, a few paths, and the option to give.

    Every path is in `refused` (the report carries it); the line stays readable when a first
    deployment adds hundreds of declared keys to an empty CONFIG_DB.
    """
    refused = [{**_named(op), "reason": "disruptive"} for op in disruptive]
    tables = sorted({str(r["path"]).split("/")[1] for r in refused})
    shown = ", ".join(f"{r['op']} {r['path']}" for r in refused[:3])
    more = f" and {len(refused) - 3} more" if len(refused) > 3 else ""
    option = (
        "--bootstrap (this leaf's first deployment: take ownership of its declared keys)"
        if first_deployment
        else "--allow-disruptive after reviewing them (GET …/snapshots/{digest}/patches/{leaf})"
    )
    return PatchRefusedError(
        f"patch refused: {len(refused)} disruptive change(s) to declared keys (they can restart "
        f"swss) in tables {', '.join(tables)} ({shown}{more}); give {option}",
        refused=refused,
    )


def _named(operation: Operation) -> dict[str, Any]:
    return {"op": operation.get("op"), "path": operation.get("path")}
