"""Key transition statements: how a verifier that pinned the old key learns the new one.

A rotation retires the active signing key and makes a new one. Deploy agents keep their own copy
of the keyring, so they cannot learn of the rotation from the service's. The service therefore
publishes a statement, a DSSE envelope signed by **both** keys::

    {"_type": KEY_TRANSITION_TYPE,
     "retired": {"name", "keyid"},
     "new": {"name", "keyid", "pem"},
     "retirement": {"at", "epoch", "log_size"}}

The old key's signature says its holder handed over; the new key's says the new key's holder
accepts the name and the retirement bounds. A verifier that trusts the old key (and has not seen
another key retire it) accepts the statement once: it marks the old key retired and adds the new
one. This is the shape of TUF's root rotation (each new root signed by the previous root's keys),
https://theupdateframework.github.io/specification/latest/#key-management-and-migration.
Pure: keys are passed in.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from policies.errors import InvalidValueError
from policies.evidence.audit_log import load_public_key
from policies.evidence.dsse import open_envelope, sign_envelope
from policies.evidence.keyring import KeyringEntry, Retirement

KEY_TRANSITION_PAYLOAD_TYPE = "application/vnd.isofabric.key-transition+json"
KEY_TRANSITION_TYPE = "https://isofabric.dev/key-transition/v1"


@dataclass(frozen=True, slots=True)
class KeyTransition:
    """A verified statement: which key retired (by keyid), when, and the key that follows it."""

    retired_keyid: str
    retired_name: str
    new: KeyringEntry
    retirement: Retirement
    statement: Mapping[str, Any] | None = None  # the signed envelope, kept with the retired key


def sign_transition(
    retired: tuple[str, Ed25519PrivateKey],
    new: tuple[str, Ed25519PrivateKey],
    retirement: Retirement,
) -> dict[str, Any]:
    """The statement that key `retired` (name, key) hands over to `new`, signed by both."""
    (old_name, old_key), (new_name, new_key) = retired, new
    successor = KeyringEntry.of(new_name, _pem(new_key))
    document = {
        "_type": KEY_TRANSITION_TYPE,
        "retired": {"name": old_name, "keyid": KeyringEntry.of(old_name, _pem(old_key)).keyid},
        "new": {"name": new_name, "keyid": successor.keyid, "pem": successor.pem},
        "retirement": retirement.document(),
    }
    envelope = sign_envelope(document, old_key, KEY_TRANSITION_PAYLOAD_TYPE)
    countersigned = sign_envelope(document, new_key, KEY_TRANSITION_PAYLOAD_TYPE)
    envelope["signatures"] += countersigned["signatures"]
    return envelope


def verify_transition(
    envelope: Mapping[str, Any], trusted: Sequence[KeyringEntry]
) -> KeyTransition:
    """The transition in `envelope`, if a trusted key retires itself in it, co-signed by the new.

    Contract: the retired key is one of `trusted`, and both the retired key and the key the
    statement introduces signed it; nothing is taken from an unsigned source.

    Raises:
        InvalidValueError: a malformed envelope or statement, a retired key not trusted, a
            signature missing, or a new key whose keyid does not match its PEM.
    """
    document = _document(envelope)
    retired, new = _object(document, "retired"), _object(document, "new")
    keyid = retired.get("keyid")
    old = next((entry for entry in trusted if entry.keyid == keyid), None)
    if old is None:
        raise InvalidValueError(f"the statement retires key {keyid!r}, which is not trusted")
    successor = _successor(new)
    if successor.keyid == old.keyid:
        raise InvalidValueError("the key transition's new key is the key it retires")
    for signer in (old, successor):
        open_envelope(envelope, [load_public_key(signer.pem)], KEY_TRANSITION_PAYLOAD_TYPE)
    retirement = Retirement.parse(document.get("retirement"))
    return KeyTransition(old.keyid, old.name, successor, retirement, dict(envelope))


def apply_transition(
    entries: Sequence[KeyringEntry], transition: KeyTransition
) -> list[KeyringEntry]:
    """The keyring after `transition`: the old key retired, the new one appended (once).

    Raises:
        InvalidValueError: the keyring trusts another key under the new key's name.
    """
    clash = [
        e for e in entries if e.name == transition.new.name and e.keyid != transition.new.keyid
    ]
    if clash:
        raise InvalidValueError(
            f"the keyring trusts another key named {transition.new.name!r} (keyid "
            f"{clash[0].keyid}): the transition is refused"
        )
    kept = [
        e.retire(transition.retirement, transition.statement)
        if e.keyid == transition.retired_keyid and e.retired is None
        else e
        for e in entries
    ]
    known = any(e.keyid == transition.new.keyid for e in kept)
    return kept if known else [*kept, transition.new]


def _document(envelope: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(envelope, Mapping):
        raise InvalidValueError("a key transition is a DSSE envelope (an object)")
    payload = envelope.get("payload")
    try:
        document = json.loads(base64.b64decode(str(payload), validate=True))
    except ValueError as error:
        raise InvalidValueError("the key transition's payload is not base64 JSON") from error
    if not isinstance(document, dict) or document.get("_type") != KEY_TRANSITION_TYPE:
        raise InvalidValueError(f"the payload is not a key transition ({KEY_TRANSITION_TYPE})")
    return document


def _object(document: Mapping[str, Any], member: str) -> dict[str, Any]:
    value = document.get(member)
    if not isinstance(value, dict):
        raise InvalidValueError(f"the key transition's {member} is not an object")
    return value


def _successor(new: Mapping[str, Any]) -> KeyringEntry:
    try:
        successor = KeyringEntry.of(str(new["name"]), str(new["pem"]))
    except (KeyError, ValueError) as error:
        raise InvalidValueError("the key transition's new key is not a name and a PEM") from error
    if successor.keyid != new.get("keyid"):
        raise InvalidValueError("the key transition's new keyid does not match its PEM")
    return successor


def _pem(key: Ed25519PrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
