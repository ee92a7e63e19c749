"""No write through the UFM-compatible API crosses tenants, on SQLite and on PostgreSQL.

An orchestrator bound to globex tries every write route against acme (its P_Keys, its ports, its
hosts, its virtual GUID, the storage service's partition and nodes) in every authentication style;
a fabric-wide orchestrator tries to move one tenant's ports or virtual GUID into another's
partition. Each is refused, UFM-shaped, without naming acme to globex, and nothing is written.
Two orchestrators of different tenants adding the same free node's port at once: one wins, the
other is refused, and no row of the loser's write remains. Not in tests/api/conftest.py's
HTTP-only list: the refusals depend on the database's locks and transactions, so both backends
run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.app import create_app
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tests.api.ufm_support import (
    ACME_KEY,
    ACME_PORT,
    FREE,
    GLOBEX_KEY,
    GLOBEX_PORT,
    PORTS,
    SERVICE_KEY,
    STORAGE_PORT,
    STYLES,
    VIRTUAL,
    VIRTUAL_GUIDS,
    Style,
    basic,
    orchestrator,
    ufm_error,
    ufm_ok,
)
from tests.builders import FABRIC, LOCAL_URL, ok, rows
from tests.conftest import LOOPBACK_CLIENT, postgres_configured
from tests.keys import key_settings

PKEYS = "/resources/pkeys"
JOBS, GLOBEX_JOBS = "0x200", "0x300"  # acme's additional partition, globex's


def prepare(client: TestClient) -> dict[str, str]:
    """Virtual GUIDs on; acme's 0x200 holds a port and a virtual GUID, globex's 0x300 nothing.

    Returns the secrets of globex's, acme's and a fabric-wide orchestrator.
    """
    ok(client.patch(f"/v1/fabrics/{FABRIC}", json={"virtual_guids": VIRTUAL_GUIDS}))
    secrets = {
        who: orchestrator(client, tenant)
        for who, tenant in [("globex", "globex"), ("acme", "acme"), ("wide", None)]
    }
    ufm_ok(
        client.post(
            f"/ufmRest{PKEYS}",
            headers=basic(secrets["acme"]),
            json={"pkey": JOBS, "guids": [ACME_PORT, VIRTUAL]},
        )
    )
    ufm_ok(
        client.post(
            f"/ufmRest{PKEYS}/add", headers=basic(secrets["globex"]), json={"pkey": GLOBEX_JOBS}
        )
    )
    return secrets


def globex_attempts() -> list[tuple[str, str, Any]]:
    """(method, path under the base, body) of every write route, aimed across tenants."""
    acme_hosts = "gpu0001"
    return [
        ("POST", PKEYS, {"pkey": ACME_KEY, "guids": [GLOBEX_PORT]}),
        ("POST", PKEYS, {"pkey": JOBS, "guids": [GLOBEX_PORT]}),
        ("POST", PKEYS, {"pkey": GLOBEX_KEY, "guids": [ACME_PORT]}),
        ("POST", PKEYS, {"pkey": GLOBEX_JOBS, "guids": [ACME_PORT], "membership": "limited"}),
        ("POST", PKEYS, {"pkey": GLOBEX_JOBS, "guids": [VIRTUAL]}),
        ("POST", PKEYS, {"pkey": GLOBEX_JOBS, "guids": [STORAGE_PORT]}),
        ("POST", PKEYS, {"pkey": SERVICE_KEY, "guids": [GLOBEX_PORT]}),
        ("POST", PKEYS, {"pkey": SERVICE_KEY, "guids": [ACME_PORT], "membership": "limited"}),
        ("PUT", PKEYS, {"pkey": JOBS, "guids": []}),
        ("PUT", PKEYS, {"pkey": ACME_KEY, "guids": [GLOBEX_PORT]}),
        ("PUT", PKEYS, {"pkey": GLOBEX_JOBS, "guids": list(PORTS["gpu0002"])}),
        ("PUT", PKEYS, {"pkey": SERVICE_KEY, "guids": []}),
        ("POST", f"{PKEYS}/add", {"pkey": JOBS}),
        ("POST", f"{PKEYS}/add", {"pkey": ACME_KEY}),
        ("PUT", f"{PKEYS}/qos_conf", {"pkey": JOBS, "mtu_limit": 5}),
        ("POST", f"{PKEYS}/hosts", {"pkey": GLOBEX_JOBS, "hosts_names": [acme_hosts]}),
        ("POST", f"{PKEYS}/hosts", {"pkey": JOBS, "hosts_names": ["gpu0005"]}),
        ("POST", f"{PKEYS}/hosts", {"pkey": GLOBEX_KEY, "hosts_names": "stor01"}),
        ("POST", "/actions/remove_guids_from_pkey", {"pkey": JOBS, "guids": [ACME_PORT]}),
        ("POST", "/actions/remove_guids_from_pkey", {"pkey": ACME_KEY, "guids": [ACME_PORT]}),
        ("DELETE", f"{PKEYS}/{JOBS}/guids/{ACME_PORT},{VIRTUAL}", None),
        ("DELETE", f"{PKEYS}/{ACME_KEY}/guids/{ACME_PORT}", None),
        ("DELETE", f"{PKEYS}/{JOBS}/hosts/{acme_hosts}", None),
        ("DELETE", f"{PKEYS}/{JOBS}", None),
        ("DELETE", f"{PKEYS}/{ACME_KEY}", None),
        ("DELETE", f"{PKEYS}/{SERVICE_KEY}", None),
    ]


def globex_no_ops() -> list[tuple[str, str, Any]]:
    """Removals from the storage service's P_Key of members that are not globex's to remove.

    The service's own nodes and acme's ports (acme's grant) are not in the key as globex is
    shown it: removing a non-member is a no-op (200 {}), which tells nothing and writes nothing.
    """
    return [
        ("DELETE", f"{PKEYS}/{SERVICE_KEY}/hosts/stor01", None),
        ("DELETE", f"{PKEYS}/{SERVICE_KEY}/hosts/gpu0001,gpu0002", None),
        ("DELETE", f"{PKEYS}/{SERVICE_KEY}/guids/{STORAGE_PORT},{ACME_PORT}", None),
        (
            "POST",
            "/actions/remove_guids_from_pkey",
            {"pkey": SERVICE_KEY, "guids": [*PORTS["gpu0001"], *PORTS["gpu0002"]]},
        ),
    ]


def wide_attempts() -> list[tuple[str, str, Any]]:
    """A fabric-wide orchestrator acts on every tenant, but never moves one's into another's."""
    return [
        ("POST", PKEYS, {"pkey": JOBS, "guids": [GLOBEX_PORT]}),
        ("POST", PKEYS, {"pkey": GLOBEX_JOBS, "guids": [ACME_PORT]}),
        ("POST", PKEYS, {"pkey": GLOBEX_JOBS, "guids": [VIRTUAL]}),
        ("POST", PKEYS, {"pkey": GLOBEX_KEY, "guids": [STORAGE_PORT]}),
        ("PUT", PKEYS, {"pkey": GLOBEX_JOBS, "guids": [ACME_PORT, VIRTUAL]}),
        ("PUT", PKEYS, {"pkey": SERVICE_KEY, "guids": []}),
        ("POST", PKEYS, {"pkey": SERVICE_KEY, "guids": [STORAGE_PORT], "membership": "limited"}),
        ("POST", f"{PKEYS}/hosts", {"pkey": JOBS, "hosts_names": ["gpu0005"]}),
        ("POST", f"{PKEYS}/hosts", {"pkey": GLOBEX_JOBS, "hosts_names": ["gpu0001", "sm01"]}),
        ("POST", f"{PKEYS}/add", {"pkey": "0x400"}),
        ("DELETE", f"{PKEYS}/{SERVICE_KEY}", None),
        ("DELETE", f"{PKEYS}/{ACME_KEY}", None),
    ]


def refused_everywhere(
    client: TestClient, style: Style, headers: dict[str, str], attempts: list[Any]
) -> list[httpx2.Response]:
    answers = []
    for method, path, body in attempts:
        response = client.request(method, f"{style.base}{path}", headers=headers, json=body)
        assert response.status_code == 400, (style.name, method, path, body, response.text)
        ufm_error(response, 400)
        answers.append(response)
    return answers


def every_style(client: TestClient, secret: str) -> list[tuple[Style, dict[str, str]]]:
    """Each style with its credentials (the /dologin sessions made before anything is compared)."""
    styles = [(style, style.headers(client, secret)) for style in STYLES]
    client.cookies.clear()  # the tests send each session's cookie themselves
    return styles


def test_a_tenants_orchestrator_cannot_write_across_tenants_in_any_style(
    client, onboarded, db_dump
):
    secrets = prepare(client)
    styles = every_style(client, secrets["globex"])
    before = db_dump()

    for style, headers in styles:
        answers = refused_everywhere(client, style, headers, globex_attempts())
        for response in answers:  # globex is never told that acme holds what it asked for
            assert "acme" not in response.text and "owner" not in response.json()
        for method, path, body in globex_no_ops():
            response = client.request(method, f"{style.base}{path}", headers=headers, json=body)
            assert ufm_ok(response) == {}, (style.name, method, path)

    assert db_dump() == before


def test_a_fabric_wide_orchestrator_cannot_move_one_tenants_ports_into_anothers(
    client, onboarded, db_dump
):
    secrets = prepare(client)
    styles = every_style(client, secrets["wide"])
    before = db_dump()

    for style, headers in styles:
        answers = refused_everywhere(client, style, headers, wide_attempts())
        assert "globex" in answers[0].json()["error"]  # a caller that sees every tenant is told
        assert "acme" in answers[1].json()["error"] and "acme" in answers[2].json()["error"]

    assert db_dump() == before


# --- concurrent orchestrators --------------------------------------------------------------------


SHARED = ["sqlite-file"] + (["postgres"] if postgres_configured() else [])


@pytest.fixture(params=SHARED)
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[TestClient, Engine]]:
    """The onboarded service on a database several connections share (a file, or PostgreSQL)."""
    if request.param == "postgres":
        databases = request.getfixturevalue("postgres_databases")
        url = databases.create("onboarded")
        engine = make_engine(url)
    else:
        url = f"sqlite:///{tmp_path / 'shared.db'}"
        engine = make_engine(url)
        request.getfixturevalue("sqlite_seeds").restore("onboarded", engine)
    app = create_app(
        key_settings(Settings(database_url=url), copy_to=tmp_path / "keys"), engine=engine
    )
    try:
        with TestClient(app, client=LOOPBACK_CLIENT, base_url=LOCAL_URL) as client:
            yield client, engine
    finally:
        engine.dispose()
        if request.param == "postgres":
            databases.drop(url)


def at_once(
    client: TestClient, calls: dict[str, tuple[dict[str, str], dict[str, Any]]]
) -> dict[str, tuple[int, str | None]]:
    """Send each named POST /ufmRest/resources/pkeys from its own thread, together.

    Returns each one's status and refusal reason (None: accepted).
    """
    start, statuses = threading.Barrier(len(calls)), {}

    def send(name: str, headers: dict[str, str], body: dict[str, Any]) -> None:
        start.wait()
        statuses[name] = client.post(f"/ufmRest{PKEYS}", headers=headers, json=body)

    threads = [threading.Thread(target=send, args=(n, *c)) for n, c in calls.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return {name: (r.status_code, r.json().get("reason")) for name, r in statuses.items()}


def holders(engine: Engine, node: str) -> list[tuple[str, str | None]]:
    """(tenant, allocation origin) of every open assignment of `node`."""
    return rows(
        engine,
        "SELECT t.name, a.origin FROM node_assignment n JOIN node o ON o.id = n.node_id "
        "JOIN allocation a ON a.id = n.allocation_id JOIN tenant t ON t.id = a.tenant_id "
        "WHERE o.name = :node",
        node=node,
    )


def pkey_rows(engine: Engine, value: int) -> list[tuple[Any, ...]]:
    return rows(
        engine, "SELECT tenant_id, state FROM segment WHERE kind = 'pkey' AND value = :v", v=value
    )


def test_two_orchestrators_adding_one_free_nodes_port_at_once_one_wins_and_nothing_is_half_done(
    shared,
):
    client, engine = shared
    acme = basic(orchestrator(client, "acme"))
    globex = basic(orchestrator(client, "globex"))

    # each into a P_Key of its own it creates on the way
    first = at_once(client, {
        "acme": (acme, {"pkey": "0x200", "guids": [FREE]}),
        "globex": (globex, {"pkey": "0x300", "guids": [FREE]}),
    })  # fmt: skip
    assert sorted(first.values(), key=str) == [(200, None), (400, "foreign-guid")], first
    winner = "acme" if first["acme"][0] == 200 else "globex"
    assert holders(engine, "gpu0007") == [(winner, "orchestrator")]
    assert pkey_rows(engine, 0x300 if winner == "acme" else 0x200) == []  # not created
    assert len(pkey_rows(engine, 0x200 if winner == "acme" else 0x300)) == 1

    # both into the same free P_Key, with the other free node's port
    port = PORTS["gpu0008"][0]
    second = at_once(client, {
        "acme": (acme, {"pkey": "0x400", "guids": [port]}),
        "globex": (globex, {"pkey": "0x400", "guids": [port]}),
    })  # fmt: skip
    assert sorted(second.values(), key=str)[0] == (200, None), second
    assert sorted(second.values(), key=str)[1][0] == 400, second
    winner = "acme" if second["acme"][0] == 200 else "globex"
    assert holders(engine, "gpu0008") == [(winner, "orchestrator")]
    assert len(pkey_rows(engine, 0x400)) == 1
    members = rows(
        engine,
        "SELECT t.name, m.guid FROM partition_member m JOIN partition p ON p.id = m.partition_id "
        "JOIN tenant t ON t.id = p.tenant_id ORDER BY m.guid",
    )
    assert members == sorted(
        [(holders(engine, "gpu0007")[0][0], f"0x{FREE}"), (winner, f"0x{port}")],
        key=lambda row: row[1],
    )
