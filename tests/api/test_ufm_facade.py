"""The UFM-compatible API's behaviour (api/ufm/, tenancy/usecases/ufm_*.py): formats, semantics,
the node rules, virtual GUIDs, `last_updated`, the refusal guards, and reads under a writer.

Authentication and the route x role table: tests/api/test_ufm_auth.py; cross-tenant writes on
both backends, concurrent orchestrators included: tests/api/test_ufm_cross_tenant.py. This module
is HTTP-only (tests/api/conftest.py): the use cases it drives run on both backends there and in
tests/tenancy. Each test gets a copy of the onboarded fabric (tests/conftest.py): ib-east, acme
(gpu0001-2, 0x101), research (gpu0003-4, 0x102), globex (gpu0005-6, 0x103), free gpu0007-8,
sm01 management, stor01-02 behind service 'storage' (0x100) granted to acme.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from api.app import create_app
from api.ufm.routes import ROUTES
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.usecases import ufm_facade
from tests.api.test_reads_under_write_lock import short_busy_timeout
from tests.api.test_virtual_guids import _read_back
from tests.api.ufm_support import (
    ACME_KEY,
    ACME_PORT,
    FREE,
    GLOBEX_KEY,
    GLOBEX_PORT,
    MANAGEMENT_PORT,
    PORTS,
    SERVICE_KEY,
    STORAGE_PORT,
    STYLES,
    VIRTUAL,
    VIRTUAL_GUIDS,
    basic,
    mint,
    operator_bearer,
    orchestrator,
    ufm_error,
    ufm_ok,
)
from tests.builders import FABRIC, LOCAL_URL, api_create_fabric, created, ok, rows
from tests.conftest import LOOPBACK_CLIENT
from tests.keys import key_settings

PKEYS = "/ufmRest/resources/pkeys"
MANAGEMENT = "0x7fff"
REMOVE = "/ufmRest/actions/remove_guids_from_pkey"
V1_FABRIC = f"/v1/fabrics/{FABRIC}"


@pytest.fixture
def ufm(client: TestClient, onboarded) -> TestClient:
    """The onboarded service, closed: /v1 calls carry an operator token by default."""
    client.headers.update(operator_bearer(client))
    return client


@pytest.fixture
def acme(ufm: TestClient) -> dict[str, str]:
    return basic(orchestrator(ufm, "acme"))


@pytest.fixture
def globex(ufm: TestClient) -> dict[str, str]:
    return basic(orchestrator(ufm, "globex"))


@pytest.fixture
def everyone(ufm: TestClient) -> dict[str, str]:
    """A fabric-wide orchestrator of ib-east."""
    return basic(orchestrator(ufm))


def listing(client: TestClient, who: dict[str, str], query: str = "guids_data=true") -> Any:
    return ufm_ok(client.get(f"{PKEYS}?{query}", headers=who))


def guids_of(client: TestClient, who: dict[str, str], pkey: str) -> list[tuple[str, str]]:
    """(GUID, membership) of a P_Key as the caller is shown it."""
    entry = ufm_ok(client.get(f"{PKEYS}/{pkey}?guids_data=true", headers=who))
    return [(g["guid"], g["membership"]) for g in entry.get("guids", [])]


def add(client: TestClient, who: dict[str, str], pkey: str, *guids: str, **more: Any) -> Any:
    return client.post(PKEYS, headers=who, json={"pkey": pkey, "guids": list(guids), **more})


def allocated_nodes(client: TestClient, tenant: str) -> set[str]:
    """The nodes the tenant holds now, as /v1 shows them."""
    found = ok(client.get(f"/v1/tenants/{tenant}/allocations", params={"limit": 100}))["data"]
    return {node for a in found if a["released_at"] is None for node in a["nodes"]}


def audit_entries(client: TestClient) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = ok(client.get("/v1/audit/entries", params={"limit": 1000}))[
        "data"
    ]
    return entries


# --- formats -------------------------------------------------------------------------------------


def test_pkeys_are_taken_in_every_form_clients_send_and_listed_lower_case_unpadded(ufm, acme):
    # ib-kubernetes "0x%04X", unpadded, upper-case X, NICo's bare decimal, a JSON number
    for sent in ("0x0205", "0x206", "0X0207", "520", 521, "0x20A"):
        ufm_ok(ufm.post(f"{PKEYS}/add", headers=acme, json={"pkey": sent}))

    keys = set(listing(ufm, acme, "qos_conf=true"))

    assert {"0x205", "0x206", "0x207", "0x208", "0x209", "0x20a"} <= keys
    assert all(re.fullmatch(r"0x[1-9a-f][0-9a-f]*", key) for key in keys), keys
    for same in ("0x0101", "0x101", "0X0101", "257"):  # the one P_Key 0x101, however written
        assert ufm_ok(ufm.get(f"{PKEYS}/{same}", headers=acme))["partition"] == "api_pkey_0x101"


def test_bare_digits_are_decimal_on_every_route(ufm, acme):
    # 0x0005, 0x5, 0X05 and 5 are the one P_Key 5 (outside ib-east's pool); "103" is 0x67
    for sent, key in [("0x0005", "0x5"), ("0x5", "0x5"), ("0X05", "0x5"), ("5", "0x5")]:
        assert f"pkey {key} is not available" in ufm_error(add(ufm, acme, sent), 400)["error"]
    assert "pkey 0x67 " in ufm_error(add(ufm, acme, "103"), 400)["error"]
    assert "pkey 0x67 " in ufm_error(ufm.delete(f"{PKEYS}/103", headers=acme), 400)["error"]
    assert ufm_ok(ufm.get(f"{PKEYS}/103", headers=acme)) == {}


def test_guids_are_taken_with_or_without_0x_16_to_20_digits_any_case_and_emitted_bare(ufm, acme):
    gpu7, gpu8 = PORTS["gpu0007"], PORTS["gpu0008"]
    sent = [f"0x{gpu7[0].upper()}", gpu7[1], f"0000{gpu8[0]}", f"0X0{gpu8[1]}"]

    ufm_ok(add(ufm, acme, "0x200", *sent))

    assert guids_of(ufm, acme, "0x200") == [(g, "full") for g in sorted(gpu7 + gpu8)]
    for entry in listing(ufm, acme).values():
        assert all(re.fullmatch(r"[0-9a-f]{16}", g["guid"]) for g in entry.get("guids", []))


BAD_PKEYS = ["0x0", "0x8000", "0xffff", "0xZZ", "-5", "", "0x", "1e3", "0x00001", True]
BAD_GUIDS = [
    "00:00:00:00:00:10:00:1b",  # colons
    "000000000010001g",  # not hex
    "00000000010001b",  # 15 digits
    "0" * 5 + "000000000010001b",  # 21 digits
    "0x0100000000000000001b",  # 20 digits past 64 bits
    "",
    27,
]


def bad_bodies() -> list[tuple[str, str, Any]]:
    """(method, path, body) of every malformed write; each a 400 that changes nothing."""
    bodies: list[tuple[str, str, Any]] = []
    for pkey in BAD_PKEYS:
        bodies += [
            ("POST", PKEYS, {"pkey": pkey, "guids": [FREE]}),
            ("PUT", PKEYS, {"pkey": pkey, "guids": [FREE]}),
            ("POST", f"{PKEYS}/add", {"pkey": pkey}),
            ("POST", REMOVE, {"pkey": pkey, "guids": [ACME_PORT]}),
        ]
    for guid in BAD_GUIDS:
        bodies += [
            ("POST", PKEYS, {"pkey": "0x200", "guids": [guid]}),
            ("POST", REMOVE, {"pkey": ACME_KEY, "guids": [guid]}),
        ]
    many = [f"{0x0200000000000000 + n:016x}" for n in range(10_000)]
    return [
        *bodies,
        ("POST", PKEYS, {"pkey": "0x200", "guids": [FREE, FREE.upper()]}),  # a duplicate
        ("POST", PKEYS, {"pkey": "0x200", "guids": [FREE, "0x" + FREE]}),
        ("POST", REMOVE, {"pkey": ACME_KEY, "guids": [ACME_PORT, ACME_PORT]}),
        (
            "POST",
            PKEYS,
            {"pkey": "0x200", "guids": [FREE], "membership": "full", "memberships": ["full"]},
        ),
        ("POST", PKEYS, {"pkey": "0x200", "guids": [FREE], "memberships": ["full", "limited"]}),
        ("PUT", PKEYS, {"pkey": "0x200", "guids": [FREE], "memberships": []}),
        ("POST", PKEYS, {"pkey": "0x200", "guids": [FREE], "membership": "both"}),
        ("POST", PKEYS, {"pkey": "0x200", "guids": many}),  # 10,000 GUIDs in one call
        ("POST", PKEYS, {"guids": [FREE]}),
        ("POST", PKEYS, {"pkey": "0x200", "guids": FREE}),
        ("POST", PKEYS, ["not", "an", "object"]),
        ("POST", f"{PKEYS}/hosts", {"pkey": "0x200", "hosts_names": "gpu0007,gpu0007"}),
        ("POST", f"{PKEYS}/hosts", {"pkey": "0x200", "hosts_names": 7}),
    ]


def test_malformed_writes_are_a_ufm_shaped_400_and_change_nothing(ufm, acme, db_dump):
    before = db_dump()

    for method, path, body in bad_bodies():
        response = ufm.request(method, path, headers=acme, json=body)
        assert response.status_code == 400, (method, path, str(body)[:80], response.text)
        ufm_error(response, 400)
    for path in ("0x0", "0x8000", "0xffff", "0xZZ", "-5"):
        ufm_error(ufm.get(f"{PKEYS}/{path}", headers=acme), 400)
        ufm_error(ufm.delete(f"{PKEYS}/{path}", headers=acme), 400)
    for guids in ("00:00:00:00:00:10:00:03", "00000000001000zz", f"{ACME_PORT},{ACME_PORT}"):
        ufm_error(ufm.delete(f"{PKEYS}/{ACME_KEY}/guids/{guids}", headers=acme), 400)
    ufm_error(ufm.post(PKEYS, headers=acme, content=b"{not json"), 400)

    assert db_dump() == before


def test_a_guid_that_is_not_bare_hex_names_itself_in_the_refusal(ufm, acme):
    body = ufm_error(add(ufm, acme, "0x200", "00:00:00:00:00:10:00:1b"), 400)

    assert "00:00:00:00:00:10:00:1b" in body["error"]


def test_a_body_over_the_size_limit_is_a_ufm_shaped_413_declared_or_streamed(
    make_client, onboarded, db_dump
):
    client = make_client(max_body_bytes=1024)
    who = basic(orchestrator(client, "acme"))
    body = b'{"pkey": "0x200", "guids": ["' + b"0" * 2000 + b'"]}'
    before = db_dump()

    declared = client.post(PKEYS, headers=who, content=body)
    streamed = client.post(PKEYS, headers=who, content=iter([body[:800], body[800:]]))

    assert ufm_error(declared, 413) == ufm_error(streamed, 413)
    assert db_dump() == before


def test_the_three_list_shapes_and_guids_with_qos_together_refused_as_ufm_does(ufm, acme):
    plain = listing(ufm, acme, "")
    with_guids = listing(ufm, acme, "guids_data=true")
    with_qos = listing(ufm, acme, "qos_conf=true")

    # acme sees its own partition whole, its ports in the storage service's (limited), and the
    # management partition, which every UFM list holds
    assert set(plain) == set(with_guids) == set(with_qos) == {SERVICE_KEY, ACME_KEY, MANAGEMENT}
    assert plain[ACME_KEY] == {"partition": "api_pkey_0x101", "ip_over_ib": True}
    assert with_qos[ACME_KEY]["qos_conf"] == {"mtu_limit": 4, "service_level": 3, "rate_limit": 10}
    assert {g["guid"]: g["membership"] for g in with_guids[SERVICE_KEY]["guids"]} == dict.fromkeys(
        PORTS["gpu0001"] + PORTS["gpu0002"], "limited"
    )
    assert {g["guid"] for g in with_guids[ACME_KEY]["guids"]} == set(
        PORTS["gpu0001"] + PORTS["gpu0002"]
    )
    both = ufm.get(f"{PKEYS}?guids_data=true&qos_conf=true", headers=acme)
    assert ufm_error(both, 400)["reason"] == "query"
    one = ufm_ok(ufm.get(f"{PKEYS}/{ACME_KEY}?guids_data=true&qos_conf=true", headers=acme))
    assert one.keys() == {"partition", "ip_over_ib", "qos_conf", "guids"}
    assert set(listing(ufm, basic(orchestrator(ufm)), "")) == {
        SERVICE_KEY,
        ACME_KEY,
        "0x102",
        GLOBEX_KEY,
        MANAGEMENT,
    }


# --- semantics -----------------------------------------------------------------------------------


def test_post_merges_put_replaces_and_removing_a_non_member_is_a_no_op(ufm, acme, db_dump):
    gpu1, gpu2 = PORTS["gpu0001"], PORTS["gpu0002"]
    ufm_ok(add(ufm, acme, "0x200", gpu1[0], membership="limited"))
    ufm_ok(add(ufm, acme, "0x200", gpu1[1], gpu2[0], memberships=["full", "limited"]))
    assert guids_of(ufm, acme, "0x200") == [
        (gpu1[0], "limited"),
        (gpu1[1], "full"),
        (gpu2[0], "limited"),
    ]

    ufm_ok(ufm.put(PKEYS, headers=acme, json={"pkey": "0x0200", "guids": [gpu2[1], gpu1[0]]}))
    assert guids_of(ufm, acme, "0x200") == [(gpu1[0], "full"), (gpu2[1], "full")]

    ufm_ok(ufm.post(REMOVE, headers=acme, json={"pkey": "0x200", "guids": [gpu1[0]]}))
    ufm_ok(ufm.delete(f"{PKEYS}/0x200/guids/{gpu2[1]}", headers=acme))
    assert guids_of(ufm, acme, "0x200") == []
    before = db_dump()
    ufm_ok(ufm.post(REMOVE, headers=acme, json={"pkey": "0x200", "guids": [gpu1[0], gpu2[0]]}))
    ufm_ok(ufm.delete(f"{PKEYS}/0x200/guids/{gpu1[1]},{GLOBEX_PORT}", headers=acme))
    ufm_ok(ufm.delete(f"{PKEYS}/0x200/guids/{gpu1[1]}/", headers=acme))
    assert db_dump() == before


def test_an_identical_retry_changes_nothing(ufm, acme, db_dump):
    body = {"pkey": "0x0200", "index0": True, "ip_over_ib": True, "membership": "full"}
    ports = {"guids": list(PORTS["gpu0007"])}
    hosts = {"pkey": ACME_KEY, "hosts_names": ["gpu0001"]}
    ufm_ok(ufm.post(PKEYS, headers=acme, json=body | ports))
    before = db_dump()

    for _ in range(2):  # ib-kubernetes resends the same body every 5 s until it sees 200
        ufm_ok(ufm.post(PKEYS, headers=acme, json=body | ports))
        ufm_ok(ufm.put(PKEYS, headers=acme, json=body | ports))
        ufm_ok(ufm.post(f"{PKEYS}/add", headers=acme, json={"pkey": "0x200"}))
        ufm_ok(ufm.post(f"{PKEYS}/hosts", headers=acme, json=hosts))

    assert db_dump() == before


def test_one_unknown_or_invisible_pkey_is_200_with_an_empty_object(ufm, acme):
    for pkey in ("0x7ffe", GLOBEX_KEY, "0x102", "0x5", "0x0300"):
        assert ufm_ok(ufm.get(f"{PKEYS}/{pkey}?guids_data=true", headers=acme)) == {}
        assert ufm_ok(ufm.get(f"{PKEYS}/{pkey}/", headers=acme)) == {}


def test_pkeys_add_creates_a_partition_of_the_tokens_tenant_named_for_v1_and_for_ufm(ufm, acme):
    body = {"pkey": "0x2fb", "partition_name": "globex", "ip_over_ib": False, "index0": False}

    assert ufm_ok(ufm.post(f"{PKEYS}/add/", headers=acme, json=body)) == {}

    made = ok(ufm.get("/v1/tenants/acme/partitions/pkey-0x2fb"))
    assert (made["pkey"], made["ipoib"], made["members"]) == ("0x02fb", False, [])
    # the client's name is a label on the facade, never a tenant: globex has no such partition
    assert ufm_ok(ufm.get(f"{PKEYS}/0x2fb", headers=acme)) == {
        "partition": "globex",
        "ip_over_ib": False,
    }
    names = [p["name"] for p in ok(ufm.get("/v1/tenants/globex/partitions"))["data"]]
    assert names == ["default"]
    ufm_ok(ufm.post(f"{PKEYS}/add", headers=acme, json={"pkey": "0x2fc"}))
    assert ufm_ok(ufm.get(f"{PKEYS}/0x2fc", headers=acme))["partition"] == "api_pkey_0x2fc"


def test_a_free_pkey_becomes_a_tenants_partition_only_through_a_tenant_bound_token(
    make_client, ufm, acme, everyone, db_dump
):
    operator = make_client(ufm_fabric=FABRIC)
    callers = [(everyone, ufm), (basic(mint(ufm, "operator").token), operator)]
    before = db_dump()

    for who, client in callers:
        for method, path, body in [
            ("POST", PKEYS, {"pkey": "0x200", "guids": [FREE]}),
            ("POST", f"{PKEYS}/add", {"pkey": "0x200"}),
            ("POST", f"{PKEYS}/hosts", {"pkey": "0x200", "hosts_names": ["gpu0007"]}),
        ]:
            refused = ufm_error(client.request(method, path, headers=who, json=body), 400)
            assert "fabric-wide token cannot create" in refused["error"]
    assert db_dump() == before

    ufm_ok(add(ufm, acme, "0x200", FREE))
    assert ok(ufm.get("/v1/tenants/acme/partitions/pkey-0x200"))["pkey"] == "0x0200"


def test_a_pkey_the_token_may_not_use_is_refused_without_saying_why(ufm, acme, globex, db_dump):
    ufm_ok(ufm.post(f"{PKEYS}/add", headers=globex, json={"pkey": "0x300"}))
    ufm_ok(ufm.delete(f"{PKEYS}/0x300", headers=globex))  # quarantined for globex now
    before = db_dump()
    # outside ib-east's pool (0x100-0x7ffe), another tenant's, quarantined for another tenant,
    # the management partition; each the same answer but for the key
    refusals = {
        key: ufm_error(add(ufm, acme, key, ACME_PORT), 400)
        for key in ("0x50", GLOBEX_KEY, "0x300", MANAGEMENT)
    }

    assert {(b["error"].replace(key, "K"), b["reason"]) for key, b in refusals.items()} == {
        (
            "pkey K is not available: it is outside the fabric's pool, reserved, or not a "
            "partition of this token's tenants",
            "pkey-unavailable",
        )
    }
    assert all(
        "globex" not in b["error"] and "storage" not in b["error"] for b in refusals.values()
    )
    assert db_dump() == before


def test_a_port_of_a_free_compute_node_allocates_the_node_to_the_tenant(ufm, acme, engine):
    before = len(audit_entries(ufm))

    ufm_ok(add(ufm, acme, "0x200", FREE))

    assert allocated_nodes(ufm, "acme") == {"gpu0001", "gpu0002", "gpu0007"}
    assert rows(
        engine,
        "SELECT a.origin FROM allocation a JOIN node_assignment n ON n.allocation_id = a.id "
        "JOIN node o ON o.id = n.node_id WHERE o.name = 'gpu0007'",
    ) == [("orchestrator",)]
    entries = audit_entries(ufm)[before:]
    assert {e["action"] for e in entries} >= {"allocation.create"}
    assert {(e["role"], e["principal"].split(":")[1]) for e in entries} == {
        ("orchestrator", "orch-acme")
    }
    # the node's ports are the tenant's now: in its default partition too
    assert set(PORTS["gpu0007"]) <= {g for g, _ in guids_of(ufm, acme, ACME_KEY)}


def test_a_port_someone_else_holds_is_refused_naming_the_owner_only_to_a_fabric_wide_caller(
    ufm, acme, everyone, db_dump
):
    ufm_ok(ufm.post(f"{PKEYS}/add", headers=acme, json={"pkey": "0x200"}))
    before = db_dump()

    bound = ufm_error(add(ufm, acme, "0x200", GLOBEX_PORT), 400)
    wide = ufm_error(add(ufm, everyone, "0x200", GLOBEX_PORT), 400)

    assert (
        (bound["reason"], bound["guid"])
        == (wide["reason"], wide["guid"])
        == (
            "foreign-guid",
            GLOBEX_PORT,
        )
    )
    assert GLOBEX_PORT in bound["error"] and "globex" not in str(bound)
    assert "globex" in wide["error"] and wide["owner"] == "tenant 'globex'"
    for guid, reason in [(MANAGEMENT_PORT, "node-role"), (STORAGE_PORT, "foreign-guid")]:
        for who in (acme, everyone):
            refused = ufm_error(add(ufm, who, "0x200", guid), 400)
            assert (refused["reason"], refused["guid"]) == (reason, guid)
            assert guid in refused["error"] and "owner" not in refused
    assert db_dump() == before


def test_index0_and_qos_fields_that_differ_are_ignored_and_reported(ufm, acme):
    # acme's class is gold: MTU 4, SL 3, 10 Gb/s
    sent = {"pkey": ACME_KEY, "index0": True, "ip_over_ib": True, "mtu_limit": 4}
    same = ufm_ok(ufm.post(PKEYS, headers=acme, json=sent | {"guids": [FREE]}))
    assert same == {"ignored": {"index0": True}}

    qos = {"pkey": ACME_KEY, "mtu_limit": 5, "service_level": 3, "rate_limit": 300}
    assert ufm_ok(ufm.put(f"{PKEYS}/qos_conf", headers=acme, json=qos)) == {
        "ignored": {"mtu_limit": 5, "rate_limit": 300}
    }
    ufm_ok(ufm.post(f"{PKEYS}/add", headers=acme, json={"pkey": "0x200", "ip_over_ib": False}))
    flags = {"pkey": "0x200", "ip_over_ib": True, "index0": False, "guids": []}
    assert ufm_ok(ufm.post(PKEYS, headers=acme, json=flags)) == {"ignored": {"ip_over_ib": True}}
    entry = ufm_ok(ufm.get(f"{PKEYS}/{ACME_KEY}?qos_conf=true&guids_data=true", headers=acme))
    assert entry["qos_conf"] == {"mtu_limit": 4, "service_level": 3, "rate_limit": 10}
    assert {g["index0"] for g in entry["guids"]} == {False}


def test_nodes_the_facade_allocated_stay_by_default_when_their_last_port_leaves(ufm, acme):
    ufm_ok(add(ufm, acme, "0x200", *PORTS["gpu0007"]))

    ufm_ok(ufm.post(REMOVE, headers=acme, json={"pkey": "0x200", "guids": list(PORTS["gpu0007"])}))

    assert "gpu0007" in allocated_nodes(ufm, "acme")


def test_release_on_last_removal_ends_what_the_facade_allocated_when_its_last_port_leaves(
    ufm, acme
):
    policy = {"kinds": {"external": {"release_on_last_removal": True}}}
    assert ok(ufm.put("/v1/policy", json=policy))["kinds"]["external"]["release_on_last_removal"]
    gpu1, gpu7, gpu8 = PORTS["gpu0001"], PORTS["gpu0007"], PORTS["gpu0008"]
    ufm_ok(add(ufm, acme, "0x200", *gpu7, gpu1[0]))
    ufm_ok(add(ufm, acme, "0x200", gpu8[0]))
    ufm_ok(add(ufm, acme, "0x201", gpu8[1]))
    assert allocated_nodes(ufm, "acme") == {"gpu0001", "gpu0002", "gpu0007", "gpu0008"}

    ufm_ok(ufm.delete(f"{PKEYS}/0x200/guids/{gpu7[0]}", headers=acme))
    assert "gpu0007" in allocated_nodes(ufm, "acme")  # one of its ports is still in 0x200
    ufm_ok(ufm.post(REMOVE, headers=acme, json={"pkey": "0x200", "guids": [gpu7[1], gpu1[0]]}))
    ufm_ok(ufm.put(PKEYS, headers=acme, json={"pkey": "0x200", "guids": []}))

    # gpu0007 left with its last port; gpu0008 is still in 0x201; gpu0001 is the operator's
    assert allocated_nodes(ufm, "acme") == {"gpu0001", "gpu0002", "gpu0008"}
    ufm_ok(ufm.delete(f"{PKEYS}/0x201", headers=acme))
    assert allocated_nodes(ufm, "acme") == {"gpu0001", "gpu0002"}
    assert allocated_nodes(ufm, "globex") == {"gpu0005", "gpu0006"}

    # the default partition too (its members are the nodes' ports): a node the facade gave
    # leaves with its ports; one the operator gave does not
    ufm_ok(add(ufm, acme, ACME_KEY, *gpu8))
    assert "gpu0008" in allocated_nodes(ufm, "acme")
    ufm_ok(ufm.post(REMOVE, headers=acme, json={"pkey": ACME_KEY, "guids": list(gpu8)}))
    assert allocated_nodes(ufm, "acme") == {"gpu0001", "gpu0002"}
    refused = ufm.post(REMOVE, headers=acme, json={"pkey": ACME_KEY, "guids": list(gpu1)})
    assert ufm_error(refused, 400)["reason"] == "default-partition"


def test_hosts_routes_add_and_remove_every_ca_port_of_named_nodes(ufm, acme, db_dump):
    body = {"pkey": "0x200", "hosts_names": "gpu0007, gpu0008", "membership": "full"}
    ufm_ok(ufm.post(f"{PKEYS}/hosts", headers=acme, json=body))
    assert [g for g, _ in guids_of(ufm, acme, "0x200")] == sorted(
        PORTS["gpu0007"] + PORTS["gpu0008"]
    )
    assert {"gpu0007", "gpu0008"} <= allocated_nodes(ufm, "acme")

    ufm_ok(ufm.delete(f"{PKEYS}/0x200/hosts/gpu0007", headers=acme))
    assert [g for g, _ in guids_of(ufm, acme, "0x200")] == sorted(PORTS["gpu0008"])
    ufm_ok(ufm.delete(f"{PKEYS}/0x200/hosts/gpu0008,gpu0001/", headers=acme))
    assert guids_of(ufm, acme, "0x200") == []

    before = db_dump()
    for hosts, word in [(["nope"], "nope"), (["sm01"], "management"), (["gpu0005"], "foreign")]:
        refused = ufm.post(
            f"{PKEYS}/hosts", headers=acme, json={"pkey": "0x200", "hosts_names": hosts}
        )
        assert word in str(ufm_error(refused, 400))
    assert "nope" in ufm_error(ufm.delete(f"{PKEYS}/0x200/hosts/nope", headers=acme), 400)["error"]
    assert db_dump() == before


def test_the_default_partition_follows_allocations_not_writes(ufm, acme, db_dump):
    before = db_dump()

    for body in [
        {"pkey": ACME_KEY, "guids": [VIRTUAL]},  # not a port
        {"pkey": ACME_KEY, "guids": []},  # PUT: would drop the tenant's nodes
    ]:
        method = "POST" if body["guids"] else "PUT"
        refused = ufm.request(method, PKEYS, headers=acme, json=body)
        assert ufm_error(refused, 400)["reason"] == "default-partition"
    refused = ufm.post(REMOVE, headers=acme, json={"pkey": ACME_KEY, "guids": [ACME_PORT]})
    assert ufm_error(refused, 400)["reason"] == "default-partition"
    assert ufm_error(ufm.delete(f"{PKEYS}/{ACME_KEY}", headers=acme), 400)["reason"] == (
        "default-partition"
    )
    assert db_dump() == before
    ufm_ok(add(ufm, acme, ACME_KEY, ACME_PORT))  # already a member: nothing to do


def test_deleting_a_pkey_quarantines_it_and_a_retry_is_a_no_op_for_every_scope(
    ufm, acme, everyone, db_dump
):
    ufm_ok(ufm.post(f"{PKEYS}/add", headers=acme, json={"pkey": "0x200"}))
    ufm_ok(ufm.post(f"{PKEYS}/add", headers=acme, json={"pkey": "0x201"}))

    ufm_ok(ufm.delete(f"{PKEYS}/0x200", headers=acme))
    ufm_ok(ufm.delete(f"{PKEYS}/0x201/", headers=everyone))
    before = db_dump()

    for who in (acme, everyone):
        for pkey in ("0x200", "0x201"):
            ufm_ok(ufm.delete(f"{PKEYS}/{pkey}", headers=who))
    assert db_dump() == before
    assert ufm_ok(ufm.get(f"{PKEYS}/0x200", headers=acme)) == {}
    names = [p["name"] for p in ok(ufm.get("/v1/tenants/acme/partitions"))["data"]]
    assert names == ["default"]


# --- resources/ports -----------------------------------------------------------------------------


PORT_FIELDS = {
    "guid", "name", "dname", "system_name", "systemID", "number", "lid", "physical_state",
    "logical_state", "type",
}  # fmt: skip


def ports_shown(client: TestClient, who: dict[str, str], query: str = "?sys_type=Computer") -> Any:
    return ufm_ok(client.get(f"/ufmRest/resources/ports{query}", headers=who))


def test_ports_are_the_scopes_tenants_ca_ports_and_free_compute_nodes(ufm, acme, globex, everyone):
    shown = ports_shown(ufm, acme)

    def hosts(ports: list[dict[str, Any]]) -> set[str]:
        return {p["system_name"] for p in ports}

    # acme's nodes and the free compute nodes; never another tenant's, a service's (stor01-02)
    # or a management node's (sm01)
    assert hosts(shown) == {"gpu0001", "gpu0002", "gpu0007", "gpu0008"}
    assert hosts(ports_shown(ufm, globex)) == {"gpu0005", "gpu0006", "gpu0007", "gpu0008"}
    assert hosts(ports_shown(ufm, everyone)) == {f"gpu000{n}" for n in range(1, 9)}
    assert ports_shown(ufm, acme, "") == shown  # every port shown is a host's CA port
    assert [p["guid"] for p in shown] == sorted(
        g for h in ("gpu0001", "gpu0002", "gpu0007", "gpu0008") for g in PORTS[h]
    )
    first = shown[0]
    assert first.keys() == PORT_FIELDS  # what NICo's Port requires
    assert (first["guid"], first["system_name"], first["systemID"]) == (
        PORTS["gpu0001"][0], "gpu0001", "gpu0001",
    )  # fmt: skip
    assert (first["lid"], first["type"], first["logical_state"]) == (0, "Computer", "Active")
    assert isinstance(first["number"], int) and first["name"].startswith(first["guid"])

    # a node the tenant takes through the facade is its own: another tenant no longer sees it
    ufm_ok(add(ufm, acme, "0x200", FREE))
    assert "gpu0007" not in hosts(ports_shown(ufm, globex))
    assert "gpu0007" in hosts(ports_shown(ufm, acme))


# --- the management partition --------------------------------------------------------------------


def test_the_management_partition_is_in_every_list_and_readable(ufm, acme, everyone):
    management = {"partition": "management", "ip_over_ib": True}
    for who in (acme, everyone):
        assert listing(ufm, who, "")[MANAGEMENT] == management
        assert listing(ufm, who, "guids_data=true")[MANAGEMENT] == management | {
            "guids": [],
            "membership": "limited",
        }
        assert listing(ufm, who, "qos_conf=true")[MANAGEMENT]["qos_conf"] == {
            "mtu_limit": 2, "service_level": 0, "rate_limit": 2.5,
        }  # fmt: skip
    for sent in ("0x7fff", "0x7FFF", "32767"):
        one = ufm_ok(ufm.get(f"{PKEYS}/{sent}?guids_data=true", headers=acme))
        assert one == management | {"guids": [], "membership": "limited"}
    assert ufm_ok(ufm.get(f"{PKEYS}/0x7fff", headers=acme)) == management


def writes_on(pkey: str) -> list[tuple[str, str, Any]]:
    """Every write route, aimed at `pkey` with a port of acme's."""
    return [
        ("POST", PKEYS, {"pkey": pkey, "guids": [ACME_PORT]}),
        ("POST", PKEYS, {"pkey": pkey, "guids": [ACME_PORT], "membership": "limited"}),
        ("PUT", PKEYS, {"pkey": pkey, "guids": [ACME_PORT]}),
        ("PUT", PKEYS, {"pkey": pkey, "guids": []}),
        ("POST", f"{PKEYS}/add", {"pkey": pkey}),
        ("PUT", f"{PKEYS}/qos_conf", {"pkey": pkey, "mtu_limit": 4}),
        ("POST", f"{PKEYS}/hosts", {"pkey": pkey, "hosts_names": ["gpu0001"]}),
        ("POST", REMOVE, {"pkey": pkey, "guids": [ACME_PORT]}),
        ("DELETE", f"{PKEYS}/{pkey}/guids/{ACME_PORT}", None),
        ("DELETE", f"{PKEYS}/{pkey}/hosts/gpu0001", None),
        ("DELETE", f"{PKEYS}/{pkey}", None),
    ]


