r"""C2SP signed notes and tlog checkpoints: the signed tree heads of the audit log.

Formats (https://c2sp.org/signed-note, https://c2sp.org/tlog-checkpoint):

* A checkpoint is the note text ``<origin>\n<tree size>\n<base64 root hash>\n``: the origin
  names the log, the size is decimal without leading zeros, the root is the RFC 9162 root hash
  in standard base64 with padding. Further non-empty "extension lines" may follow; they are
  covered by the signature and ignored here.
* A signed note is the text, a blank line, then one or more signature lines
  ``— <key name> <base64(4-byte key ID || signature)>\n`` (``—`` is the em dash U+2014).
* For an Ed25519 key (signature type 0x01) the signature is Ed25519 over the note text's UTF-8
  bytes, and the key ID is ``SHA-256(key name || 0x0A || 0x01 || 32-byte public key)[:4]``.
* A verifier key is published as ``<key name>+<hex key ID>+<base64(0x01 || public key)>``.

Verification follows the signed-note rules: signature lines from other keys (another name or key
ID, e.g. a witness cosignature) are ignored, every line claiming to be from the expected key must
verify, and at least one must be present. Keys are taken as arguments; this module never
generates keys, reads files or looks at the clock. Every format or signature problem raises
`policies.errors.InvalidValueError` with the reason.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from policies.errors import InvalidValueError

__all__ = [
    "ED25519_TYPE",
    "Checkpoint",
    "checkpoint_text",
    "key_id",
    "open_note",
    "parse_checkpoint",
    "sign_note",
    "verifier_key",
    "verify_note",
]

ED25519_TYPE = 0x01
"""Signature type byte of Ed25519 keys in key IDs and verifier keys (c2sp.org/signed-note)."""

_SIG_PREFIX = "\u2014 "  # em dash and space starting every signature line
_HASH_SIZE = 32
_MAX_SIGNATURES = 100  # the Go reference (golang.org/x/mod/sumdb/note) rejects more
_MAX_SIZE = 2**64 - 1  # tree sizes are uint64 in the reference implementations


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A verified checkpoint: the log `origin` had `size` entries with Merkle root `root`."""

    origin: str
    size: int
    root: bytes


def checkpoint_text(origin: str, size: int, root: bytes) -> str:
    r"""Build the note text of a checkpoint (c2sp.org/tlog-checkpoint).

    Args:
        origin: The log's unique name, e.g. ``"isofabric.example/audit"`` (printable, no
            whitespace, no ``+``).
        size: Number of entries in the tree, ``0 <= size < 2**64``.
        root: The tree's RFC 9162 root hash (32 bytes).

    Returns:
        ``"<origin>\n<size>\n<base64 root>\n"``, ready for `sign_note`.

    Raises:
        InvalidValueError: An argument is malformed or out of range.
    """
    _check_name(origin, "origin")
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= _MAX_SIZE:
        raise InvalidValueError(
            f"checkpoint tree size must be an integer in 0..2^64-1, got {size!r}"
        )
    if not isinstance(root, bytes) or len(root) != _HASH_SIZE:
        raise InvalidValueError(f"checkpoint root hash must be {_HASH_SIZE} bytes")
    return f"{origin}\n{size}\n{base64.b64encode(root).decode('ascii')}\n"


def key_id(name: str, public_key: Ed25519PublicKey) -> bytes:
    """Compute the 4-byte key ID of an Ed25519 note key (c2sp.org/signed-note).

    Args:
        name: The key name (printable, no whitespace, no ``+``).
        public_key: The Ed25519 public key.

    Returns:
        ``SHA-256(name || 0x0A || 0x01 || 32-byte public key)[:4]``.

    Raises:
        InvalidValueError: The key name is invalid.
    """
    _check_name(name, "key name")
    material = name.encode() + b"\n" + bytes([ED25519_TYPE]) + _raw(public_key)
    return hashlib.sha256(material).digest()[:4]


