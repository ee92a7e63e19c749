"""Where the service's secrets live: in files next to the database, never in it.

Anyone who can change rows must not be able to sign, so the database holds public keys only:

* the **signing key**: Ed25519, PKCS#8 PEM, in a file of mode 0600 (`Settings.signing_key_path`,
  default ``./isofabric-signing.key`` beside ``./isofabric.db``) or in ``ISOFABRIC_SIGNING_KEY``;
* the **keyring**: the public keys verifiers trust (`audit verify`, `proof verify`), JSON Lines
  ``{"name", "keyid", "pem"}`` (`Settings.keyring_path`), appended by `keys create` and `keys
  rotate`, so a history signed by several keys verifies;
* the **OpenSM secret**: 32 random bytes, hex, in a file of mode 0600 (`Settings
  .opensm_secret_path`) or in ``ISOFABRIC_OPENSM_SECRET``; each fabric's M_Key, SM_Key and
  SA_Key derive from it (tenancy/record/subnet_manager.py).

Nothing here creates a key on its own initiative: only `isofabric keys create` (and `keys
rotate`) do, through tenancy/usecases/signing_keys.py. Replicas started at once would otherwise race
to make two keys. A missing key is a `KeyUnavailableError` (503) naming the file and that command.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sqlmodel import Session, col, select

from policies.errors import ConflictError, InvalidValueError, KeyUnavailableError
from policies.evidence.audit_log import load_public_key
from policies.evidence.key_transition import KeyTransition, apply_transition
from policies.evidence.keyring import KeyringEntry, parse_keyring
from tenancy import models as m
from tenancy.store.settings import Settings

CREATE_COMMAND = "isofabric keys create"
OPENSM_SECRET_BYTES = 32
# An OpenSM secret shorter than this (from the environment) is refused: the keys derive from it.
MIN_OPENSM_SECRET_BYTES = 16


# --- files of mode 0600 -------------------------------------------------------------------------


def write_private_file(path: Path, text: str) -> None:
    """Create `path` with mode 0600 and write `text`; ``FileExistsError`` if it exists.

    ``O_EXCL`` makes creation atomic: two `keys create` on one host cannot both write a key.
    """
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def staged_private_file(path: Path, text: str) -> Path:
    """Write `text` to a new 0600 file beside `path`; `os.replace` it onto `path` to install it."""
    staged = path.with_name(f".{path.name}.{secrets.token_hex(4)}.new")
    write_private_file(staged, text)
    return staged


# --- the signing key ----------------------------------------------------------------------------


def generate_signing_key() -> Ed25519PrivateKey:
    """A new Ed25519 key (only `keys create` and `keys rotate` call this)."""
    return Ed25519PrivateKey.generate()


def private_pem(key: Ed25519PrivateKey) -> str:
    """The key as unencrypted PKCS#8 PEM, as the key file holds it (OpenSSL reads it too)."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def public_pem(key: Ed25519PublicKey) -> str:
    """The public key as SubjectPublicKeyInfo PEM (what the database and the keyring hold)."""
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


def signing_key_source(settings: Settings) -> str:
    """Where the signing key is read from, for messages: the variable or the file."""
    if settings.signing_key_pem:
        return "ISOFABRIC_SIGNING_KEY"
    path = settings.signing_key_path
    return str(path) if path else "ISOFABRIC_SIGNING_KEY_FILE (unset)"


def existing_signing_key(settings: Settings) -> Ed25519PrivateKey | None:
    """The configured signing key, or None when its file does not exist (or none is named)."""
    if settings.signing_key_pem:
        return _parse_private_key(settings.signing_key_pem, "ISOFABRIC_SIGNING_KEY")
    path = settings.signing_key_path
    if path is None or not path.exists():
        return None
    return _parse_private_key(path.read_text(), str(path))