def test_every_write_on_0x7fff_is_refused_as_any_key_the_caller_may_not_use(
    ufm, acme, everyone, db_dump
):
    operator = basic(mint(ufm, "operator").token)
    before = db_dump()

    for method, path, body in writes_on(MANAGEMENT):
        for who in (acme, everyone, operator):  # the fabric's path: an operator token needs it
            answer = ufm.request(method, f"/fabrics/{FABRIC}{path}", headers=who, json=body)
            assert ufm_error(answer, 400)["reason"] == "pkey-unavailable", (method, path)
    # in the words of any other key acme may not use (globex's), but for the key
    for ours, theirs in zip(writes_on(MANAGEMENT), writes_on(GLOBEX_KEY), strict=True):
        refused = ufm_error(ufm.request(ours[0], ours[1], headers=acme, json=ours[2]), 400)
        other = ufm_error(ufm.request(theirs[0], theirs[1], headers=acme, json=theirs[2]), 400)
        assert (refused["error"].replace(MANAGEMENT, "K"), refused["reason"]) == (
            other["error"].replace(GLOBEX_KEY, "K"),
            other["reason"],
        ), ours
    assert db_dump() == before


# --- a shared service's P_Key --------------------------------------------------------------------


def grants_of(client: TestClient, tenant: str) -> list[str]:
    """The services the tenant holds an active grant of."""
    found = ok(client.get(f"/v1/tenants/{tenant}/grants"))["data"]
    return sorted(g["service"] for g in found)


