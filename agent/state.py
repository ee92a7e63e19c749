"""What the agent remembers between cycles and restarts: ``<conf-dir>/.isofabric-agent.json``.

* ``started_with``: the restart-only options of opensm.conf as they were when the agent first saw
  the running OpenSM (pid and start time). OpenSM applies those options only at start, so they
  are what it runs with. If the file was modified after OpenSM started (``conf_newer``), nobody
  can know what it was started with: the file at first sight is the best evidence, and reports
  say so.
* ``pending``: the deployment being installed (digest, the files replaced, the digest of the
  files they replaced, whose generation ``.prev`` now holds), written before the first rename:
  after a crash the next cycle finishes it, and knows which ``.prev`` files belong to it if it
  must roll back.
* ``settled``: the files (by sha256), the OpenSM process and the role a deployment finished
  with, and how: nothing is left to do until the manifest, the process or the role changes.
* ``installed_digest`` and ``installed_files``: the snapshot whose files are installed now (set
  once all of a deployment's files are in place, or restored by a rollback; None while an
  install is under way or after a rollback to files of unknown origin), with their sha256 by
  name. It becomes a deployment's previous digest only if the files still have those hashes (an
  operator may have put other files in place by hand); a rollback reports what it restored as
  observed only when that digest is known. Not the last *applied* snapshot: files installed
  while OpenSM was down were never applied, yet OpenSM reads them when it starts.
* ``installed_epoch`` and ``installed_sequence``: the highest manifest position ``(epoch,
  sequence)`` whose files were all installed (or found installed); a manifest with a lower one
  is refused (a replay, or a stale server). A state file written before epochs has none: 0.
  ``installed_signer``: the keyid that signed that manifest (agent/trust.py forgets a position
  its key signed after it retired).

Whether the installed files equal the manifest is never taken from here: the agent hashes them.
The file is written atomically; an unreadable one counts as empty (the agent re-verifies).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agent.install import fsync_dir, tmp_path

STATE_FILE = ".isofabric-agent.json"


@dataclass
class StartedWith:
    """The restart-only options of the OpenSM process (pid, start_ticks) at first sight."""

    pid: int
    start_ticks: int
    options: dict[str, str]
    conf_newer: bool


@dataclass
class Pending:
    """A deployment whose files are (being) installed but whose outcome is not known yet."""

    digest: str
    files: list[str]
    previous_digest: str | None


@dataclass
class Settled:
    """A finished deployment: files by sha256, the OpenSM process, the reported state and role.

    `role` is None in state files written before it was recorded (as good as a standby's: a
    master verifies it again).
    """

    digest: str
    files: dict[str, str]
    pid: int | None
    start_ticks: int | None
    state: str
    role: str | None = None


@dataclass
class AgentState:
    """Everything in the state file."""

    started_with: StartedWith | None = None
    pending: Pending | None = None
    settled: Settled | None = None
    installed_digest: str | None = None
    installed_files: dict[str, str] | None = None
    installed_sequence: int | None = None
    installed_epoch: int | None = None
    installed_signer: str | None = None  # the keyid that signed the manifest at that position

    @property
    def installed_position(self) -> tuple[int, int] | None:
        """``(epoch, sequence)`` of the newest manifest installed, if any."""
        if self.installed_sequence is None:
            return None
        return (self.installed_epoch or 0, self.installed_sequence)

    @installed_position.setter
    def installed_position(self, position: tuple[int, int] | None) -> None:
        self.installed_epoch, self.installed_sequence = position or (None, None)


def load_state(conf_dir: Path) -> AgentState:
    """The state in `conf_dir`; an empty state when the file is absent or unreadable."""
    try:
        document = json.loads((conf_dir / STATE_FILE).read_text())
        return _from_document(document)
    except (OSError, ValueError, TypeError, KeyError):
        return AgentState()


def _from_document(document: dict[str, Any]) -> AgentState:
    started, pending, settled = (document.get(k) for k in ("started_with", "pending", "settled"))
    return AgentState(
        started_with=StartedWith(**started) if started else None,
        pending=Pending(**pending) if pending else None,
        settled=Settled(**settled) if settled else None,
        installed_digest=document.get("installed_digest"),
        installed_files=document.get("installed_files"),
        installed_sequence=document.get("installed_sequence"),
        installed_epoch=document.get("installed_epoch"),
        installed_signer=document.get("installed_signer"),
    )


def save_state(conf_dir: Path, state: AgentState) -> None:
    """Write the state file atomically (scratch file, fsync, rename, fsync the directory)."""
    write_json_atomically(conf_dir / STATE_FILE, asdict(state))


def write_json_atomically(target: Path, document: Any) -> None:
    """Write `document` as JSON to `target`: scratch file, fsync, rename, fsync the directory."""
    scratch = tmp_path(target)
    with scratch.open("w") as handle:
        json.dump(document, handle, indent=2, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    scratch.replace(target)
    fsync_dir(target.parent)
