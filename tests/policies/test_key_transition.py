"""Key transition statements: a trusted key hands over to its successor, both signing."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from policies.errors import InvalidValueError
from policies.evidence.dsse import sign_envelope
from policies.evidence.key_transition import (
    KEY_TRANSITION_PAYLOAD_TYPE,
    apply_transition,
    sign_transition,
    verify_transition,
)
from policies.evidence.keyring import KeyringEntry, Retirement, active_keys, parse_keyring
from tenancy.store.key_store import public_pem

OLD, NEW, MALLORY = (Ed25519PrivateKey.generate() for _ in range(3))
WHEN = Retirement(datetime(2026, 12, 6, 12, 0, tzinfo=UTC), epoch=1, log_size=40)


def entry(name: str, key: Ed25519PrivateKey) -> KeyringEntry:
    return KeyringEntry.of(name, public_pem(key.public_key()))


def statement(old: Ed25519PrivateKey = OLD, new: Ed25519PrivateKey = NEW) -> dict[str, Any]:
    return sign_transition(("log", old), ("log.r2", new), WHEN)


def test_a_statement_signed_by_both_keys_introduces_the_successor():
    transition = verify_transition(statement(), [entry("log", OLD)])

    assert transition.retired_keyid == entry("log", OLD).keyid
    assert transition.new == entry("log.r2", NEW)
    assert transition.retirement == WHEN


def test_a_statement_about_a_key_not_trusted_is_refused():
    with pytest.raises(InvalidValueError, match="not trusted"):
        verify_transition(statement(old=MALLORY), [entry("log", OLD)])


@pytest.mark.parametrize("kept", [0, 1], ids=["only-the-new-key", "only-the-old-key"])
def test_a_statement_missing_either_signature_is_refused(kept):
    envelope = statement()
    envelope["signatures"] = [envelope["signatures"][kept]]

    with pytest.raises(InvalidValueError, match="signature"):
        verify_transition(envelope, [entry("log", OLD)])


def test_a_successor_whose_keyid_is_not_its_pem_is_refused():
    document = json.loads(base64.b64decode(statement()["payload"]))
    document["new"]["keyid"] = entry("x", MALLORY).keyid
    envelope = sign_envelope(document, OLD, KEY_TRANSITION_PAYLOAD_TYPE)
    envelope["signatures"] += sign_envelope(document, NEW, KEY_TRANSITION_PAYLOAD_TYPE)[
        "signatures"
    ]

    with pytest.raises(InvalidValueError, match="keyid does not match"):
        verify_transition(envelope, [entry("log", OLD)])


def test_applying_retires_the_old_key_appends_the_new_once_and_survives_the_file():
    transition = verify_transition(statement(), [entry("log", OLD)])

    once = apply_transition([entry("log", OLD)], transition)
    twice = apply_transition(once, transition)
    reread = parse_keyring("".join(e.line() + "\n" for e in twice), "keyring")

    assert [e.name for e in twice] == ["log", "log.r2"]
    assert reread == twice and reread[0].retired == WHEN and reread[1].retired is None
    assert len(active_keys(reread)) == 1


def test_a_successor_whose_name_another_key_holds_is_refused():
    transition = verify_transition(statement(), [entry("log", OLD)])

    with pytest.raises(InvalidValueError, match="another key named"):
        apply_transition([entry("log", OLD), entry("log.r2", MALLORY)], transition)


def test_a_retirement_bounds_checkpoints_and_times():
    assert WHEN.covers_checkpoint(40) and not WHEN.covers_checkpoint(41)
    assert WHEN.covers_time(WHEN.at) and not WHEN.covers_time(datetime(2026, 12, 7, tzinfo=UTC))


def test_a_statement_whose_successor_is_the_retired_key_itself_is_refused():
    with pytest.raises(InvalidValueError, match="the key it retires"):
        verify_transition(statement(new=OLD), [entry("log", OLD)])