def test_a_tenants_ports_as_limited_members_of_a_services_key_grant_it_the_service(ufm, globex):
    assert grants_of(ufm, "globex") == []
    before = len(audit_entries(ufm))

    answer = add(ufm, globex, SERVICE_KEY, GLOBEX_PORT, membership="limited")

    assert ufm_ok(answer) == {}
    assert grants_of(ufm, "globex") == ["storage"]
    assert "grant.create" in {e["action"] for e in audit_entries(ufm)[before:]}
    # the grant covers every port of the tenant, not only the one sent
    globex_ports = sorted(PORTS["gpu0005"] + PORTS["gpu0006"])
    assert guids_of(ufm, globex, SERVICE_KEY) == [(g, "limited") for g in globex_ports]
    # and never shows the service's own members, nor another tenant's
    assert guids_of(ufm, globex, SERVICE_KEY) == [
        (g, m) for g, m in guids_of(ufm, basic(orchestrator(ufm)), SERVICE_KEY)
        if g in globex_ports
    ]  # fmt: skip
    ufm_ok(add(ufm, globex, SERVICE_KEY, *PORTS["gpu0006"], membership="limited"))  # no-op
    ufm_ok(add(ufm, globex, GLOBEX_KEY, FREE))  # a node globex takes later: covered too
    assert set(PORTS["gpu0007"]) <= {g for g, _ in guids_of(ufm, globex, SERVICE_KEY)}
    assert grants_of(ufm, "globex") == grants_of(ufm, "acme") == ["storage"]


