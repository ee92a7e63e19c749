"""The service's Ed25519 signing keys: created, rotated and published, never kept in the database.

The audit log's checkpoints and the isolation proofs are signed with one active key. Its private
half lives in a key file of mode 0600 (or ``ISOFABRIC_SIGNING_KEY``) that every replica is given;
the database (table ``signing_key``) records only the public halves, to name the keys and to
publish them at ``/v1/keys``. Verifiers trust none of that: they trust the keyring file, to which
`create` and `rotate` append each new public key (tenancy/store/key_store.py).

Keys are made only by an operator's command (`isofabric keys create`, `isofabric keys rotate`),
never on first use: replicas starting together would otherwise each make one. Rotation creates a
new active key under a new name (signed notes look keys up by name) and marks the previous one
``retired``; retired keys stay published and in the keyring so that what they signed still
verifies.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import text
from sqlmodel import Session, col, select

from policies.errors import ConflictError, InvalidValueError, KeyUnavailableError
from policies.evidence.audit_log import load_public_key
from policies.evidence.key_transition import KeyTransition
from policies.evidence.keyring import KeyringEntry
from policies.evidence.proofs import key_id, public_jwk
from tenancy import models as m
from tenancy.record import audit_log, audit_seal
from tenancy.schemas import (
    PublicJWK,
    SigningKeysView,
    SigningKeyView,
)
from tenancy.store import key_store
from tenancy.store.settings import Settings
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.usecases import key_retirement

# pg_advisory_xact_lock(int, int) serialising key creation and rotation ("SK"): two replicas
# running `keys create` at once must not both find no key and make two. Taken before the audit
# log's lock (tenancy/store/locks.py gives the order). SQLite serialises writers at BEGIN IMMEDIATE.
KEYS_LOCK = (0x534B, 0)


@dataclass(frozen=True, slots=True)
class KeySetup:
    """What `create` left in place: the active key's published form and where the files are."""

    key: SigningKeyView
    created: bool
    key_file: str
    keyring_file: str
    opensm_secret_file: str
    trusted_retired: list[str]
    files_written: list[str]
    done: list[str]  # what this run did, in words (`summary`)

    def document(self) -> dict[str, object]:
        """The command's JSON output: the published key plus the files and what was created."""
        return {
            **self.key.model_dump(mode="json"),
            "created": self.created,
            "key_file": self.key_file,
            "keyring_file": self.keyring_file,
            "opensm_secret_file": self.opensm_secret_file,
            "trusted_retired": self.trusted_retired,
            "files_written": self.files_written,
        }

    def summary(self) -> str:
        """One line for people: what this run created or appended, or that it changed nothing."""
        if not self.done:
            return "the signing key, its keyring and the OpenSM secret exist: nothing created"
        return "; ".join(self.done)


def signing_key(tx: Tx) -> Ed25519PrivateKey:
    """The active private key from the key file (`KeyUnavailableError`, 503, when missing)."""
    return key_store.signer(tx.session, tx.settings)[1]


def create(uow: UnitOfWork, *, trust_retired: bool = False) -> KeySetup:
    """Install the active signing key and the OpenSM secret unless they exist; idempotent.

    With no key file, a new key is written there (mode 0600) and recorded (public half only) as
    the active key; an existing key file is recorded if the database has no active key yet. The
    public key is appended to the keyring, and, with `trust_retired`, the retired keys the
    database lists as well (after upgrading from a version that kept keys in the database; the
    operator vouches for them). A missing OpenSM secret file is created too.

    Raises:
        ConflictError: the database's active key is another one (its key file is elsewhere:
            copy it here, or rotate), or the keyring trusts another key under the same name.
        InvalidValueError: no key file, keyring or secret file can be named (PostgreSQL and
            in-memory databases have no default location).
    """
    settings = uow.settings
    keyring = _required(settings.keyring_path, "ISOFABRIC_KEYRING_FILE")
    with uow.transaction() as tx:
        _lock_keys(tx.session)
        key, written = _key_for_create(tx, settings)
        try:
            row = _register(tx, key, _keyring_name(keyring, key) or _fresh_name(tx, keyring))
            retired = _retired_entries(tx.session) if trust_retired else []
            appended = key_store.append_to_keyring(keyring, [*retired, _entry(row)])
            bounded = key_retirement.mark_earlier_retirements(tx, keyring)
        except BaseException:
            if written is not None:
                written.unlink()  # nothing recorded it: leave no orphan key behind
            raise
    secret_written = _ensure_opensm_secret(settings)
    files = [written, keyring if appended else None, secret_written]
    done = [
        f"created the signing key {written}" if written else "",
        f"added {len(appended)} public key(s) to the keyring {keyring}" if appended else "",
        f"created the OpenSM secret {secret_written}" if secret_written else "",
        f"marked {', '.join(bounded)} retired in the keyring" if bounded else "",
    ]
    return KeySetup(
        key=published(row),
        created=written is not None,
        key_file=key_store.signing_key_source(settings),
        keyring_file=str(keyring),
        opensm_secret_file=key_store.opensm_secret_source(settings),
        trusted_retired=[e.name for e in retired],
        files_written=[str(path) for path in files if path is not None],
        done=[phrase for phrase in done if phrase],
    )


