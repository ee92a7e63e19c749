"""The envelope of an isolation proof: a DSSE-signed in-toto Statement.

Formats:

* The payload is an in-toto Statement v1 (``_type`` `STATEMENT_TYPE`) serialised as RFC 8785
  canonical JSON; its subjects are the verified artifact files (``name`` = artifact path,
  ``digest`` = ``{"sha256": hex}``) and its predicate (type `PREDICATE_TYPE`) carries the claims.
  Every integer-like identifier (GUIDs, P_Keys, VNIs) is a string, so no number exceeds 2**53;
  counts are JSON integers.
* The envelope is DSSE: ``{"payloadType", "payload": base64, "signatures": [{"keyid", "sig"}]}``
  with the Ed25519 signature over ``PAE(payloadType, payload)`` (`pae`).
* ``keyid`` is the lowercase hex SHA-256 of the 32-byte raw Ed25519 public key (`key_id`); it
  is only a hint for picking the key, the signature is what is checked.

Pure: keys are passed in; every failure raises `policies.errors.InvalidValueError`. What the
predicate claims and how it is re-derived offline is `policies.evidence.proofs`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from policies.errors import InvalidValueError

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://isofabric.dev/isolation-proof/v1"
"""Stable URI of the predicate; a change of its meaning gets a new version suffix."""


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding of `body` (lengths are ASCII decimal byte counts).

    Args:
        payload_type: The envelope's payloadType.
        body: The serialized payload bytes.

    Returns:
        ``b"DSSEv1 <len(type)> <type> <len(body)> <body>"``.
    """
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)


def _raw(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def key_id(public_key: Ed25519PublicKey) -> str:
    """The key's stable id: lowercase hex SHA-256 of its 32-byte raw public key."""
    return hashlib.sha256(_raw(public_key)).hexdigest()


def public_jwk(public_key: Ed25519PublicKey) -> dict[str, str]:
    """The key as an RFC 8037 JWK: ``{"kty": "OKP", "crv": "Ed25519", "x": base64url}``."""
    x = base64.urlsafe_b64encode(_raw(public_key)).rstrip(b"=").decode()
    return {"kty": "OKP", "crv": "Ed25519", "x": x}


def canonical_json(document: Any) -> bytes:
    """RFC 8785 canonical JSON bytes of `document`.

    Raises:
        InvalidValueError: The document holds a value JCS cannot represent (e.g. int > 2**53).
    """
    try:
        return bytes(rfc8785.dumps(document))
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as error:
        raise InvalidValueError(f"cannot canonicalise the statement: {error}") from error


def build_statement(
    subjects: Iterable[tuple[str, str]], predicate: Mapping[str, Any]
) -> dict[str, Any]:
    """An in-toto Statement v1 over `subjects` ((path, sha256 hex) pairs, sorted by path)."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": name, "digest": {"sha256": digest}} for name, digest in sorted(subjects)
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": dict(predicate),
    }


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def sign_envelope(
    statement: Mapping[str, Any], key: Ed25519PrivateKey, payload_type: str = PAYLOAD_TYPE
) -> dict[str, Any]:
    """Sign the canonical JSON of `statement` into a DSSE envelope with one signature."""
    body = canonical_json(dict(statement))
    signature = key.sign(pae(payload_type, body))
    return {
        "payloadType": payload_type,
        "payload": _b64(body),
        "signatures": [{"keyid": key_id(key.public_key()), "sig": _b64(signature)}],
    }


def _unb64(text: Any, what: str) -> bytes:
    if not isinstance(text, str):
        raise InvalidValueError(f"{what} is not a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise InvalidValueError(f"{what} is not valid base64") from error


def verify_envelope(
    envelope: Mapping[str, Any], keys: Sequence[Ed25519PublicKey]
) -> dict[str, Any]:
    """Check the envelope's signature with any of `keys` and return the Statement it carries.

    Raises:
        InvalidValueError: Malformed envelope, wrong payload type, no signature verifying with one
            of `keys`, or a payload that is not an in-toto Statement v1 with our predicate.
    """
    return _statement(open_envelope(envelope, keys, PAYLOAD_TYPE))


def open_envelope(
    envelope: Mapping[str, Any], keys: Sequence[Ed25519PublicKey], payload_type: str
) -> bytes:
    """The payload bytes of a DSSE envelope of `payload_type` signed by one of `keys`.

    Raises:
        InvalidValueError: Not a mapping, another payload type, bad base64, no signatures, or
            no signature that verifies over ``PAE(payload_type, payload)`` with one of `keys`.
    """
    if not isinstance(envelope, Mapping) or envelope.get("payloadType") != payload_type:
        raise InvalidValueError(f"payloadType is not {payload_type}")
    body = _unb64(envelope.get("payload"), "payload")
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise InvalidValueError("the envelope has no signatures")
    message = pae(payload_type, body)
    if not any(_verifies(key, _sig(s), message) for s in signatures for key in keys):
        raise InvalidValueError("signature verification failed: no signature matches the key")
    return body


def signed_by(
    envelope: Mapping[str, Any], keys: Sequence[Ed25519PublicKey], payload_type: str
) -> Ed25519PublicKey | None:
    """The first of `keys` that signed `envelope` (None when none did, or it is malformed)."""
    try:
        message = pae(payload_type, _unb64(envelope.get("payload"), "payload"))
        signatures = [_sig(s) for s in envelope.get("signatures") or []]
    except (InvalidValueError, AttributeError, TypeError):
        return None
    return next((k for k in keys for s in signatures if _verifies(k, s, message)), None)


def _sig(entry: Any) -> bytes:
    return _unb64(entry.get("sig") if isinstance(entry, dict) else None, "signature")


def _verifies(key: Ed25519PublicKey, signature: bytes, message: bytes) -> bool:
    try:
        key.verify(signature, message)
    except InvalidSignature:
        return False
    return True


def _statement(body: bytes) -> dict[str, Any]:
    try:
        statement = json.loads(body)
    except ValueError as error:
        raise InvalidValueError("the payload is not JSON") from error
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise InvalidValueError(f"the payload is not an in-toto Statement ({STATEMENT_TYPE})")
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise InvalidValueError(f"predicateType is not {PREDICATE_TYPE}")
    if not isinstance(statement.get("predicate"), dict):
        raise InvalidValueError("the statement has no predicate")
    return statement


def check_subjects(statement: Mapping[str, Any], files: Mapping[str, bytes]) -> None:
    """Require every subject's file in `files` (path -> content) with the stated sha256.

    Raises:
        InvalidValueError: A subject is missing from `files` or its digest differs.
    """
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or not subjects:
        raise InvalidValueError("the statement has no subjects")
    for subject in subjects:
        name = subject.get("name")
        if name not in files:
            raise InvalidValueError(f"artifact '{name}' is missing")
        actual = hashlib.sha256(files[name]).hexdigest()
        if actual != subject.get("digest", {}).get("sha256"):
            raise InvalidValueError(f"artifact '{name}': sha256 {actual} does not match the proof")
