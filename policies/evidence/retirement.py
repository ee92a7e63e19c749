"""A retired signing key's bounds: what it could have signed while it was active.

A rotation (tenancy/usecases/signing_keys.py) retires the active key at a time, a manifest epoch
and an audit log size. The keyring (policies/evidence/keyring.py) and the key transition
statement (policies/evidence/key_transition.py) carry these bounds, and verifiers use them: a
retired key verifies history only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from policies.errors import InvalidValueError


@dataclass(frozen=True, slots=True)
class Retirement:
    """When a key stopped signing: the time, and the manifest position and log size it reached.

    `epoch` and `log_size` bound what the key signed while active: the audit log then held
    `log_size` entries (the rotation's own entry is the next one), so its checkpoints are at most
    that large and its manifests' positions are below ``(epoch, log_size)``.
    """

    at: datetime
    epoch: int
    log_size: int

    def document(self) -> dict[str, Any]:
        """``{"at", "epoch", "log_size"}`` as the keyring and transition statements hold it."""
        return {"at": self.at.isoformat(), "epoch": self.epoch, "log_size": self.log_size}

    @classmethod
    def parse(cls, document: Any) -> Retirement:
        """The retirement in `document`; `InvalidValueError` when a member is missing or wrong."""
        try:
            at = datetime.fromisoformat(document["at"])
            epoch, size = document["epoch"], document["log_size"]
        except (TypeError, KeyError, ValueError) as error:
            raise InvalidValueError(
                "a retirement needs at (RFC 3339), epoch and log_size"
            ) from error
        if at.tzinfo is None or not all(_whole(n) for n in (epoch, size)):
            raise InvalidValueError("a retirement's time needs a zone, its numbers whole")
        return cls(at, epoch, size)

    def covers_checkpoint(self, size: int) -> bool:
        """True when the key could have signed a checkpoint of `size` entries while active."""
        return size <= self.log_size

    def covers_time(self, when: datetime) -> bool:
        """True when `when` (a signed time) is not after the retirement."""
        return when <= self.at


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