def _key_for_create(tx: Tx, settings: Settings) -> tuple[Ed25519PrivateKey, Path | None]:
    """The existing key, or a new one written to the key file (returned so it can be undone)."""
    existing = key_store.existing_signing_key(settings)
    if existing is not None:
        return existing, None
    path = _required(settings.signing_key_path, "ISOFABRIC_SIGNING_KEY_FILE")
    active = key_store.active_row(tx.session)
    if active is not None:
        # Another host created the key: a second one here would split the replicas.
        raise ConflictError(
            f"the database's active signing key '{active.name}' was created elsewhere and there "
            f"is no key file at {path}: copy that key file here (or set "
            "ISOFABRIC_SIGNING_KEY_FILE); `isofabric keys rotate` replaces the key instead"
        )
    key = key_store.generate_signing_key()
    try:
        key_store.write_private_file(path, key_store.private_pem(key))
    except FileExistsError as error:  # another `keys create` on this host won the race
        raise ConflictError(f"{path} appeared meanwhile; run the command again") from error
    return key, path


def _register(tx: Tx, key: Ed25519PrivateKey, name: str) -> m.SigningKey:
    """The key's row, recorded as the active key unless the database already has one.

    `name` is the keyring's name for a key it already trusts (a database re-created beside the
    key files): signed notes name their key, and verifiers look it up by that name.
    """
    row = key_store.row_of(tx.session, key.public_key())
    active = key_store.active_row(tx.session)
    if row is not None and row.status == "active":
        return row
    if row is not None or active is not None:
        what = f"the retired key '{row.name}'" if row is not None else "not the active key"
        name = active.name if active is not None else "(none)"
        raise ConflictError(
            f"the key in {key_store.signing_key_source(tx.settings)} is {what}; the active key "
            f"is '{name}': install its key file, or run `isofabric keys rotate`"
        )
    return _add_row(tx, key, name)


def _fresh_name(tx: Tx, keyring: Path) -> str:
    """The next key name neither the database nor the keyring uses.

    The first key is named after the log, later ones ``<origin>.r<n>``: signed notes identify
    keys by name, so a name is never given to a second key.
    """
    origin = tx.settings.audit_origin
    used = {row.name for row in tx.session.exec(select(m.SigningKey))}
    if keyring.exists():
        used |= {e.name for e in key_store.read_keyring(keyring)}
    if origin not in used:
        return origin
    number = len(used) + 1
    while f"{origin}.r{number}" in used:
        number += 1
    return f"{origin}.r{number}"


def _add_row(tx: Tx, key: Ed25519PrivateKey, name: str) -> m.SigningKey:
    """Record `key`'s public half as the active key under `name`."""
    row = m.SigningKey(
        name=name, public_pem=key_store.public_pem(key.public_key()), created_at=tx.now
    )
    tx.session.add(row)
    tx.session.flush()
    return row


def rotate(uow: UnitOfWork) -> SigningKeyView:
    """Make a new active key and retire the current one (it stays published and in the keyring).

    The new key's public half is appended to the keyring and recorded; its private half
    replaces the key file once the database has committed the rotation, so a failed rotation
    leaves the previous key file in place. Other replicas need the new key file: until they
    get it they refuse to sign (503) rather than sign with the retired key.

    The retired key is marked retired in the keyring, bounded by what it could sign while it was
    active (`policies.evidence.keyring.Retirement`), and a key transition statement signed by
    both keys is kept and published (`transitions`): agents that pinned the old key learn the new
    one from it and take manifests from the new key only.

    Raises:
        InvalidValueError: the key comes from ``ISOFABRIC_SIGNING_KEY`` (update it yourself) or
            no key file or keyring can be named.
        KeyUnavailableError: the current key file is missing or not the active key (the
            transition needs the retiring key's signature).
    """
    settings = uow.settings
    if settings.signing_key_pem:
        raise InvalidValueError(
            "the signing key comes from ISOFABRIC_SIGNING_KEY: `keys rotate` writes a key "
            "file; set ISOFABRIC_SIGNING_KEY_FILE instead"
        )
    path = _required(settings.signing_key_path, "ISOFABRIC_SIGNING_KEY_FILE")
    keyring = _required(settings.keyring_path, "ISOFABRIC_KEYRING_FILE")
    key = key_store.generate_signing_key()
    staged = key_store.staged_private_file(path, key_store.private_pem(key))
    try:
        with uow.transaction() as tx:
            _lock_keys(tx.session)
            new, transition = _retire_and_add(tx, key, keyring)
    except BaseException:
        staged.unlink()
        raise
    # Only once the database committed: a failed rotation leaves both files as they were.
    os.replace(staged, path)
    key_store.rotate_keyring(keyring, _entry(new), transition)
    return published(new)


