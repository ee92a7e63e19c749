"""The keyring: every public key that signed part of a deployment's history, as JSON Lines.

One line per key, ``{"name": ..., "keyid": ..., "pem": <Ed25519 public key PEM>}``. Signed notes
and DSSE envelopes name their key, so a verifier trusts every key of the keyring under its name.
The file is written by the service (tenancy/store/key_store.py) and read by auditors and the
deploy agents; the keyid is always recomputed from the PEM, never taken on trust.

A key that a rotation retired carries ``"retired": {"at", "epoch", "log_size"}``
(policies/evidence/key_transition.py): it verifies history only, i.e. what it could have signed
while it was active: checkpoints of at most ``log_size`` entries, proofs issued at or before
``at``, and no manifest at all (an agent acts on the active keys' manifests only).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from policies.errors import InvalidValueError
from policies.evidence.audit_log import load_public_key
from policies.evidence.dsse import verify_envelope
from policies.evidence.proofs import key_id
from policies.evidence.retirement import Retirement

__all__ = [
    "KeyringEntry",
    "Retirement",
    "active_keys",
    "keyring_keys",
    "parse_keyring",
    "retirements",
]


@dataclass(frozen=True, slots=True)
class KeyringEntry:
    """One trusted public key: its name (signed notes name their key), keyid and PEM.

    `retired` is None for a key that may still sign everything it signs. `transition` is the
    signed statement that retired it, when there is one (policies/evidence/key_transition.py):
    kept beside the key files, it outlives a database restored from before the rotation.
    """

    name: str
    keyid: str
    pem: str
    retired: Retirement | None = None
    transition: Mapping[str, Any] | None = field(default=None, compare=False)

    @classmethod
    def of(cls, name: str, public_pem_text: str) -> KeyringEntry:
        """The entry for a named public key (the keyid is computed, never taken on trust)."""
        return cls(name=name, keyid=key_id(load_public_key(public_pem_text)), pem=public_pem_text)

    def retire(
        self, retirement: Retirement, transition: Mapping[str, Any] | None = None
    ) -> KeyringEntry:
        """This entry, retired as `retirement` says (by the statement `transition`, if any)."""
        return replace(self, retired=retirement, transition=transition)

    def line(self) -> str:
        """The entry as one JSON Lines line (no newline)."""
        document: dict[str, Any] = {"name": self.name, "keyid": self.keyid, "pem": self.pem}
        if self.retired is not None:
            document["retired"] = self.retired.document()
        if self.transition is not None:
            document["transition"] = dict(self.transition)
        return json.dumps(document)


def parse_keyring(text: str, source: str) -> list[KeyringEntry]:
    """Every entry of a keyring's text, in order; blank lines are skipped.

    Raises:
        InvalidValueError: a line is not an entry with a name and an Ed25519 public key PEM
            (the message names `source` and the line number).
    """
    return [
        _entry(line, source, number)
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    ]


def _entry(line: str, source: str, number: int) -> KeyringEntry:
    try:
        document = json.loads(line)
        entry = KeyringEntry.of(str(document["name"]), str(document["pem"]))
        retired, transition = document.get("retired"), document.get("transition")
        if retired is None:
            return entry
        return entry.retire(
            Retirement.parse(retired), transition if isinstance(transition, dict) else None
        )
    except (ValueError, KeyError, TypeError, AttributeError, InvalidValueError) as error:
        raise InvalidValueError(
            f"{source}, line {number}: not a keyring entry "
            '({"name": ..., "pem": <Ed25519 public key PEM>, "retired"?: {...}})'
        ) from error


def keyring_keys(entries: list[KeyringEntry]) -> dict[str, Ed25519PublicKey]:
    """Verifier keys by name, as `policies.evidence.audit_log.verify_log` takes them."""
    return {e.name: load_public_key(e.pem) for e in entries}


def active_keys(entries: list[KeyringEntry]) -> list[Ed25519PublicKey]:
    """The keys no rotation retired: the only ones a deploy agent takes manifests from."""
    return [load_public_key(e.pem) for e in entries if e.retired is None]


def retirements(entries: list[KeyringEntry]) -> dict[str, Retirement]:
    """Each retired key's retirement, by key name (what history verifiers bound it by)."""
    return {e.name: e.retired for e in entries if e.retired is not None}


def verify_proof(
    envelope: Mapping[str, Any],
    entries: Sequence[KeyringEntry],
    pinned: Sequence[Ed25519PublicKey] = (),
) -> dict[str, Any]:
    """The proof's Statement, if a key of the keyring signed it while that key was active.

    Contract: an active key (or one of `pinned`, trusted as given) verifies any proof; a
    retired key verifies only a proof whose signed ``predicate.time`` is at or before its
    retirement. A proof a retired key signed later was signed by whoever kept that key.

    Raises:
        InvalidValueError: no trusted key signed it, or a retired key signed it after retiring.
    """
    retired = {e.keyid for e in entries if e.retired is not None}
    # A pinned key the keyring retired is judged as the keyring's retired entry, never as active.
    trusted = [k for k in pinned if key_id(k) not in retired] + active_keys(list(entries))
    try:
        return verify_envelope(envelope, trusted)
    except InvalidValueError as unsigned:
        for entry in (e for e in entries if e.retired is not None):
            try:
                statement = verify_envelope(envelope, [load_public_key(entry.pem)])
            except InvalidValueError:
                continue
            return _signed_in_office(statement, entry)
        raise unsigned


def _signed_in_office(statement: dict[str, Any], entry: KeyringEntry) -> dict[str, Any]:
    retired = entry.retired
    assert retired is not None
    try:
        signed_at = datetime.fromisoformat(str(statement["predicate"]["time"]))
        if signed_at.tzinfo is None:
            raise ValueError("a time without a zone")
    except (KeyError, TypeError, ValueError) as error:
        raise InvalidValueError(
            f"the proof is signed by '{entry.name}', a retired key, and names no time with a zone"
        ) from error
    if not retired.covers_time(signed_at):
        raise InvalidValueError(
            f"the proof is signed by '{entry.name}' at {signed_at.isoformat()}, after the key "
            f"retired ({retired.at.isoformat()}): it proves nothing"
        )
    return statement