def load_signing_key(settings: Settings) -> Ed25519PrivateKey:
    """The configured signing key; `KeyUnavailableError` naming the file when it is missing."""
    key = existing_signing_key(settings)
    if key is None:
        raise KeyUnavailableError(
            f"the signing key is missing: {missing_signing_key(settings)}",
            missing=[signing_key_source(settings)],
        )
    return key


def missing_signing_key(settings: Settings) -> str:
    """How to provide the signing key, for a message."""
    path = settings.signing_key_path
    if path is None:
        return (
            "set ISOFABRIC_SIGNING_KEY_FILE (there is no default beside an in-memory or "
            f"PostgreSQL database), then run `{CREATE_COMMAND}`"
        )
    return f"no key file at {path}; run `{CREATE_COMMAND}` (or copy the active key's file there)"


def _parse_private_key(text: str, source: str) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(text.encode(), password=None)
    except (ValueError, TypeError) as error:
        raise KeyUnavailableError(
            f"the signing key in {source} is not a readable PEM private key", missing=[source]
        ) from error
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyUnavailableError(f"the signing key in {source} is not Ed25519", missing=[source])
    return key


def same_key(a: Ed25519PublicKey, b: Ed25519PublicKey) -> bool:
    """True when both are the same public key (compared by their raw bytes)."""
    raw = serialization.Encoding.Raw, serialization.PublicFormat.Raw
    return a.public_bytes(*raw) == b.public_bytes(*raw)


def row_of(session: Session, key: Ed25519PublicKey) -> m.SigningKey | None:
    """The `signing_key` row holding `key`'s public half, if the database records it."""
    for row in session.exec(select(m.SigningKey).order_by(col(m.SigningKey.id))):
        if same_key(load_public_key(row.public_pem), key):
            return row
    return None


def active_row(session: Session) -> m.SigningKey | None:
    """The database's active key (public half and name), if one was created."""
    query = select(m.SigningKey).where(m.SigningKey.status == "active")
    return session.exec(query.order_by(col(m.SigningKey.id).desc())).first()


def signer(session: Session, settings: Settings) -> tuple[str, Ed25519PrivateKey]:
    """The name and private key to sign with: the key file's key, if it is the active one.

    The database only names the key; it cannot make the service sign with another one. A key
    file that is not the active key (a replica that missed a rotation, a wrong file) is refused
    rather than used, so all replicas sign with the one key `/v1/keys` publishes.

    Raises:
        KeyUnavailableError: no key file, no active key in the database, or a key file that holds
            another key (503).
    """
    key = load_signing_key(settings)
    active = active_row(session)
    source = signing_key_source(settings)
    if active is None:
        raise KeyUnavailableError(
            f"no active signing key is registered in the database; run `{CREATE_COMMAND}`",
            missing=["signing_key (database)"],
        )
    if not same_key(load_public_key(active.public_pem), key.public_key()):
        raise KeyUnavailableError(
            f"the signing key in {source} is not the active key '{active.name}' (rotated on "
            "another host?); install the active key's file, or run `isofabric keys rotate`",
            missing=[source],
        )
    return active.name, key


# --- the keyring --------------------------------------------------------------------------------


def read_keyring(path: Path) -> list[KeyringEntry]:
    """Every entry of a keyring file, in file order.

    Raises:
        InvalidValueError: the file is missing, or a line is not an entry with a name and an
            Ed25519 public key PEM (the line number is named).
    """
    if not path.is_file():
        raise InvalidValueError(f"no keyring at {path}")
    return parse_keyring(path.read_text(), str(path))


def append_to_keyring(path: Path, entries: list[KeyringEntry]) -> list[KeyringEntry]:
    """Append the entries the keyring does not hold yet; returns the ones appended.

    Raises:
        ConflictError: the keyring already trusts another key under one of the names (a
            keyring of another deployment, or an edited one).
    """
    held = read_keyring(path) if path.exists() else []
    new = [e for e in entries if e.keyid not in {h.keyid for h in held}]
    for entry in new:
        clash = next((h for h in held if h.name == entry.name), None)
        if clash is not None:
            raise ConflictError(
                f"the keyring {path} already trusts another key named '{entry.name}' "
                f"(keyid {clash.keyid})"
            )
    if new:
        # Appending (never rewriting) keeps every key that signed part of the history.
        with path.open("a") as handle:
            handle.writelines(e.line() + "\n" for e in new)
    return new


