"""The keyring: every public key that signed part of a deployment's history, as JSON Lines.

One line per key, ``{"name": ..., "keyid": ..., "pem": <Ed25519 public key PEM>}``. Signed notes
and DSSE envelopes name their key, so a verifier trusts every key of the keyring under its name.
The file is written by the service (tenancy/store/key_store.py) and read by auditors and the
deploy agents; the keyid is always recomputed from the PEM, never taken on trust.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from policies.errors import InvalidValueError
from policies.evidence.audit_log import load_public_key
from policies.evidence.proofs import key_id


@dataclass(frozen=True, slots=True)
class KeyringEntry:
    """One trusted public key: its name (signed notes name their key), keyid and PEM."""

    name: str
    keyid: str
    pem: str

    @classmethod
    def of(cls, name: str, public_pem_text: str) -> KeyringEntry:
        """The entry for a named public key (the keyid is computed, never taken on trust)."""
        return cls(name=name, keyid=key_id(load_public_key(public_pem_text)), pem=public_pem_text)

    def line(self) -> str:
        """The entry as one JSON Lines line (no newline)."""
        return json.dumps({"name": self.name, "keyid": self.keyid, "pem": self.pem})


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
        return KeyringEntry.of(str(document["name"]), str(document["pem"]))
    except (ValueError, KeyError, TypeError, InvalidValueError) as error:
        raise InvalidValueError(
            f"{source}, line {number}: not a keyring entry "
            '({"name": ..., "pem": <Ed25519 public key PEM>})'
        ) from error


def keyring_keys(entries: list[KeyringEntry]) -> dict[str, Ed25519PublicKey]:
    """Verifier keys by name, as `policies.evidence.audit_log.verify_log` takes them."""
    return {e.name: load_public_key(e.pem) for e in entries}