def test_a_services_key_refuses_full_members_replacement_creation_deletion_and_qos(
    ufm, acme, globex, db_dump
):
    before = db_dump()
    cases = [
        (add(ufm, globex, SERVICE_KEY, GLOBEX_PORT), "service-full-member"),
        (
            add(ufm, globex, SERVICE_KEY, GLOBEX_PORT, memberships=["full"]),
            "service-full-member",
        ),
        (
            ufm.post(f"{PKEYS}/hosts", headers=globex,
                     json={"pkey": SERVICE_KEY, "hosts_names": ["gpu0005"]}),
            "service-full-member",
        ),
        (
            ufm.put(PKEYS, headers=acme, json={"pkey": SERVICE_KEY, "guids": [ACME_PORT],
                                               "membership": "limited"}),
            "service-replace",
        ),
        (ufm.put(PKEYS, headers=acme, json={"pkey": SERVICE_KEY, "guids": []}), "service-replace"),
        (ufm.post(f"{PKEYS}/add", headers=acme, json={"pkey": SERVICE_KEY}), "pkey-unavailable"),
        (ufm.delete(f"{PKEYS}/{SERVICE_KEY}", headers=acme), "pkey-unavailable"),
        (
            ufm.put(f"{PKEYS}/qos_conf", headers=acme, json={"pkey": SERVICE_KEY, "mtu_limit": 5}),
            "pkey-unavailable",
        ),
    ]  # fmt: skip

    assert [ufm_error(answer, 400)["reason"] for answer, _ in cases] == [r for _, r in cases]
    for answer, _ in cases:
        assert "storage" not in answer.json()["error"]
    assert db_dump() == before


