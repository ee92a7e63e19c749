"""CONFIG_DB through SONiC's Generic Config Updater (``--gcu``, on a switch).

The commands (sonic-utilities ``config/main.py``, ``show/main.py``; GCU HLD
``doc/config-generic-update-rollback``), found on PATH:

* ``show runningconfiguration all``: the running CONFIG_DB as config_db.json (what is read and
  read back);
* ``config checkpoint NAME``: the running config saved as ``/etc/sonic/checkpoints/NAME.cp.json``;
* ``config apply-patch --dry-run FILE`` then ``config apply-patch FILE``: GCU simulates the RFC
  6902 patch, validates it against YANG, orders it by table dependency and applies it;
* ``config rollback NAME``: GCU diffs the checkpoint against the running config and applies that
  (nothing rolls back on its own);
* ``config save -y``: persist to config_db.json, the boot-time store (GCU edits only the running
  CONFIG_DB); ``config delete-checkpoint NAME`` once the deployment is finished.

The read-back compares the keys the patch changes with the intended document: GCU compares its
own simulation, but the buffer manager may rewrite keys (sonic-buildimage#11576), so only the
keys isofabric changed are held to the intent. Errors are `StoreError`s like Redis mode's.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.config_db import (
    Applied,
    ConfigDb,
    RawKeys,
    StoreError,
    differing_keys,
    flatten,
    touched,
    unflatten,
)
from agent.ibdiag import CollectError, run_tool

# apply-patch restarts services for some tables (the HLD's table, e.g. BUFFER_PROFILE -> swss)
COMMAND_TIMEOUT = 600.0
CHECKPOINT_PREFIX = "isofabric"

Runner = Callable[[list[str]], str]


def run_command(argv: list[str]) -> str:
    """Run a SONiC command; its stdout, or `StoreError` with its status and stderr."""
    try:
        return run_tool(argv, None, COMMAND_TIMEOUT)
    except CollectError as error:
        raise StoreError(str(error)) from error


@dataclass(frozen=True)
class GcuCommands:
    """The command names (looked up on PATH, so a test puts a stand-in first)."""

    config: str = "config"
    show: str = "show"


class GcuConfigDb:
    """CONFIG_DB changed with ``config apply-patch``, guarded by a checkpoint."""

    def __init__(
        self,
        commands: GcuCommands | None = None,
        *,
        run: Runner = run_command,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.commands, self.run, self.clock = commands or GcuCommands(), run, clock

    def read(self) -> ConfigDb:
        """The running CONFIG_DB (``show runningconfiguration all``)."""
        text = self.run([self.commands.show, "runningconfiguration", "all"])
        try:
            document = json.loads(text)
        except ValueError as error:
            raise StoreError(f"show runningconfiguration all printed no JSON: {error}") from error
        if not isinstance(document, dict):
            raise StoreError("show runningconfiguration all printed no JSON object")
        # Through the stored layout and back: the same types as Redis mode reads.
        return unflatten(flatten({t: e for t, e in document.items() if isinstance(e, dict)}))

    def apply(
        self, running: ConfigDb, operations: Sequence[Mapping[str, Any]], intended: ConfigDb
    ) -> Applied:
        """Checkpoint, dry-run, apply, read back; roll back to the checkpoint on a problem.

        Raises:
            StoreError: ``failed`` (nothing changed: the checkpoint or the dry run failed; or
                the rollback did not verify) or ``rolled_back`` (verified).
        """
        before, after = touched(running, intended)
        if not operations:
            return Applied(before, after)
        checkpoint = f"{CHECKPOINT_PREFIX}-{int(self.clock() * 1000)}"
        self._config("checkpoint", checkpoint)
        applied = Applied(before, after, checkpoint)
        with tempfile.TemporaryDirectory(prefix="isofabric-gcu-") as scratch:
            patch = Path(scratch) / "patch.json"
            patch.write_text(json.dumps(list(operations), indent=2) + "\n")
            self._dry_run(patch, checkpoint)
            try:
                self._config("apply-patch", str(patch))
            except StoreError as error:
                self.undo(applied, f"config apply-patch failed: {error}")
        wrong = differing_keys(after, self._read_keys(after))
        if wrong:
            self.undo(applied, f"read back differs at {', '.join(wrong[:10])}")
        return applied

    def undo(self, applied: Applied, why: str) -> None:
        """``config rollback`` to the checkpoint, verified by a read-back; raises `StoreError`."""
        if applied.checkpoint is None:  # no operation: nothing was applied
            raise StoreError(f"{why}; CONFIG_DB was not changed", "rolled_back")
        try:
            self._config("rollback", applied.checkpoint)
        except StoreError as error:
            raise StoreError(
                f"{why}; config rollback {applied.checkpoint} failed ({error}); the checkpoint "
                "is kept for the operator"
            ) from error
        wrong = differing_keys(applied.before, self._read_keys(applied.before))
        if wrong:
            raise StoreError(f"{why}; after the rollback {', '.join(wrong[:10])} still differ")
        self._forget(applied.checkpoint)
        raise StoreError(f"{why}; rolled back to checkpoint (verified)", "rolled_back")

    def finish(self, applied: Applied) -> None:
        """``config save -y`` (persist), then delete the checkpoint."""
        if applied.checkpoint is None:
            return
        self._config("save", "-y")
        self._forget(applied.checkpoint)

    def _dry_run(self, patch: Path, checkpoint: str) -> None:
        try:
            self._config("apply-patch", "--dry-run", str(patch))
        except StoreError as error:
            self._forget(checkpoint)
            raise StoreError(f"config apply-patch --dry-run refused the patch: {error}") from error

    def _read_keys(self, keys: RawKeys) -> RawKeys:
        stored = flatten(self.read())
        return {key: stored.get(key) for key in keys}

    def _forget(self, checkpoint: str) -> None:
        # A stale checkpoint costs disk space only; the deployment's outcome stands.
        with contextlib.suppress(StoreError):
            self._config("delete-checkpoint", checkpoint)

    def _config(self, *args: str) -> str:
        return self.run([self.commands.config, *args])