def _retire_and_add(
    tx: Tx, key: Ed25519PrivateKey, keyring: Path
) -> tuple[m.SigningKey, KeyTransition | None]:
    """Retire the active key and record `key` as the new active one; the keyring's change."""
    old, old_key = key_store.active_row(tx.session), key_retirement.retiring_key(tx)
    if old is not None:
        old.status = "retired"
        tx.session.add(old)
    new = _add_row(tx, key, _fresh_name(tx, keyring))
    # Rotation is a mutation like any other: the entry also grows the log, so the next
    # checkpoint is a new one, signed by the key now active (never the retired one). The
    # entries before it are what the retired key can have vouched for.
    # Sealed by the new key: unsealed entries among sealed ones read as stripped seals.
    audit_seal.seal_with(tx.session, new.name, key)
    entry = audit_log.record(tx, "keys.rotate", f"keys/{new.name}")
    if old is None:
        return new, None
    transition = key_retirement.hand_over(tx, (old, old_key), (new, key), entry.index)
    return new, transition


def _ensure_opensm_secret(settings: Settings) -> Path | None:
    """Create the OpenSM secret file (mode 0600) unless a secret exists; the file it wrote."""
    if key_store.existing_opensm_secret(settings) is not None:
        return None
    path = _required(settings.opensm_secret_path, "ISOFABRIC_OPENSM_SECRET_FILE")
    try:
        key_store.write_private_file(path, key_store.new_opensm_secret())
    except FileExistsError:  # created meanwhile by another `keys create`: that one is the secret
        return None
    return path


def _required(path: Path | None, variable: str) -> Path:
    if path is None:
        raise InvalidValueError(
            f"set {variable}: there is no default location beside an in-memory or PostgreSQL "
            "database"
        )
    return path


def _lock_keys(session: Session) -> None:
    if session.get_bind().dialect.name == "postgresql":
        session.connection().execute(
            text("SELECT pg_advisory_xact_lock(:a, :b)"), {"a": KEYS_LOCK[0], "b": KEYS_LOCK[1]}
        )


def _keyring_name(keyring: Path, key: Ed25519PrivateKey) -> str | None:
    """The name the keyring gives `key`, if it holds it."""
    if not keyring.exists():
        return None
    keyid = key_id(key.public_key())
    return next((e.name for e in key_store.read_keyring(keyring) if e.keyid == keyid), None)


def _entry(row: m.SigningKey) -> KeyringEntry:
    return KeyringEntry.of(row.name, row.public_pem)


def _retired_entries(session: Session) -> list[KeyringEntry]:
    query = select(m.SigningKey).where(m.SigningKey.status == "retired")
    return [_entry(row) for row in session.exec(query.order_by(col(m.SigningKey.id)))]


def published(row: m.SigningKey) -> SigningKeyView:
    """``{"keyid", "name", "pem", "jwk", "status"}`` of a stored key (public parts only)."""
    public = load_public_key(row.public_pem)
    return SigningKeyView(
        keyid=key_id(public),
        name=row.name,
        pem=row.public_pem,
        jwk=PublicJWK.model_validate(public_jwk(public)),
        status=row.status,
        retired=key_retirement.retirement_view(row),
    )


def list_keys(uow: UnitOfWork) -> SigningKeysView:
    """Every recorded key, oldest first, in its published form (none until `keys create`)."""
    with uow.transaction(read_only=True) as tx:
        rows = tx.session.exec(select(m.SigningKey).order_by(col(m.SigningKey.id)))
        return SigningKeysView(keys=[published(row) for row in rows])


def readiness(uow: UnitOfWork) -> list[KeyUnavailableError]:
    """Why the service cannot sign or render OpenSM files yet; empty when it can.

    Each error names the missing file (or variable) and the command that creates it.
    """
    return list(readiness_by_check(uow).values())


def readiness_by_check(uow: UnitOfWork) -> dict[str, KeyUnavailableError]:
    """`readiness` by the /readyz check that fails: ``signing_key``, ``opensm_secret``."""
    problems: dict[str, KeyUnavailableError] = {}
    try:
        with uow.transaction(read_only=True) as tx:
            key_store.signer(tx.session, tx.settings)
    except KeyUnavailableError as error:
        problems["signing_key"] = error
    try:
        _opensm_ready(uow.settings)
    except KeyUnavailableError as error:
        problems["opensm_secret"] = error
    return problems


def _opensm_ready(settings: Settings) -> None:
    """Raise `KeyUnavailableError` unless the OpenSM keys can be derived or are configured."""
    if settings.opensm_m_key and settings.opensm_sm_key and settings.opensm_sa_key:
        return
    key_store.load_opensm_secret(settings)
