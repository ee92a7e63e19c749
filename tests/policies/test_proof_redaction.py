"""Tenant views of isolation proofs (issue 10, item 6): other tenants counted, never named.

acme and globex are both granted storage, so they share its partition. acme's tenant view names
acme's and storage's ports only and counts globex's; the counts are checked against
partitions.conf, so a proof that hides a reachable port, or a file with an unlisted member,
does not verify. The full view stays exactly what it was, plus ``"view": "full"``.
"""

from __future__ import annotations

import base64
import copy
import hashlib
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from policies.artifacts import Artifact
from policies.errors import ConflictError, InvalidValueError
from policies.evidence.claims import claims_for
from policies.evidence.proofs import (
    build_statement,
    canonical_json,
    check_claims,
    sign_envelope,
    verify_envelope,
)
from policies.infiniband.model import IbSnapshot, format_guid
from policies.infiniband.render import PARTITIONS_PATH, render_partitions_conf
from policies.infiniband.verify import verify_isolation
from policies.model import Grant
from tests.policies.snapshots import guid, two_tenant_snapshot

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
BOTH_GRANTED = (Grant("acme", "storage"), Grant("globex", "storage"))
ACME = [format_guid(guid(host, hca)) for host in ("gpu0001", "gpu0002") for hca in (0, 1)]
GLOBEX = [format_guid(guid("gpu0003", hca)) for hca in (0, 1)]
STORAGE = [format_guid(guid("stor01", hca)) for hca in (0, 1)]


def shared() -> IbSnapshot:
    snapshot = two_tenant_snapshot(grants=BOTH_GRANTED)
    assert verify_isolation(snapshot).holds
    return snapshot


def partitions_of(snapshot: IbSnapshot) -> str:
    return render_partitions_conf(snapshot)


def statement(snapshot: IbSnapshot, view: str, tenant: str = "acme") -> dict[str, Any]:
    files = (Artifact(PARTITIONS_PATH, partitions_of(snapshot).encode()),)
    subjects, claims = claims_for(snapshot, tenant, files, view)  # type: ignore[arg-type]
    predicate = {"tenant": tenant, "kind": "infiniband", "verdict": {"holds": True}} | claims
    return build_statement(subjects, predicate)


