"""C2SP signed notes and tlog checkpoints: known vectors, round trip, every rejection."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from policies.errors import InvalidValueError
from policies.evidence.merkle import leaf_hash, root_hash
from policies.evidence.signed_note import (
    Checkpoint,
    checkpoint_text,
    key_id,
    open_note,
    parse_checkpoint,
    sign_note,
    verifier_key,
    verify_note,
)

# The example of golang.org/x/mod/sumdb/note (an independent implementation of signed-note).
GO_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
GO_NOTE = (
    GO_TEXT + "\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZS"
    "NXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)
# The example of the c2sp.org/signed-note specification.
SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
SPEC_NOTE = (
    "This is an example message.\n\n\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfX"
    "ppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
)

ORIGIN = "isofabric.example/audit"
NAME = "isofabric.example/audit-log"
KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
ROOT = root_hash([leaf_hash(b"a"), leaf_hash(b"b"), leaf_hash(b"c")])


def _public_from_vkey(vkey: str) -> tuple[str, Ed25519PublicKey]:
    name, _, encoded = vkey.split("+", 2)
    raw = base64.b64decode(encoded)
    assert raw[0] == 0x01
    return name, Ed25519PublicKey.from_public_bytes(raw[1:])


def _signed(size: int = 3, root: bytes = ROOT) -> str:
    return sign_note(checkpoint_text(ORIGIN, size, root), NAME, KEY)


# --- known vectors ------------------------------------------------------------------------------


def test_go_reference_sign_and_verify():
    seed = base64.b64decode(GO_SKEY.split("+", 4)[4])[1:]
    private = Ed25519PrivateKey.from_private_bytes(seed)
    name, public = _public_from_vkey(GO_VKEY)
    assert verifier_key(name, private.public_key()) == GO_VKEY
    assert key_id(name, public).hex() == "c74f20a3"
    assert sign_note(GO_TEXT, name, private) == GO_NOTE  # Ed25519 is deterministic
    assert open_note(GO_NOTE, name, public) == GO_TEXT


def test_spec_example_verifies():
    name, public = _public_from_vkey(SPEC_VKEY)
    assert verifier_key(name, public) == SPEC_VKEY
    assert open_note(SPEC_NOTE, name, public) == "This is an example message.\n"


def test_key_id_definition():
    public = KEY.public_key()
    raw = base64.b64decode(verifier_key(NAME, public).split("+", 2)[2])
    expected = hashlib.sha256(NAME.encode() + b"\n" + raw).digest()[:4]
    assert raw[0] == 0x01 and len(raw) == 33
    assert key_id(NAME, public) == expected


# --- checkpoints --------------------------------------------------------------------------------


def test_checkpoint_text_format():
    text = checkpoint_text(ORIGIN, 3, ROOT)
    assert text == f"{ORIGIN}\n3\n{base64.b64encode(ROOT).decode()}\n"
    assert parse_checkpoint(text) == Checkpoint(ORIGIN, 3, ROOT)


def test_round_trip():
    note = _signed()
    assert note.startswith(checkpoint_text(ORIGIN, 3, ROOT) + "\n\u2014 " + NAME + " ")
    assert note.endswith("\n") and note.count("\n") == 5
    checkpoint = verify_note(note, NAME, KEY.public_key())
    assert checkpoint == Checkpoint(origin=ORIGIN, size=3, root=ROOT)
    assert verify_note(note, NAME, KEY.public_key(), origin=ORIGIN) == checkpoint
    with pytest.raises(AttributeError):
        checkpoint.size = 4  # type: ignore[misc]


def test_empty_tree_checkpoint():
    note = sign_note(checkpoint_text(ORIGIN, 0, hashlib.sha256().digest()), NAME, KEY)
    assert verify_note(note, NAME, KEY.public_key()).size == 0


def test_other_keys_signatures_are_ignored():
    note = _signed()
    cosigned = sign_note(checkpoint_text(ORIGIN, 3, ROOT), "witness.example", OTHER_KEY)
    both = note + cosigned.split("\n\n", 1)[1]
    assert verify_note(both, NAME, KEY.public_key()).size == 3
    assert verify_note(both, "witness.example", OTHER_KEY.public_key()).size == 3


def test_extension_lines_are_signed_and_ignored():
    text = checkpoint_text(ORIGIN, 3, ROOT) + "extension line\n"
    assert verify_note(sign_note(text, NAME, KEY), NAME, KEY.public_key()).size == 3


# --- rejections ---------------------------------------------------------------------------------


def _replace_line(note: str, index: int, value: str) -> str:
    lines = note.split("\n")
    lines[index] = value
    return "\n".join(lines)


def _flip_signature_bit(note: str) -> str:
    text, sig_line = note.rstrip("\n").rsplit("\n", 1)
    prefix, encoded = sig_line.rsplit(" ", 1)
    blob = bytearray(base64.b64decode(encoded))
    blob[10] ^= 0x01
    return f"{text}\n{prefix} {base64.b64encode(bytes(blob)).decode()}\n"


@pytest.mark.parametrize(
    "mangle",
    [
        pytest.param(lambda n: _replace_line(n, 1, "4"), id="size"),
        pytest.param(
            lambda n: _replace_line(n, 2, base64.b64encode(b"\0" * 32).decode()), id="root"
        ),
        pytest.param(lambda n: _replace_line(n, 0, "evil.example/audit"), id="origin"),
        pytest.param(_flip_signature_bit, id="signature-bit"),
        pytest.param(lambda n: n.replace("\n\n", "\n", 1), id="no-blank-line"),
        pytest.param(lambda n: n.split("\n\n")[0] + "\n\n", id="no-signature-lines"),
        pytest.param(lambda n: n.replace("\u2014", "-"), id="hyphen-not-em-dash"),
        pytest.param(lambda n: n.rstrip("\n"), id="no-final-newline"),
        pytest.param(lambda n: n.replace("\n", "\r\n"), id="crlf"),
        pytest.param(lambda n: n[:-2] + "\n", id="truncated-base64"),
        pytest.param(lambda n: n.replace(f" {NAME} ", f" {NAME}  "), id="double-space"),
        pytest.param(lambda n: n + n.split("\n\n")[1] * 101, id="too-many-signatures"),
    ],
)
def test_tampered_notes_are_rejected(mangle):
    note = _signed()
    with pytest.raises(InvalidValueError):
        verify_note(mangle(note), NAME, KEY.public_key())


def test_wrong_key_is_rejected():
    with pytest.raises(InvalidValueError, match="no signature by key"):
        verify_note(_signed(), NAME, OTHER_KEY.public_key())


def test_wrong_key_name_is_rejected():
    with pytest.raises(InvalidValueError, match="no signature by key"):
        verify_note(_signed(), "someone.else/log", KEY.public_key())


def test_bad_signature_by_expected_key_is_rejected_even_next_to_a_good_one():
    note = _signed()
    bad = _flip_signature_bit(note).split("\n\n")[1]
    with pytest.raises(InvalidValueError, match="does not verify"):
        verify_note(note + bad, NAME, KEY.public_key())


def test_unexpected_origin_is_rejected():
    with pytest.raises(InvalidValueError, match="origin"):
        verify_note(_signed(), NAME, KEY.public_key(), origin="other.example/audit")


@pytest.mark.parametrize(
    "text",
    [
        f"{ORIGIN}\n3\n",  # no root line
        f"{ORIGIN}\n03\n{base64.b64encode(ROOT).decode()}\n",  # leading zero
        f"{ORIGIN}\n-3\n{base64.b64encode(ROOT).decode()}\n",
        f"{ORIGIN}\n{2**64}\n{base64.b64encode(ROOT).decode()}\n",
        f"{ORIGIN}\n3\n{base64.b64encode(ROOT[:31]).decode()}\n",  # short root
        f"{ORIGIN}\n3\n{base64.b64encode(ROOT).decode().rstrip('=')}\n",  # unpadded
        f"{ORIGIN}\n3\n{base64.b64encode(ROOT).decode()}\n\nx\n",  # empty line
        f"bad+origin\n3\n{base64.b64encode(ROOT).decode()}\n",
        f"{ORIGIN}\n3\n{base64.b64encode(ROOT).decode()}",  # no final newline
    ],
)
def test_malformed_checkpoints_are_rejected(text):
    with pytest.raises(InvalidValueError):
        parse_checkpoint(text)


@pytest.mark.parametrize("name", ["", "has space", "has+plus", "tab\there", "nl\n", "\x00"])
def test_invalid_names_are_rejected(name):
    with pytest.raises(InvalidValueError):
        key_id(name, KEY.public_key())
    with pytest.raises(InvalidValueError):
        checkpoint_text(name, 1, ROOT)
    with pytest.raises(InvalidValueError):
        sign_note("text\n", name, KEY)


@pytest.mark.parametrize(
    ("size", "root"), [(-1, ROOT), (2**64, ROOT), (True, ROOT), (1, ROOT[:31]), (1, b"")]
)
def test_checkpoint_text_refuses_bad_values(size, root):
    with pytest.raises(InvalidValueError):
        checkpoint_text(ORIGIN, size, root)


@pytest.mark.parametrize("text", ["", "no newline", "bell\x07\n", "cr\r\n", "surrogate\ud800\n"])
def test_sign_note_refuses_malformed_text(text):
    with pytest.raises(InvalidValueError):
        sign_note(text, NAME, KEY)