def verifier_key(name: str, public_key: Ed25519PublicKey) -> str:
    """Encode an Ed25519 public key as a C2SP verifier key, for publishing to auditors.

    Args:
        name: The key name (printable, no whitespace, no ``+``).
        public_key: The Ed25519 public key.

    Returns:
        ``"<name>+<8 lowercase hex digits of the key ID>+<base64(0x01 || public key)>"``.

    Raises:
        InvalidValueError: The key name is invalid.
    """
    encoded = base64.b64encode(bytes([ED25519_TYPE]) + _raw(public_key)).decode("ascii")
    return f"{name}+{key_id(name, public_key).hex()}+{encoded}"


def sign_note(text: str, name: str, private_key: Ed25519PrivateKey) -> str:
    r"""Sign a note text with an Ed25519 key (c2sp.org/signed-note).

    Args:
        text: The note text: non-empty, ends with a newline, no control characters other than
            newline (e.g. a `checkpoint_text`).
        name: The signing key's name (printable, no whitespace, no ``+``).
        private_key: The Ed25519 private key; the caller owns its generation and storage.

    Returns:
        ``text + "\n" + "— <name> <base64(key ID || signature)>\n"``.

    Raises:
        InvalidValueError: The text or key name is malformed.
    """
    data = _check_text(text)
    kid = key_id(name, private_key.public_key())
    blob = base64.b64encode(kid + private_key.sign(data)).decode("ascii")
    return f"{text}\n{_SIG_PREFIX}{name} {blob}\n"


def open_note(note: str, name: str, public_key: Ed25519PublicKey) -> str:
    """Verify a signed note against one Ed25519 key and return its text.

    Signature lines from other keys are ignored; every line with this key's name and key ID
    must carry a valid signature, and there must be at least one.

    Args:
        note: The signed note (text, blank line, signature lines, final newline).
        name: The expected key name.
        public_key: The expected Ed25519 public key.

    Returns:
        The verified note text (ending with a newline, without the blank line).

    Raises:
        InvalidValueError: The note is malformed, carries no signature by this key, or a
            signature by this key does not verify.
    """
    kid = key_id(name, public_key)
    text, signatures = _split_note(note)
    found = False
    for sig_name, blob in signatures:
        if sig_name != name or blob[:4] != kid:
            continue  # another key, e.g. a witness: ignored (c2sp.org/signed-note)
        _check_signature(public_key, blob[4:], text, name)
        found = True
    if not found:
        raise InvalidValueError(f"note has no signature by key {name}+{kid.hex()}")
    return text


def verify_note(
    note: str, name: str, public_key: Ed25519PublicKey, *, origin: str | None = None
) -> Checkpoint:
    """Verify a signed checkpoint and return its content.

    Args:
        note: The signed checkpoint note.
        name: The expected key name.
        public_key: The expected Ed25519 public key.
        origin: If given, the origin the checkpoint must name (c2sp.org/tlog-checkpoint
            clients check the origin against the log they expect).

    Returns:
        The verified `Checkpoint`.

    Raises:
        InvalidValueError: The note or checkpoint is malformed, the signature is missing or
            invalid, or the origin is not the expected one.
    """
    checkpoint = parse_checkpoint(open_note(note, name, public_key))
    if origin is not None and checkpoint.origin != origin:
        raise InvalidValueError(
            f"checkpoint origin {checkpoint.origin!r} is not the expected {origin!r}"
        )
    return checkpoint