def test_removing_all_of_a_tenants_ports_from_a_services_key_revokes_its_grant_some_is_refused(
    ufm, acme, db_dump
):
    acme_ports = list(PORTS["gpu0001"] + PORTS["gpu0002"])
    before = db_dump()

    partial = ufm.post(REMOVE, headers=acme, json={"pkey": SERVICE_KEY, "guids": acme_ports[:3]})
    by_host = ufm.delete(f"{PKEYS}/{SERVICE_KEY}/hosts/gpu0001", headers=acme)

    assert ufm_error(partial, 400)["reason"] == ufm_error(by_host, 400)["reason"] == "partial-grant"
    assert db_dump() == before
    assert grants_of(ufm, "acme") == ["storage"]

    ufm_ok(ufm.delete(f"{PKEYS}/{SERVICE_KEY}/hosts/gpu0001,gpu0002", headers=acme))

    assert grants_of(ufm, "acme") == []
    assert guids_of(ufm, acme, SERVICE_KEY) == []
    assert SERVICE_KEY not in listing(ufm, acme)
    after = db_dump()
    ufm_ok(ufm.post(REMOVE, headers=acme, json={"pkey": SERVICE_KEY, "guids": acme_ports}))
    assert db_dump() == after  # a retry: nothing left to revoke
    ufm_ok(add(ufm, acme, SERVICE_KEY, *PORTS["gpu0002"], membership="limited"))
    assert grants_of(ufm, "acme") == ["storage"]  # granted again


