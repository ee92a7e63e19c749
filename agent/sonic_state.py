"""What the SONiC leaf agent remembers between restarts: ``<state-dir>/isofabric-agent-sonic.json``.

* ``epoch`` and ``sequence``: the highest manifest position ``(epoch, sequence)`` applied
  (either phase) or found in place; a manifest with a lower one is refused (a replay, or a stale
  server); a state file written before epochs has no epoch: 0; ``signer``: the keyid that
  signed that manifest;
* ``applied_digest``: the snapshot last applied in phase 2 (a rollback restores it: its report
  names it as observed).

Whether the leaf holds a snapshot is never taken from here: the agent reads CONFIG_DB and FRR.
The file is written atomically; an unreadable one counts as empty.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from agent.state import write_json_atomically

SONIC_STATE_FILE = "isofabric-agent-sonic.json"


@dataclass
class SonicState:
    """Everything in the state file."""

    sequence: int | None = None
    applied_digest: str | None = None
    epoch: int | None = None
    signer: str | None = None  # the keyid that signed the manifest at `position`

    @property
    def position(self) -> tuple[int, int] | None:
        """``(epoch, sequence)`` of the newest manifest applied, if any."""
        return None if self.sequence is None else (self.epoch or 0, self.sequence)

    @position.setter
    def position(self, position: tuple[int, int] | None) -> None:
        self.epoch, self.sequence = position or (None, None)


def load_sonic_state(state_dir: Path) -> SonicState:
    """The state in `state_dir`; an empty state when the file is absent or unreadable."""
    try:
        document = json.loads((state_dir / SONIC_STATE_FILE).read_text())
        return SonicState(
            sequence=_int_or_none(document.get("sequence")),
            applied_digest=_str_or_none(document.get("applied_digest")),
            epoch=_int_or_none(document.get("epoch")),
            signer=_str_or_none(document.get("signer")),
        )
    except (OSError, ValueError, AttributeError):
        return SonicState()


def save_sonic_state(state_dir: Path, state: SonicState) -> None:
    """Write the state file atomically."""
    write_json_atomically(state_dir / SONIC_STATE_FILE, asdict(state))


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None