def parse_checkpoint(text: str) -> Checkpoint:
    r"""Parse a checkpoint note text (unsigned; use `verify_note` for untrusted input).

    Args:
        text: ``"<origin>\n<size>\n<base64 root>\n"`` optionally followed by non-empty
            extension lines, each ending with a newline.

    Returns:
        The `Checkpoint` (extension lines are ignored).

    Raises:
        InvalidValueError: The text is not a well-formed checkpoint.
    """
    if not text.endswith("\n"):
        raise InvalidValueError("checkpoint text must end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise InvalidValueError("checkpoint needs an origin, a tree size and a root hash line")
    if any(line == "" for line in lines):
        raise InvalidValueError("checkpoint text must not contain empty lines")
    _check_name(lines[0], "checkpoint origin")
    return Checkpoint(lines[0], _parse_size(lines[1]), _parse_root(lines[2]))


# --- parsing helpers ----------------------------------------------------------------------------


def _split_note(note: str) -> tuple[str, list[tuple[str, bytes]]]:
    """Split a note into its text and (key name, key ID || signature) pairs."""
    _check_text(note)
    split = note.rfind("\n\n")  # the signature block follows the last blank line
    if split < 0:
        raise InvalidValueError("note has no blank line before its signatures")
    text, block = note[: split + 1], note[split + 2 :]
    if not block:
        raise InvalidValueError("note has no signature lines")
    lines = block[:-1].split("\n")
    if len(lines) > _MAX_SIGNATURES:
        raise InvalidValueError(f"note has more than {_MAX_SIGNATURES} signature lines")
    return text, [_parse_signature_line(line) for line in lines]


def _parse_signature_line(line: str) -> tuple[str, bytes]:
    if not line.startswith(_SIG_PREFIX):
        raise InvalidValueError(f"signature line does not start with an em dash: {line!r}")
    name, sep, encoded = line[len(_SIG_PREFIX) :].partition(" ")
    if not sep:
        raise InvalidValueError(f"signature line has no signature: {line!r}")
    _check_name(name, "signature key name")
    blob = _strict_b64decode(encoded, "signature")
    if len(blob) < 5:
        raise InvalidValueError(f"signature of {name!r} is too short")
    return name, blob


def _check_signature(public_key: Ed25519PublicKey, sig: bytes, text: str, name: str) -> None:
    try:
        public_key.verify(sig, text.encode())
    except InvalidSignature:
        raise InvalidValueError(f"signature by key {name!r} does not verify") from None


def _parse_size(line: str) -> int:
    canonical = line == "0" or (line[:1] in "123456789" and line.isascii() and line.isdigit())
    if not canonical:
        raise InvalidValueError(f"checkpoint tree size {line!r} is not a canonical decimal")
    size = int(line)
    if size > _MAX_SIZE:
        raise InvalidValueError(f"checkpoint tree size {line} does not fit in 64 bits")
    return size


def _parse_root(line: str) -> bytes:
    root = _strict_b64decode(line, "checkpoint root hash")
    if len(root) != _HASH_SIZE:
        raise InvalidValueError(f"checkpoint root hash is {len(root)} bytes, not {_HASH_SIZE}")
    return root


def _strict_b64decode(encoded: str, what: str) -> bytes:
    """Decode standard padded base64, refusing any other spelling of the same bytes."""
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidValueError(f"{what} is not valid base64") from None
    if base64.b64encode(raw).decode("ascii") != encoded:
        raise InvalidValueError(f"{what} is not canonical base64")
    return raw


# --- validation helpers -------------------------------------------------------------------------


def _check_name(name: str, what: str) -> None:
    """Key names and origins: non-empty, printable, no whitespace, no '+' (c2sp.org/signed-note)."""
    if not isinstance(name, str) or not name:
        raise InvalidValueError(f"{what} must be a non-empty string")
    if "+" in name or not name.isprintable() or any(ch.isspace() for ch in name):
        raise InvalidValueError(f"{what} {name!r} must be printable, without whitespace or '+'")


def _check_text(text: str) -> bytes:
    """Check note text rules (UTF-8, newline-terminated, no other control characters)."""
    if not isinstance(text, str) or not text.endswith("\n"):
        raise InvalidValueError("note text must be a non-empty string ending with a newline")
    if any(ch != "\n" and (ch < " " or ch == "\x7f") for ch in text):
        raise InvalidValueError("note text must not contain control characters other than newline")
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise InvalidValueError("note text is not valid UTF-8") from None


def _raw(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)