def test_a_service_grant_through_its_key_follows_the_policys_visibility(ufm, db_dump):
    # research is internal; storage becomes visible to external tenants only (acme keeps its)
    ok(ufm.put("/v1/policy", json={"services": {"storage": "external"}}))
    research = basic(orchestrator(ufm, "research"))
    before = db_dump()

    refused = ufm_error(
        add(ufm, research, SERVICE_KEY, PORTS["gpu0003"][0], membership="limited"), 400
    )

    assert refused["reason"] in {"isolation-violation", "conflict"}, refused
    assert "acme" not in str(refused)
    assert db_dump() == before
    assert grants_of(ufm, "research") == []


# --- Slurm's host lists --------------------------------------------------------------------------


def test_slurms_compressed_host_lists_are_expanded_in_the_body_and_the_path(ufm, acme):
    jobs = "gpu[0007-0008]"  # SLURM_JOB_NODELIST of two contiguous nodes
    both = sorted(PORTS["gpu0007"] + PORTS["gpu0008"])

    ufm_ok(ufm.post(f"{PKEYS}/hosts", headers=acme, json={"pkey": "0x200", "hosts_names": jobs}))
    assert [g for g, _ in guids_of(ufm, acme, "0x200")] == both
    ufm_ok(ufm.delete(f"{PKEYS}/0x200/hosts/{jobs}", headers=acme))
    assert guids_of(ufm, acme, "0x200") == []

    # a list, several terms, single values and ranges in one bracket, padding kept
    for hosts in (["gpu[0001-0002]", "gpu0007"], "gpu[0001,0002],gpu0007", "gpu000[1-2,7]"):
        ufm_ok(
            ufm.post(f"{PKEYS}/hosts", headers=acme, json={"pkey": "0x201", "hosts_names": hosts})
        )
        members = [g for g, _ in guids_of(ufm, acme, "0x201")]
        assert members == sorted(PORTS["gpu0001"] + PORTS["gpu0002"] + PORTS["gpu0007"]), hosts
        ufm_ok(ufm.delete(f"{PKEYS}/0x201/hosts/gpu000[1-2],gpu0007", headers=acme))
        assert guids_of(ufm, acme, "0x201") == []


BAD_HOST_LISTS = [
    "gpu[0007-0008",  # unclosed
    "gpu0007-0008]",
    "gpu[]",
    "gpu[-]",
    "gpu[a-b]",
    "gpu[0007--0008]",
    "gpu[,]",
    "gpu[1-2][3-4]",
    "gpu[[1-2]]",
    "gpu[0008-0007]",  # a range that goes down
    "gpu[0-99999999]",  # more hosts than a call may name
    "gpu[0007-0008],gpu0007",  # a host twice
]


@pytest.mark.parametrize("hosts", BAD_HOST_LISTS)
def test_a_host_list_that_is_not_slurms_syntax_is_a_400_in_the_body_and_the_path(
    ufm, acme, db_dump, hosts
):
    before = db_dump()

    in_body = ufm.post(f"{PKEYS}/hosts", headers=acme, json={"pkey": "0x200", "hosts_names": hosts})
    in_path = ufm.delete(f"{PKEYS}/{ACME_KEY}/hosts/{hosts}", headers=acme)

    assert ufm_error(in_body, 400)["reason"] == "invalid-body"
    assert ufm_error(in_path, 400)["reason"] == "invalid-hosts"
    assert db_dump() == before


# --- ignored fields in the audit log -------------------------------------------------------------


def ignored_entries(client: TestClient) -> list[str]:
    """The targets of the audit log's `ufm.fields-ignored` entries."""
    return [e["target"] for e in audit_entries(client) if e["action"] == "ufm.fields-ignored"]


def test_ignored_fields_are_audited_beside_a_change_and_not_on_an_identical_retry(
    ufm, acme, db_dump
):
    # acme's class is gold: MTU 4, SL 3, 10 Gb/s; its default partition is no index0 partition
    body = {"pkey": ACME_KEY, "guids": [FREE], "index0": True, "mtu_limit": 5, "rate_limit": 10}

    assert ufm_ok(ufm.post(PKEYS, headers=acme, json=body)) == {
        "ignored": {"index0": True, "mtu_limit": 5}
    }
    assert ignored_entries(ufm) == [
        f"fabrics/{FABRIC}/pkeys/{ACME_KEY}#ignored:index0=True,mtu_limit=5.0"
    ]
    entry = next(e for e in audit_entries(ufm) if e["action"] == "ufm.fields-ignored")
    assert (entry["role"], entry["principal"].split(":")[1]) == ("orchestrator", "orch-acme")

    before = db_dump()
    retry = ufm_ok(ufm.post(PKEYS, headers=acme, json=body))  # ib-kubernetes, 5 s later
    assert retry == {"ignored": {"index0": True, "mtu_limit": 5}}  # still reported
    assert db_dump() == before  # but nothing written: no change, no entry

    # reported without a change (qos_conf changes nothing): answered, not audited
    qos = {"pkey": ACME_KEY, "mtu_limit": 2}
    assert ufm_ok(ufm.put(f"{PKEYS}/qos_conf", headers=acme, json=qos)) == {
        "ignored": {"mtu_limit": 2}
    }
    assert db_dump() == before
    # a partition created by the request is a change: its differing values are audited
    ufm_ok(ufm.post(f"{PKEYS}/add", headers=acme, json={"pkey": "0x200", "service_level": 7}))
    assert ignored_entries(ufm)[-1] == f"fabrics/{FABRIC}/pkeys/0x200#ignored:service_level=7.0"


# --- the pool share ------------------------------------------------------------------------------

SMALL = "ib-small"
SMALL_KEYS = [f"0x{value:x}" for value in range(0x0A00, 0x0A08)]


def test_an_orchestrators_pkey_takes_are_bound_by_its_tenants_pool_share(ufm, db_dump):
    # 8 P_Keys: at the default 25 % an external tenant may hold 2 of them
    pkey_range = {"first": SMALL_KEYS[0], "last": SMALL_KEYS[-1]}
    api_create_fabric(ufm, SMALL, pkey_range=pkey_range)
    acme = basic(orchestrator(ufm, "acme", fabric=SMALL))
    for key in SMALL_KEYS[:2]:
        ufm_ok(ufm.post(f"{PKEYS}/add", headers=acme, json={"pkey": key}))
    before = db_dump()

    by_add = ufm_error(ufm.post(f"{PKEYS}/add", headers=acme, json={"pkey": SMALL_KEYS[5]}), 400)
    port = PORTS["gpu0007"][0]  # a free node's port on ib-small: its allocation is undone too
    by_post = ufm_error(add(ufm, acme, SMALL_KEYS[6], port), 400)

    assert by_add["reason"] == by_post["reason"] == "pool-share-exceeded"
    assert (by_add["tenant"], by_add["fabric"], by_add["limit"]) == ("acme", SMALL, 2)
    assert db_dump() == before
    # the operator is not bound: it may give the tenant more
    spec = {"fabric": SMALL, "name": "more", "pkey": SMALL_KEYS[5]}
    assert created(ufm.post("/v1/tenants/acme/partitions", json=spec))["pkey"] == "0x0a05"


# --- Slurm's per-job keys ------------------------------------------------------------------------


