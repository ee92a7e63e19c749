"""The pure proof engine: PAE, DSSE sign/verify, statements and offline re-derivation."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from policies.errors import InvalidValueError
from policies.evidence.proofs import (
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    build_statement,
    check_claims,
    key_id,
    pae,
    public_jwk,
    rederive_ib_reachability,
    sign_envelope,
    verify_envelope,
)
from policies.infiniband.render import PARTITIONS_PATH

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))

ACME = ("0x0000000000000011", "0x0000000000000012")
STORAGE = "0x0000000000000021"
GLOBEX = "0x0000000000000031"
PARTITIONS = f"""\
Default=0x7fff, ipoib : ALL=limited, ALL_SWITCHES=full, SELF=full ;
storage=0x0100 : {ACME[0]}=limited, {ACME[1]}=limited, {STORAGE}=full, {GLOBEX}=limited ;
acme=0x0101 : {ACME[0]}=full, {ACME[1]}=full ;
globex=0x0103 : {GLOBEX}=full ;
"""
OWNERSHIP = {
    ACME[0]: "tenant:acme",
    ACME[1]: "tenant:acme",
    STORAGE: "service:storage",
    GLOBEX: "tenant:globex",
}
REACHABLE = [
    {"owner": "service:storage", "segment": "0x0100"},
    {"owner": "tenant:acme", "segment": "0x0101"},
]


def predicate(**changes: Any) -> dict[str, Any]:
    return {
        "fabric": "ib-east",
        "kind": "infiniband",
        "tenant": "acme",
        "endpoints": list(ACME),
        "ownership": OWNERSHIP,
        "reachable": REACHABLE,
        "verdict": {"holds": True},
        "time": "2026-12-02T12:00:00Z",
    } | changes


def statement(text: str = PARTITIONS, **changes: Any) -> dict[str, Any]:
    digest = hashlib.sha256(text.encode()).hexdigest()
    return build_statement([(PARTITIONS_PATH, digest)], predicate(**changes))


def test_pae_matches_the_dsse_specification_example():
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert pae(PAYLOAD_TYPE, b"") == b"DSSEv1 28 application/vnd.in-toto+json 0 "


def test_lengths_are_byte_counts_not_characters():
    assert pae("t", "é".encode()) == b"DSSEv1 1 t 2 \xc3\xa9"


def test_statement_is_an_in_toto_v1_statement_with_sorted_subjects():
    built = build_statement([("b", "22"), ("a", "11")], {"x": "1"})

    assert built["_type"] == STATEMENT_TYPE
    assert built["predicateType"] == PREDICATE_TYPE
    assert [s["name"] for s in built["subject"]] == ["a", "b"]
    assert built["subject"][0]["digest"] == {"sha256": "11"}


def test_sign_and_verify_round_trip_with_canonical_payload():
    signed = sign_envelope(statement(), KEY)

    assert signed["payloadType"] == PAYLOAD_TYPE
    body = base64.b64decode(signed["payload"])
    assert body == rfc8785.dumps(statement())
    assert signed["signatures"][0]["keyid"] == key_id(KEY.public_key())
    assert verify_envelope(signed, [KEY.public_key()]) == json.loads(body)


def test_key_id_and_jwk_describe_the_raw_public_key():
    raw = bytes.fromhex(key_id(KEY.public_key()))
    jwk = public_jwk(KEY.public_key())

    assert len(raw) == 32
    assert jwk["kty"] == "OKP" and jwk["crv"] == "Ed25519"
    x = base64.urlsafe_b64decode(jwk["x"] + "=")
    assert hashlib.sha256(x).digest() == raw


def test_a_tampered_payload_is_rejected():
    signed = sign_envelope(statement(), KEY)
    forged = json.loads(base64.b64decode(signed["payload"]))
    forged["predicate"]["tenant"] = "globex"
    signed["payload"] = base64.b64encode(rfc8785.dumps(forged)).decode()

    with pytest.raises(InvalidValueError, match="signature verification failed"):
        verify_envelope(signed, [KEY.public_key()])


def test_a_tampered_signature_or_type_or_key_is_rejected():
    signed = sign_envelope(statement(), KEY)
    sig = bytearray(base64.b64decode(signed["signatures"][0]["sig"]))
    sig[5] ^= 1
    bad_sig = {**signed, "signatures": [{"keyid": "", "sig": base64.b64encode(sig).decode()}]}

    with pytest.raises(InvalidValueError, match="signature verification failed"):
        verify_envelope(bad_sig, [KEY.public_key()])
    with pytest.raises(InvalidValueError, match="payloadType"):
        verify_envelope({**signed, "payloadType": "application/json"}, [KEY.public_key()])
    with pytest.raises(InvalidValueError, match="signature verification failed"):
        verify_envelope(signed, [OTHER_KEY.public_key()])
    with pytest.raises(InvalidValueError, match="no signatures"):
        verify_envelope({**signed, "signatures": []}, [KEY.public_key()])


def test_a_retired_key_among_several_still_verifies():
    signed = sign_envelope(statement(), OTHER_KEY)

    assert verify_envelope(signed, [KEY.public_key(), OTHER_KEY.public_key()])


def test_integers_beyond_2_53_are_refused_by_canonicalisation():
    with pytest.raises(InvalidValueError, match="canonicalise"):
        sign_envelope(build_statement([], {"guid": 2**63}), KEY)


def test_reachability_is_rederived_from_partitions_conf():
    derived = rederive_ib_reachability(PARTITIONS, predicate())

    assert derived == {("service:storage", "0x0100"), ("tenant:acme", "0x0101")}


def test_true_claims_pass_check_claims():
    assert check_claims(statement(), {PARTITIONS_PATH: PARTITIONS.encode()})


def test_a_claim_that_does_not_follow_from_the_file_is_rejected_even_if_signed():
    hidden = statement(reachable=[r for r in REACHABLE if r["owner"] != "service:storage"])
    signed = sign_envelope(hidden, KEY)
    verified = verify_envelope(signed, [KEY.public_key()])

    with pytest.raises(InvalidValueError, match="do not support the reachability claim"):
        check_claims(verified, {PARTITIONS_PATH: PARTITIONS.encode()})


def test_a_file_where_the_tenant_reaches_another_tenant_is_rejected():
    leaky = PARTITIONS.replace(f"{ACME[0]}=limited, ", f"{ACME[0]}=full, ", 1)
    # acme full in storage's partition now reaches globex's limited port there
    with pytest.raises(InvalidValueError, match="tenant:globex@0x0100"):
        check_claims(statement(leaky), {PARTITIONS_PATH: leaky.encode()})


def test_a_member_without_a_stated_owner_is_rejected():
    ownership = {k: v for k, v in OWNERSHIP.items() if k != GLOBEX}

    with pytest.raises(InvalidValueError, match="has no owner"):
        rederive_ib_reachability(PARTITIONS, predicate(ownership=ownership))


def test_a_file_that_fails_open_is_rejected():
    broken = PARTITIONS.replace("acme=0x0101 :", "acme=0x0101", 1)

    with pytest.raises(InvalidValueError, match="fails open"):
        rederive_ib_reachability(broken, predicate())


def test_digest_mismatch_and_missing_subjects_are_rejected():
    with pytest.raises(InvalidValueError, match="does not match"):
        check_claims(statement(), {PARTITIONS_PATH: PARTITIONS.encode() + b"\n"})
    with pytest.raises(InvalidValueError, match="missing"):
        check_claims(statement(), {})


def test_a_proof_without_a_holding_verdict_is_rejected():
    with pytest.raises(InvalidValueError, match="holding verdict"):
        check_claims(statement(verdict={"holds": False}), {PARTITIONS_PATH: PARTITIONS.encode()})
