"""Retiring a signing key: its bounds in the keyring, and the transition statement agents follow.

`isofabric keys rotate` (tenancy/usecases/signing_keys.py) retires the active key at the audit
entry that records the rotation: the key could vouch only for the entries before it, and for
manifests below that position. Those bounds (`policies.evidence.keyring.Retirement`) go into the
keyring, and a transition statement signed by the old key and the new one is kept on the retired
key's row and published (`transitions`), so that deploy agents learn the new key
(policies/evidence/key_transition.py). Keys retired by an earlier version have neither:
`mark_earlier_retirements` bounds them from the audit log when `keys create` runs again.
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlmodel import col, select

from policies.errors import KeyUnavailableError
from policies.evidence.key_transition import KeyTransition, sign_transition, verify_transition
from policies.evidence.keyring import KeyringEntry, Retirement
from policies.evidence.proofs import key_id
from tenancy import models as m
from tenancy.schemas import DSSEEnvelope, KeyTransitionsView, RetirementView
from tenancy.store import epoch, key_store
from tenancy.store.uow import Tx, UnitOfWork


def hand_over(
    tx: Tx,
    retired: tuple[m.SigningKey, Ed25519PrivateKey | None],
    successor: tuple[m.SigningKey, Ed25519PrivateKey],
    rotation_index: int,
) -> KeyTransition:
    """Retire `retired` at `rotation_index`: its bounds, its signed transition, a new epoch.

    Returns the transition for the keyring (written once the rotation commits). The transition
    is signed when the retired key's private half is here; a lost key cannot sign one, and
    agents then need the new keyring copied to them (docs/operators/deploy-opensm.md, "Key
    rotation and the agents"). The new epoch puts every manifest the successor signs above any
    the retired key signed: an agent that took one the retired key signed after retiring
    (whoever stole it, just below the bound) still takes the successor's.
    """
    (old, old_key), (new, new_key) = retired, successor
    current = epoch.current_epoch(tx.session, tx.settings)
    retirement = Retirement(tx.now, current, rotation_index)
    old.retirement = json.dumps(retirement.document())
    tx.session.add(old)
    if tx.settings.epoch_path is not None:
        epoch.declare(tx, tx.settings.epoch_path)
    transition = KeyTransition(entry_of(old).keyid, old.name, entry_of(new), retirement)
    if old_key is None:
        return transition
    statement = sign_transition((old.name, old_key), (new.name, new_key), retirement)
    old.transition = json.dumps(statement, sort_keys=True)
    return verify_transition(statement, [entry_of(old)])


def retiring_key(tx: Tx) -> Ed25519PrivateKey | None:
    """The active key's private half, if its file is here (it signs the transition)."""
    try:
        return key_store.signer(tx.session, tx.settings)[1]
    except KeyUnavailableError:
        return None


def mark_earlier_retirements(tx: Tx, keyring: Path) -> list[str]:
    """Bound, in the keyring, the retired keys it holds unmarked; the names marked.

    A key retired before retirements were recorded is bounded by the audit entry of the
    rotation that retired it (``keys.rotate`` naming its successor). One whose rotation was not
    audited stays as it is: no bound can be proven for it.
    """
    rows = list(tx.session.exec(select(m.SigningKey).order_by(col(m.SigningKey.id))))
    marked = {e.keyid for e in key_store.read_keyring(keyring) if e.retired is not None}
    named = []
    for old, new in pairwise(rows):
        if old.status != "retired" or entry_of(old).keyid in marked:
            continue
        bounds = _recorded_bounds(tx, old, new)
        if bounds is None:
            continue
        old.retirement = json.dumps(bounds.document())
        tx.session.add(old)
        transition = KeyTransition(entry_of(old).keyid, old.name, entry_of(new), bounds)
        key_store.retire_in_keyring(keyring, transition)
        named.append(old.name)
    return named


def _recorded_bounds(tx: Tx, old: m.SigningKey, new: m.SigningKey) -> Retirement | None:
    """The bounds the database recorded for `old`, else those of its audited rotation."""
    if old.retirement is not None:
        return Retirement.parse(json.loads(old.retirement))
    entry = _rotation_entry(tx, new.name)
    if entry is None:
        return None
    return Retirement(entry.time, epoch.current_epoch(tx.session, tx.settings), entry.index)


def _rotation_entry(tx: Tx, successor: str) -> m.AuditEntry | None:
    query = select(m.AuditEntry).where(
        m.AuditEntry.action == "keys.rotate", m.AuditEntry.target == f"keys/{successor}"
    )
    return tx.session.exec(query.order_by(col(m.AuditEntry.index))).first()


def transitions(uow: UnitOfWork) -> KeyTransitionsView:
    """Every key transition statement the service signed, oldest first (public: no secret)."""
    with uow.transaction(read_only=True) as tx:
        query = select(m.SigningKey).where(col(m.SigningKey.transition).is_not(None))
        rows = tx.session.exec(query.order_by(col(m.SigningKey.id)))
        statements = [json.loads(row.transition or "{}") for row in rows]
    return KeyTransitionsView(transitions=[DSSEEnvelope.model_validate(s) for s in statements])


def retirement_view(row: m.SigningKey) -> RetirementView | None:
    """The bounds recorded when the key retired; None for an active key.

    Also None for a key retired before bounds were recorded and not bounded since
    (`mark_earlier_retirements`).
    """
    if row.retirement is None:
        return None
    return RetirementView.model_validate_json(row.retirement)


def entry_of(row: m.SigningKey) -> KeyringEntry:
    """The keyring entry of a recorded key."""
    return KeyringEntry.of(row.name, row.public_pem)


def reconcile_with_keyring(tx: Tx) -> list[str]:
    """After a restore, make the database's keys agree with the keyring; the names changed.

    A backup taken before a rotation brings back the retired key as active and knows nothing of
    its successor, whose file is the key file: signing would stop (503) and the transition
    would be lost. The keyring, kept beside the key files, is the authority: every key it
    retired is retired here (with its bounds and statement), and its active key that the key
    file holds becomes the active key.
    """
    keyring = tx.settings.keyring_path
    if keyring is None or not keyring.exists():
        return []
    rows = {entry_of(row).keyid: row for row in tx.session.exec(select(m.SigningKey))}
    changed = [_retire_row(tx, rows.get(e.keyid), e) for e in key_store.read_keyring(keyring)]
    held = key_store.existing_signing_key(tx.settings)
    active = next(
        (
            e
            for e in key_store.read_keyring(keyring)
            if e.retired is None and held is not None and e.keyid == key_id(held.public_key())
        ),
        None,
    )
    if active is not None and key_store.active_row(tx.session) is None:
        row = rows.get(active.keyid) or m.SigningKey(name=active.name, public_pem=active.pem)
        row.status = "active"
        tx.session.add(row)
        changed.append(active.name)
    return [name for name in changed if name]


def _retire_row(tx: Tx, row: m.SigningKey | None, entry: KeyringEntry) -> str:
    """Retire `row` (recorded anew if missing) as the keyring's `entry` says; its name, or ""."""
    if entry.retired is None or (row is not None and row.status == "retired"):
        return ""
    row = row or m.SigningKey(name=entry.name, public_pem=entry.pem, created_at=tx.now)
    row.status = "retired"
    row.retirement = json.dumps(entry.retired.document())
    if entry.transition is not None:
        row.transition = json.dumps(dict(entry.transition), sort_keys=True)
    tx.session.add(row)
    return entry.name