def retire_in_keyring(path: Path, transition: KeyTransition) -> None:
    """Mark the transition's retired key retired in the keyring (and hold its successor).

    The file is rewritten whole (a scratch file renamed over it), every key kept: a retired
    key still verifies what it signed while it was active.
    """
    _write_keyring(path, apply_transition(read_keyring(path), transition))


def rotate_keyring(path: Path, successor: KeyringEntry, transition: KeyTransition | None) -> None:
    """After a rotation committed: `successor` added and the key `transition` retires marked.

    One rewrite (a scratch file renamed over it): a reader sees the keyring before or after.

    Raises:
        ConflictError: the keyring trusts another key under the successor's name.
    """
    entries = read_keyring(path) if path.exists() else []
    if transition is not None:
        try:
            entries = apply_transition(entries, transition)
        except InvalidValueError as clash:
            raise ConflictError(clash.detail) from clash
    elif successor.keyid not in {e.keyid for e in entries}:
        entries.append(successor)
    _write_keyring(path, entries)


def _write_keyring(path: Path, entries: list[KeyringEntry]) -> None:
    scratch = path.with_name(f".{path.name}.{secrets.token_hex(4)}.new")
    scratch.write_text("".join(e.line() + "\n" for e in entries))
    os.replace(scratch, path)


# --- the OpenSM secret --------------------------------------------------------------------------


def existing_opensm_secret(settings: Settings) -> bytes | None:
    """The OpenSM secret, or None when its file does not exist (or none is named)."""
    if settings.opensm_secret:
        return _parse_secret(settings.opensm_secret, "ISOFABRIC_OPENSM_SECRET")
    path = settings.opensm_secret_path
    if path is None or not path.exists():
        return None
    return _parse_secret(path.read_text(), str(path))


def load_opensm_secret(settings: Settings) -> bytes:
    """The OpenSM secret; `KeyUnavailableError` naming the file when it is missing."""
    secret = existing_opensm_secret(settings)
    if secret is None:
        raise KeyUnavailableError(
            f"the OpenSM secret is missing: {missing_opensm_secret(settings)}",
            missing=[opensm_secret_source(settings)],
        )
    return secret


def opensm_secret_source(settings: Settings) -> str:
    """Where the OpenSM secret is read from, for messages."""
    if settings.opensm_secret:
        return "ISOFABRIC_OPENSM_SECRET"
    path = settings.opensm_secret_path
    return str(path) if path else "ISOFABRIC_OPENSM_SECRET_FILE (unset)"


def missing_opensm_secret(settings: Settings) -> str:
    """How to provide the OpenSM secret, for a message."""
    path = settings.opensm_secret_path
    if path is None:
        return (
            "set ISOFABRIC_OPENSM_SECRET_FILE (there is no default beside an in-memory or "
            f"PostgreSQL database), then run `{CREATE_COMMAND}`"
        )
    return f"no secret file at {path}; run `{CREATE_COMMAND}` (or copy the existing one there)"


def new_opensm_secret() -> str:
    """A fresh secret as the file holds it: hex and a newline."""
    return secrets.token_hex(OPENSM_SECRET_BYTES) + "\n"


def _parse_secret(text: str, source: str) -> bytes:
    try:
        secret = bytes.fromhex(text.strip())
    except ValueError as error:
        raise KeyUnavailableError(
            f"the OpenSM secret in {source} is not hex", missing=[source]
        ) from error
    if len(secret) < MIN_OPENSM_SECRET_BYTES:
        raise KeyUnavailableError(
            f"the OpenSM secret in {source} is shorter than {MIN_OPENSM_SECRET_BYTES} bytes",
            missing=[source],
        )
    return secret