def partition_names(client: TestClient, tenant: str) -> list[str]:
    found = ok(client.get(f"/v1/tenants/{tenant}/partitions", params={"limit": 100}))["data"]
    return sorted(p["name"] for p in found)


def release_on_last_removal(client: TestClient) -> None:
    policy = {"kinds": {"external": {"release_on_last_removal": True}}}
    ok(client.put("/v1/policy", json=policy))


def test_an_emptied_partition_the_facade_created_is_deleted_under_release_on_last_removal(
    ufm, acme, engine
):
    release_on_last_removal(ufm)
    job = {"pkey": "0x200", "hosts_names": "gpu[0007-0008]"}

    ufm_ok(ufm.post(f"{PKEYS}/hosts", headers=acme, json=job))  # the prolog
    assert "pkey-0x200" in partition_names(ufm, "acme")
    ufm_ok(ufm.delete(f"{PKEYS}/0x200/hosts/gpu[0007-0008]", headers=acme))  # the epilog

    assert partition_names(ufm, "acme") == ["default"]
    assert allocated_nodes(ufm, "acme") == {"gpu0001", "gpu0002"}
    assert ufm_ok(ufm.get(f"{PKEYS}/0x200", headers=acme)) == {}
    assert rows(engine, "SELECT state FROM segment WHERE kind = 'pkey' AND value = 512") in (
        [("quarantined",)],
        [],
    )  # quarantined, or free at once where no target had it
    # the next job with the same key
    ufm_ok(ufm.post(f"{PKEYS}/hosts", headers=acme, json=job))
    assert "pkey-0x200" in partition_names(ufm, "acme")
    # emptied by a PUT, or by removing its last GUID, it goes too
    ufm_ok(ufm.put(PKEYS, headers=acme, json={"pkey": "0x200", "guids": []}))
    assert partition_names(ufm, "acme") == ["default"]
    ufm_ok(add(ufm, acme, "0x201", ACME_PORT))
    ufm_ok(ufm.delete(f"{PKEYS}/0x201/guids/{ACME_PORT}", headers=acme))
    assert partition_names(ufm, "acme") == ["default"]


def test_an_emptied_partition_stays_if_v1_made_it_or_the_policy_keeps_nodes(ufm, acme):
    spec = {"fabric": FABRIC, "name": "jobs", "pkey": "0x210"}
    created(ufm.post("/v1/tenants/acme/partitions", json=spec))
    ufm_ok(add(ufm, acme, "0x210", ACME_PORT))
    ufm_ok(add(ufm, acme, "0x200", ACME_PORT))  # the facade's, but the policy keeps nodes

    for pkey in ("0x210", "0x200"):
        ufm_ok(ufm.post(REMOVE, headers=acme, json={"pkey": pkey, "guids": [ACME_PORT]}))
    assert partition_names(ufm, "acme") == ["default", "jobs", "pkey-0x200"]

    release_on_last_removal(ufm)
    ufm_ok(add(ufm, acme, "0x210", ACME_PORT))
    ufm_ok(ufm.post(REMOVE, headers=acme, json={"pkey": "0x210", "guids": [ACME_PORT]}))
    ufm_ok(ufm.post(f"{PKEYS}/add", headers=acme, json={"pkey": "0x220"}))  # empty from its start
    ufm_ok(ufm.post(REMOVE, headers=acme, json={"pkey": "0x220", "guids": [ACME_PORT]}))
    assert partition_names(ufm, "acme") == ["default", "jobs", "pkey-0x200", "pkey-0x220"]
    assert ok(ufm.get("/v1/tenants/acme/partitions/jobs"))["members"] == []


# --- virtual GUIDs -------------------------------------------------------------------------------


@pytest.fixture
def virtual(client: TestClient, onboarded) -> TestClient:
    """Virtual GUIDs on (the setting is the operator's, made before any token exists)."""
    ok(client.patch(V1_FABRIC, json={"virtual_guids": VIRTUAL_GUIDS}))
    return client


def test_a_virtual_guid_joins_a_created_pkey_and_another_tenant_is_refused_it(
    virtual, ufm, acme, globex, everyone, db_dump
):
    ufm_ok(add(ufm, acme, "0x200", VIRTUAL))
    assert guids_of(ufm, acme, "0x200") == [(VIRTUAL, "full")]
    ufm_ok(ufm.post(f"{PKEYS}/add", headers=globex, json={"pkey": "0x300"}))
    before = db_dump()

    bound = ufm_error(add(ufm, globex, "0x300", VIRTUAL), 400)
    wide = ufm_error(add(ufm, everyone, "0x300", VIRTUAL), 400)

    assert VIRTUAL in bound["error"] and "acme" not in str(bound)
    assert VIRTUAL in wide["error"] and "acme" in wide["error"]
    assert db_dump() == before


def test_a_removed_virtual_guid_is_free_at_once_where_no_target_can_hold_it(virtual, ufm, acme):
    ufm_ok(add(ufm, acme, "0x200", VIRTUAL))

    ufm_ok(ufm.delete(f"{PKEYS}/0x200/guids/0x{VIRTUAL}", headers=acme))

    assert guids_of(ufm, acme, "0x200") == []
    assert ok(ufm.get(f"{V1_FABRIC}/virtual-guids"))["data"] == []


def test_a_removed_virtual_guid_is_listed_draining_while_the_fabric_may_enforce_it(
    virtual, ufm, acme, globex
):
    created(ufm.put(f"{V1_FABRIC}/targets/sm-a", json={"kind": "opensm"}))
    ufm_ok(add(ufm, acme, "0x200", VIRTUAL, ACME_PORT))
    _read_back(ufm)  # sm-a enforces the snapshot holding it

    ufm_ok(ufm.post(REMOVE, headers=acme, json={"pkey": "0x200", "guids": [VIRTUAL]}))

    shown = listing(ufm, acme)["0x200"]["guids"]
    assert [(g["guid"], g.get("state")) for g in shown] == [
        (ACME_PORT, None),
        (VIRTUAL, "draining"),
    ]
    assert (VIRTUAL, "full") in guids_of(ufm, basic(orchestrator(ufm)), "0x200")
    assert VIRTUAL not in str(listing(ufm, globex))
    ufm_ok(ufm.post(f"{PKEYS}/add", headers=globex, json={"pkey": "0x300"}))
    refused = ufm_error(add(ufm, globex, "0x300", VIRTUAL), 400)
    assert "draining" in refused["error"] and "acme" not in str(refused)
    _read_back(ufm)  # the removal is enforced: the GUID is free
    assert guids_of(ufm, acme, "0x200") == [(ACME_PORT, "full")]
    ufm_ok(add(ufm, globex, "0x300", VIRTUAL, membership="full"))  # not the refused body


def test_list_answers_name_the_intended_and_the_enforced_snapshot(virtual, ufm, acme):
    created(ufm.put(f"{V1_FABRIC}/targets/sm-a", json={"kind": "opensm"}))
    ufm_ok(add(ufm, acme, "0x200", ACME_PORT))
    intended = ok(ufm.get(f"{V1_FABRIC}/sync"))["desired"]

    def headers() -> tuple[str, str]:
        answer = ufm.get(f"{PKEYS}?guids_data=true", headers=acme)
        return (
            answer.headers["X-Isofabric-Intended-Snapshot"],
            answer.headers["X-Isofabric-Enforced-Snapshot"],
        )

    assert headers() == (intended, "none")
    _read_back(ufm)  # sm-a, the only target, enforces it
    assert headers() == (intended, intended)
    created(ufm.put(f"{V1_FABRIC}/targets/sm-b", json={"kind": "opensm"}))
    assert headers() == (intended, "none")  # sm-b holds nothing yet: nothing is enforced


# --- last_updated --------------------------------------------------------------------------------


UFM_TIME = re.compile(
    r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ 1-3][0-9] \d\d:\d\d:\d\d UTC \d{4}"
)


