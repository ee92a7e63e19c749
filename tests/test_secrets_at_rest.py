"""No secret sits in clear in the database, a backup of it or the service's log.

After a full deploy cycle on InfiniBand (the agent's signed manifest, by-digest downloads and
reports, a dry run, a change, the next cycle, an isolation proof, tokens minted with an
Idempotency-Key, then the UFM-compatible API: an orchestrator token's /dologin sessions, a token
minted through one with `POST /app/tokens`, and a write with it), every column of every table
(zlib-compressed values opened), a backup (SQLite: `isofabric db backup`, its raw bytes and its
tables) and every log record are searched for each secret in each of its encodings: the subnet's
M_Key, SM_Key and SA_Key (opensm.conf, kept sealed: tenancy/store/sealing.py), the OpenSM secret
and the signing key (files beside the database), every API token and every UFM API session
(only their SHA-256 is stored). On PostgreSQL the tables are what `pg_dump` writes, so they are
searched directly.
"""

from __future__ import annotations

import logging
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from fastapi.testclient import TestClient
from sqlalchemy import Engine, MetaData, select
from sqlmodel import SQLModel

from api.app import create_app
from api.ufm.auth import SESSION_COOKIE as UFM_SESSION_COOKIE
from tenancy.store import backup, key_store
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.usecases.bootstrap import prepare_database
from tests.api.test_deploy import manifest_digest
from tests.builders import ARTIFACT_PATHS, FABRIC, api_onboard, created, ok
from tests.conftest import LOOPBACK_CLIENT
from tests.keys import key_settings, register_key

ADMIN = "isf_" + "a1" * 20
IB = f"/v1/fabrics/{FABRIC}"
KEY_LINE = re.compile(r"^\s*(m_key|sm_key|sa_key)\s+(0x[0-9a-fA-F]+)\s*$", re.MULTILINE)


@pytest.fixture(params=["sqlite-file", "postgres"])
def database_file_or_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return f"sqlite:///{tmp_path / 'isofabric.db'}"


@pytest.fixture
def service(database_file_or_url: str) -> Iterator[tuple[TestClient, Engine]]:
    engine = make_engine(database_file_or_url)
    prepare_database(engine)
    register_key(engine)
    settings = key_settings(Settings(database_url=database_file_or_url, admin_token=ADMIN))
    app = create_app(settings, engine=engine)
    with TestClient(app, client=LOOPBACK_CLIENT) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN}"
        yield client, engine
    engine.dispose()