def check(document: dict[str, Any], text: str) -> Any:
    """`check_claims` against `text`, the subject's digest restated for it (a re-signed proof)."""
    document = copy.deepcopy(document)
    document["subject"][0]["digest"]["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    return check_claims(document, {PARTITIONS_PATH: text.encode()})


def segment(document: dict[str, Any], label: str) -> dict[str, Any]:
    return next(s for s in document["predicate"]["segments"] if s["segment"] == label)


def payload_text(document: dict[str, Any]) -> str:
    """The envelope's payload as a tenant receives it, decoded."""
    envelope = sign_envelope(document, KEY)
    assert verify_envelope(envelope, [KEY.public_key()]) == document
    return base64.b64decode(envelope["payload"]).decode()


def test_a_tenant_view_names_no_other_tenant_anywhere_in_the_payload():
    text = payload_text(statement(shared(), "tenant"))

    assert "globex" not in text
    for port in GLOBEX:
        assert port not in text
        assert port.removeprefix("0x") not in text
    assert all(port in text for port in ACME + STORAGE)


def test_a_tenant_view_counts_the_other_members_of_each_segment():
    document = statement(shared(), "tenant")
    predicate = document["predicate"]

    assert predicate["view"] == "tenant"
    assert segment(document, "0x0100")["others"] == {"count": 2, "membership": "limited"}
    assert segment(document, "0x0101")["others"] == {"count": 0, "membership": "limited"}
    assert [m["endpoint"] for m in segment(document, "0x0100")["members"]] == ACME + STORAGE
    assert set(predicate["ownership"].values()) == {"tenant:acme", "service:storage"}
    assert predicate["reachable"] == [
        {"owner": "service:storage", "segment": "0x0100"},
        {"owner": "tenant:acme", "segment": "0x0101"},
    ]


def test_a_tenant_view_verifies_against_the_file():
    snapshot = shared()

    derived = check(statement(snapshot, "tenant"), partitions_of(snapshot))

    assert derived == {("service:storage", "0x0100"), ("tenant:acme", "0x0101")}


def full_claims() -> dict[str, Any]:
    """acme's full claims exactly as proofs state them since issue 5."""

    def members(ports: list[str], membership: str) -> list[dict[str, str]]:
        return [{"endpoint": p, "membership": membership} for p in ports]

    return {
        "endpoints": ACME,
        "ownership": dict.fromkeys(ACME, "tenant:acme")
        | dict.fromkeys(GLOBEX, "tenant:globex")
        | dict.fromkeys(STORAGE, "service:storage"),
        "segments": [
            {
                "segment": "0x0100",
                "owner": "service:storage",
                "members": members(ACME + GLOBEX, "limited") + members(STORAGE, "full"),
            },
            {"segment": "0x0101", "owner": "tenant:acme", "members": members(ACME, "full")},
        ],
        "reachable": [
            {"owner": "service:storage", "segment": "0x0100"},
            {"owner": "tenant:acme", "segment": "0x0101"},
        ],
    }


def test_the_full_view_is_complete_and_unchanged_but_for_its_view():
    snapshot = shared()
    document = statement(snapshot, "full")
    predicate = document["predicate"]

    assert predicate["view"] == "full"
    claims = {k: v for k, v in predicate.items() if k in full_claims()}
    assert canonical_json(claims) == canonical_json(full_claims())
    assert "globex" in payload_text(document)
    assert check(document, partitions_of(snapshot))


def test_a_full_proof_without_a_view_still_verifies_as_before():
    snapshot = shared()
    document = statement(snapshot, "full")
    del document["predicate"]["view"]

    assert check(document, partitions_of(snapshot))


@pytest.mark.parametrize(
    "others",
    [
        {"count": 1, "membership": "limited"},
        {"count": 3, "membership": "limited"},
        {"count": 2, "membership": "full"},
        {"count": True, "membership": "limited"},
        None,
    ],
    ids=["fewer", "more", "full", "bool", "absent"],
)
def test_a_tampered_count_is_rejected(others):
    snapshot = shared()
    document = statement(snapshot, "tenant")
    if others is None:
        del segment(document, "0x0100")["others"]
    else:
        segment(document, "0x0100")["others"] = others

    with pytest.raises(InvalidValueError, match=r"partition 0x0100: the file has 2 other member"):
        check(document, partitions_of(snapshot))


def add_member(text: str, port: str, membership: str) -> str:
    """partitions.conf with `port` added to the storage partition."""
    anchor = "service_storage=0x0100, ipoib :\n"
    assert anchor in text
    return text.replace(anchor, f"{anchor}    {port}={membership},\n", 1)


UNLISTED = "0x0002c9030000f000"


@pytest.mark.parametrize("membership", ["full", "limited"])
def test_an_unlisted_member_added_to_the_file_is_rejected(membership):
    snapshot = shared()
    edited = add_member(partitions_of(snapshot), UNLISTED, membership)

    with pytest.raises(InvalidValueError, match=f"the file has 3 other member.*, {membership}"):
        check(statement(snapshot, "tenant"), edited)


def test_an_unlisted_full_member_stays_rejected_when_the_count_admits_it():
    """Even a proof whose count matches the file cannot hide a member the tenant reaches."""
    snapshot = shared()
    edited = add_member(partitions_of(snapshot), UNLISTED, "full")
    document = statement(snapshot, "tenant")
    segment(document, "0x0100")["others"] = {"count": 3, "membership": "full"}

    with pytest.raises(InvalidValueError, match=r"reachable but not claimed: \['others@0x0100'\]"):
        check(document, edited)


def test_a_tenant_port_made_full_beside_counted_others_is_rejected():
    """Counted others are limited, but a full tenant port still reaches them."""
    snapshot = shared()
    edited = partitions_of(snapshot).replace(f"{ACME[0]}=limited", f"{ACME[0]}=full", 1)
    document = statement(snapshot, "tenant")
    segment(document, "0x0100")["members"][0]["membership"] = "full"

    with pytest.raises(InvalidValueError, match=r"reachable but not claimed: \['others@0x0100'"):
        check(document, edited)


def test_a_special_member_in_a_counted_partition_is_rejected():
    snapshot = shared()
    edited = add_member(partitions_of(snapshot), "ALL_CAS", "full")

    with pytest.raises(InvalidValueError, match="special members"):
        check(statement(snapshot, "tenant"), edited)


def test_a_partition_holding_tenant_ports_must_be_listed():
    snapshot = shared()
    document = statement(snapshot, "tenant")
    document["predicate"]["segments"] = [segment(document, "0x0101")]

    with pytest.raises(InvalidValueError, match=r"tenant's ports are in partitions"):
        check(document, partitions_of(snapshot))


def test_named_members_must_be_the_files():
    snapshot = shared()
    document = statement(snapshot, "tenant")
    segment(document, "0x0100")["members"].pop()

    with pytest.raises(InvalidValueError, match="named members differ"):
        check(document, partitions_of(snapshot))


def test_a_tenant_view_that_names_another_tenant_is_rejected():
    snapshot = shared()
    document = statement(snapshot, "tenant")
    document["predicate"]["ownership"][GLOBEX[0]] = "tenant:globex"

    with pytest.raises(InvalidValueError, match="names other owners: tenant:globex"):
        check(document, partitions_of(snapshot))


def test_an_unknown_view_is_rejected():
    snapshot = shared()
    document = statement(snapshot, "full")
    document["predicate"]["view"] = "partial"

    with pytest.raises(InvalidValueError, match="unknown proof view"):
        check(document, partitions_of(snapshot))


def test_a_verifier_that_ignores_the_view_rejects_a_tenant_view():
    """Why the predicate type stays v1: read as full, the unnamed members have no owner."""
    snapshot = shared()
    document = statement(snapshot, "tenant")
    del document["predicate"]["view"]

    with pytest.raises(InvalidValueError, match="has no owner"):
        check(document, partitions_of(snapshot))


def test_no_tenant_view_names_an_owner_the_tenant_reaches_without_a_grant():
    leaky = two_tenant_snapshot(grants=BOTH_GRANTED)
    snapshot = IbSnapshot(
        leaky.fabric,
        leaky.nodes,
        leaky.ports,
        tuple(
            p if p.pkey != 0x0100 else type(p)(p.pkey, p.owner, _all_full(p.members), p.qos_class)
            for p in leaky.partitions
        ),
        leaky.grants,
        leaky.qos_classes,
    )

    with pytest.raises(ConflictError, match="reaches owners it may not see"):
        statement(snapshot, "tenant")


def _all_full(members: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(type(m)(m.guid, True) for m in members)