def last_updated(client: TestClient, who: dict[str, str]) -> str:
    text: str = ufm_ok(client.get(f"{PKEYS}/last_updated", headers=who))["last_updated"]
    assert UFM_TIME.fullmatch(text), text
    return text


def test_last_updated_is_never_older_than_the_write_and_never_goes_back(ufm, acme, clock):
    assert last_updated(ufm, acme) == "Sun Mar  1 12:00:00 UTC 2026"  # the onboarding's
    clock.now = datetime(2026, 3, 1, 12, 0, 5, 250_000, tzinfo=UTC)

    ufm_ok(add(ufm, acme, "0x200", FREE))
    assert last_updated(ufm, acme) == "Sun Mar  1 12:00:06 UTC 2026"  # rounded up, not down

    clock.now = datetime(2026, 3, 9, 8, 30, 0, tzinfo=UTC)
    ufm_ok(add(ufm, acme, "0x200", ACME_PORT))
    assert last_updated(ufm, acme) == "Mon Mar  9 08:30:00 UTC 2026"
    ufm_ok(add(ufm, acme, "0x200", ACME_PORT))  # a no-op: no change, no new time
    clock.now = datetime(2026, 3, 9, 8, 0, 0, tzinfo=UTC)  # another replica's clock, behind
    ufm_ok(add(ufm, acme, "0x200", PORTS["gpu0002"][0]))
    assert last_updated(ufm, acme) == "Mon Mar  9 08:30:00 UTC 2026"


# --- refusal guards ------------------------------------------------------------------------------


def refusals_by_reason(client: TestClient) -> dict[str, float]:
    text = client.get("/metrics").text
    found = re.findall(r'^isofabric_ufm_refusals_total\{reason="([^"]+)"\} (\S+)$', text, re.M)
    return {reason: float(count) for reason, count in found}


def test_an_identical_refused_write_is_answered_from_a_cache_for_60_s(ufm, acme, monkeypatch):
    calls: list[int] = []
    verified = ufm_facade.add_guids

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["body"].pkey)
        return verified(*args, **kwargs)

    monkeypatch.setattr(ufm_facade, "add_guids", counting)
    now = [1000.0]
    ufm.app.state.ufm.refusals.clock = lambda: now[0]
    first = add(ufm, acme, GLOBEX_KEY, FREE)

    retries = [add(ufm, acme, GLOBEX_KEY, FREE) for _ in range(3)]
    assert calls == [0x103]  # verified once
    assert {(r.status_code, r.content) for r in retries} == {(400, first.content)}
    add(ufm, acme, GLOBEX_KEY, FREE, membership="full")  # another body: verified
    add(ufm, basic(orchestrator(ufm, "acme")), GLOBEX_KEY, FREE)  # another token: verified
    assert len(calls) == 3
    now[0] += 61
    ufm_error(add(ufm, acme, GLOBEX_KEY, FREE), 400)
    assert len(calls) == 4
    ufm_ok(add(ufm, acme, "0x200", FREE))
    ufm_ok(add(ufm, acme, "0x200", FREE))  # a success is never cached
    assert len(calls) == 6


def test_each_principal_is_rate_limited_with_retry_after(ufm, acme, globex):
    limiter = ufm.app.state.ufm.limiter
    limiter.burst, limiter.rate = 2.0, 0.25
    ufm_ok(add(ufm, acme, ACME_KEY, ACME_PORT))
    ufm_ok(add(ufm, acme, ACME_KEY, ACME_PORT))

    refused = add(ufm, acme, ACME_KEY, ACME_PORT)

    assert ufm_error(refused, 429)["reason"] == "rate-limited"
    assert refused.headers["Retry-After"] == "4"
    assert ufm_error(ufm.post(f"{PKEYS}/add", headers=acme, json={"pkey": "0x200"}), 429)
    # reads too: a client polling in a loop is limited like one writing in a loop
    assert ufm_error(ufm.get(PKEYS, headers=acme), 429)["reason"] == "rate-limited"
    ufm_ok(add(ufm, globex, GLOBEX_KEY, GLOBEX_PORT))  # not another principal


def test_refusals_are_counted_in_metrics_by_reason(ufm, acme, globex):
    before = refusals_by_reason(ufm)
    add(ufm, acme, GLOBEX_KEY, FREE)
    add(ufm, acme, GLOBEX_KEY, FREE)  # from the cache, counted again
    add(ufm, globex, GLOBEX_KEY, ACME_PORT)
    add(ufm, acme, "0x200", "zz")
    add(ufm, acme, "0x200", FREE, membership="full", memberships=["full"])
    ufm.get(PKEYS, headers=basic("isf_" + "x" * 43))
    ufm.get(PKEYS, headers=basic(mint(ufm, "auditor").token))
    ufm.get(f"{PKEYS}?guids_data=true&qos_conf=true", headers=acme)

    after = refusals_by_reason(ufm)

    counted = {r: after.get(r, 0) - before.get(r, 0) for r in after}
    assert {r: n for r, n in counted.items() if n} == {
        "pkey-unavailable": 2,
        "foreign-guid": 1,
        "validation-error": 1,
        "invalid-body": 1,
        "unauthenticated": 1,
        "forbidden": 1,
        "query": 1,
    }


# --- reads under a writer ------------------------------------------------------------------------


class LockedService:
    """An onboarded service on a SQLite file (50 ms busy timeout) and one caller per style."""

    def __init__(self, db_path: Path, sqlite_seeds: Any) -> None:
        url = f"sqlite:///{db_path}"
        self.db_path = db_path
        self.engine = make_engine(url)
        event.listen(self.engine, "connect", short_busy_timeout)
        sqlite_seeds.restore("onboarded", self.engine)
        self.app = create_app(key_settings(Settings(database_url=url)), engine=self.engine)
        with self.client() as client:
            ok(client.patch(V1_FABRIC, json={"virtual_guids": VIRTUAL_GUIDS}))
            secret = orchestrator(client, "acme")
            ufm_ok(add(client, basic(secret), "0x200", FREE, VIRTUAL))
            self.headers = {style.name: style.headers(client, secret) for style in STYLES}
            self.operator = basic(mint(client, "operator").token)

    def client(self) -> TestClient:
        return TestClient(
            self.app, raise_server_exceptions=False, client=LOOPBACK_CLIENT, base_url=LOCAL_URL
        )


@pytest.fixture(scope="module")
def locked_service(tmp_path_factory, sqlite_seeds) -> Iterator[LockedService]:
    built = LockedService(tmp_path_factory.mktemp("ufm-reads") / "reads.db", sqlite_seeds)
    try:
        yield built
    finally:
        built.engine.dispose()


GET_URLS = {
    "/app/ufm_version": "/app/ufm_version",
    "/app/smconf": "/app/smconf",
    "/resources/ports": "/resources/ports?sys_type=Computer",
    "/resources/pkeys": "/resources/pkeys/?guids_data=true",
    "/resources/pkeys/last_updated": "/resources/pkeys/last_updated",
    "/resources/pkeys/{pkey}": "/resources/pkeys/0x200?guids_data=true&qos_conf=true",
}


def test_every_facade_get_route_answers_while_a_writer_holds_the_lock(locked_service):
    assert {path for method, path, _ in ROUTES if method == "GET"} == set(GET_URLS)
    holder = sqlite3.connect(locked_service.db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with locked_service.client() as client:
            statuses = {
                (style.name, template): client.get(
                    f"{style.base}{url}", headers=locked_service.headers[style.name]
                ).status_code
                for style in STYLES
                for template, url in GET_URLS.items()
            }
            statuses[("operator", "/app/smconf")] = client.get(
                f"/fabrics/{FABRIC}/ufmRest/app/smconf", headers=locked_service.operator
            ).status_code
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    assert {k: s for k, s in statuses.items() if s != 200} == {}