def test_after_a_deploy_cycle_no_secret_is_in_clear_in_any_table_backup_or_log(
    service: tuple[TestClient, Engine], tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    client, engine = service
    caplog.set_level(logging.DEBUG)
    tokens = full_cycle(client)
    needles = secret_needles(client, tokens)

    found = [
        f"{where}: {name}" for where, text in stored_texts(engine) for name in seen(needles, text)
    ]
    found += [f"log: {name}" for r in caplog.records for name in seen(needles, r.getMessage())]
    if engine.dialect.name == "sqlite":
        found += backup_findings(engine, tmp_path / "backup.db", needles)

    assert len(needles) >= 3 * 4 + 4  # the three subnet keys and the other secrets were found
    assert not found, found


def full_cycle(client: TestClient) -> list[str]:
    """Onboard, deploy twice through an agent's calls, change, prove; the tokens minted."""
    api_onboard(client)
    created(client.put(f"{IB}/targets/sm-a", json={"kind": "opensm"}))
    agent = mint(client, {"name": "agent", "role": "agent", "fabric": FABRIC, "target": "sm-a"})
    admin = mint(client, {"name": "ci", "role": "tenant-admin", "tenant": "acme"}, key="mint-1")
    agent_cycle(client, agent)
    body = {"fabric": FABRIC, "nodes": ["gpu0007"]}
    ok(client.post("/v1/tenants/acme/allocations", params={"dry_run": "true"}, json=body))
    created(client.post("/v1/tenants/acme/allocations", json=body))
    agent_cycle(client, agent)
    created(client.post("/v1/tenants/acme/isolation-proofs", json={"fabric": FABRIC}))
    return [ADMIN, agent, admin, *facade_cycle(client)]


def facade_cycle(client: TestClient) -> list[str]:
    """The UFM-compatible API's secrets: an orchestrator token, its /dologin sessions, and a
    token minted with `POST /app/tokens` through a session, which then writes (api/ufm/)."""
    body = {"name": "k8s", "role": "orchestrator", "tenant": "acme", "fabric": FABRIC}
    orchestrator = mint(client, body)
    form = {"httpd_username": "k8s", "httpd_password": orchestrator}
    sessions = [
        str(client.post(f"{prefix}/dologin", data=form).cookies[UFM_SESSION_COOKIE])
        for prefix in ("", f"/fabrics/{FABRIC}")
    ]
    client.cookies.clear()
    cookie = {"Cookie": f"{UFM_SESSION_COOKIE}={sessions[0]}"}
    child = ok(client.post("/ufmRestV2/app/tokens", headers=cookie))["access_token"]
    write = {"pkey": "0x200", "guids": ["000000000010001f"]}  # gpu0008's: allocates it to acme
    headers = {"Authorization": f"Basic {child}"}
    assert ok(client.post("/ufmRestV3/resources/pkeys", headers=headers, json=write)) == {}
    assert ok(client.get("/ufmRestV2/resources/pkeys/0x200", headers=cookie))["partition"]
    return [orchestrator, *sessions, child]


def mint(client: TestClient, body: dict[str, Any], key: str | None = None) -> str:
    headers = {"Idempotency-Key": key} if key else {}
    return str(created(client.post("/v1/tokens", json=body, headers=headers))["token"])


def agent_cycle(client: TestClient, token: str) -> None:
    """What `isofabric agent opensm` asks of the service in one cycle that applies."""
    headers = {"Authorization": f"Bearer {token}"}
    digest = manifest_digest(ok(client.get(f"{IB}/signed-manifest", headers=headers)))
    for path in ARTIFACT_PATHS:
        url = f"{IB}/snapshots/{digest}/artifacts/{path}"
        assert client.get(url, headers=headers).status_code == 200
    body = {"state": "applied", "digest": digest, "role": "master"}
    created(client.post(f"{IB}/targets/sm-a/reports", json=body, headers=headers))


def secret_needles(client: TestClient, tokens: list[str]) -> dict[str, bytes]:
    """Every secret in every encoding a store or a log might hold, by a name for the report."""
    options = client.get(f"{IB}/artifacts/opensm/opensm.conf").text
    needles: dict[str, bytes] = {}
    for kind, value in KEY_LINE.findall(options):
        number = int(value, 16)
        needles[f"{kind} hex"] = f"{number:016x}".encode()
        needles[f"{kind} decimal"] = str(number).encode()
        needles[f"{kind} big-endian"] = number.to_bytes(8, "big")
        needles[f"{kind} little-endian"] = number.to_bytes(8, "little")
    settings = client.app.state.uow.settings  # type: ignore[attr-defined]
    opensm_secret = key_store.load_opensm_secret(settings)
    needles["OpenSM secret"] = opensm_secret
    needles["OpenSM secret hex"] = opensm_secret.hex().encode()
    signing = Path(settings.signing_key_file).read_bytes()
    private = serialization.load_pem_private_key(signing, password=None)
    raw = private.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    needles["signing key"], needles["signing key hex"] = raw, raw.hex().encode()
    needles["signing key PEM"] = b"".join(signing.splitlines()[1:-1])
    for number, token in enumerate(tokens):
        needles[f"token {number}"] = token.encode()
    return needles


def seen(needles: dict[str, bytes], text: bytes | str) -> list[str]:
    data = (text.encode() if isinstance(text, str) else text).lower()
    return [name for name, needle in needles.items() if needle.lower() in data]


def stored_texts(engine: Engine) -> Iterator[tuple[str, bytes]]:
    """Every value of every table, as bytes; a zlib-compressed value also opened."""
    tables = MetaData()
    tables.reflect(engine)
    assert set(SQLModel.metadata.tables) <= set(tables.tables)
    with engine.connect() as connection:
        for table in tables.sorted_tables:
            for row in connection.execute(select(table)):
                for column, value in zip(table.columns, row, strict=True):
                    yield from values_of(f"{table.name}.{column.name}", value)


def values_of(where: str, value: Any) -> Iterator[tuple[str, bytes]]:
    data = bytes(value) if isinstance(value, bytes | memoryview) else str(value).encode()
    yield where, data
    try:
        opened = zlib.decompress(data)
    except zlib.error:
        return
    yield f"{where} (zlib)", opened


def backup_findings(engine: Engine, path: Path, needles: dict[str, bytes]) -> list[str]:
    """`isofabric db backup`'s file: its raw bytes and its tables."""
    backup.backup(engine.url.render_as_string(hide_password=False), path)
    found = [f"backup file: {name}" for name in seen(needles, path.read_bytes())]
    copy = make_engine(f"sqlite:///{path}", create_missing=False)
    try:
        found += [
            f"backup {where}: {n}"
            for where, text in stored_texts(copy)
            for n in seen(needles, text)
        ]
    finally:
        copy.dispose()
    return found
