"""Each audit entry's seal: its index and leaf hash, signed with the active key when appended.

A checkpoint signs the whole tree, so when an entry is edited and its leaf hash recomputed, the
checkpoint no longer matches but cannot say which entry changed. The seal can: whoever edits a
row cannot sign, so the first entry in the disagreeing range whose seal no longer verifies is the
edited one (policies/evidence/audit_log.py, `seal_problem`). An entry appended while the signing
key was unavailable (or by the rotation itself, between two keys) carries no seal.
"""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy.orm import Session
from sqlmodel import Session as ModelSession

from policies.errors import KeyUnavailableError
from policies.evidence.audit_log import seal_entry
from tenancy.store import key_store
from tenancy.store.settings import Settings
from tenancy.store.tx_memo import memo

_MEMO = "audit-seal"


def seal(session: ModelSession, settings: Settings, index: int, leaf_hash: str) -> str | None:
    """The seal of entry `index` with `leaf_hash`, or None without a usable signing key.

    The key is looked up once per transaction (a change set appends thousands of entries).
    """
    signer = _signer(session, settings)
    return None if signer is None else seal_entry(index, leaf_hash, *signer)


def seal_with(session: Session, name: str, key: Ed25519PrivateKey) -> None:
    """Seal this transaction's next entries with `key` (a rotation: the key now active)."""
    memo(session, _MEMO)["signer"] = (name, key)


def reseal(session: Session, index: int, leaf_hash: str) -> str | None:
    """The seal after a leaf was rehashed in the transaction that appended it."""
    signer = memo(session, _MEMO).get("signer")
    return None if signer is None else seal_entry(index, leaf_hash, *signer)


def _signer(session: ModelSession, settings: Settings) -> tuple[str, Ed25519PrivateKey] | None:
    remembered = memo(session, _MEMO)
    if "signer" not in remembered:
        try:
            remembered["signer"] = key_store.signer(session, settings)
        except KeyUnavailableError:
            remembered["signer"] = None
    signer: tuple[str, Ed25519PrivateKey] | None = remembered["signer"]
    return signer
