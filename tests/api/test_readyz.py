"""Issue 10, item 8: /readyz, and signing without a key, fail clearly instead of making a key.

Since issue 14 /readyz answers a `not-ready` problem naming every reason in `not_ready`
(tests/api/test_health.py covers the database's part).

Before: there was no /readyz, and the first checkpoint or proof created a signing key in the
database (each replica could make its own). Now the key is installed by `isofabric keys create`
only; without it /readyz, checkpoints, proofs and opensm.conf answer 503 ``key-unavailable``
naming the missing file and that command, and start-up logs the same.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import text

from tenancy.schemas import TokenCreate
from tenancy.usecases import tokens
from tenancy.usecases.bootstrap import head_revision
from tests.builders import FABRIC, PROBLEM_JSON

KEY_UNAVAILABLE = "/problems/key-unavailable"
NOT_READY = "/problems/not-ready"
ClientFactory = Callable[..., TestClient]


def without_keys(make_client: ClientFactory, tmp_path: Path, **overrides: Any) -> TestClient:
    """A client whose key file and OpenSM secret file do not exist."""
    return make_client(
        signing_key_file=str(tmp_path / "missing-signing.key"),
        opensm_secret_file=str(tmp_path / "missing-opensm.secret"),
        **overrides,
    )


def test_readyz_is_ready_once_the_keys_are_installed(client):
    response = client.get("/readyz")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert body["checks"] == {
        "database": "ok",
        "migrations": "ok",
        "signing_key": "ok",
        "opensm_secret": "ok",
    }
    assert body["schema_revision"] == head_revision()
    assert body["scheduled_jobs"] == []  # nothing ran: TestClient starts no schedule here


def test_readyz_names_each_missing_file_and_the_command_that_creates_it(make_client, tmp_path):
    client = without_keys(make_client, tmp_path)

    response = client.get("/readyz")

    assert response.status_code == 503
    assert response.headers["content-type"] == PROBLEM_JSON
    problem = response.json()
    assert (problem["type"], problem["status"]) == (NOT_READY, 503)
    assert len(problem["not_ready"]) == 2
    assert "missing-signing.key" in problem["not_ready"][0]
    assert "missing-opensm.secret" in problem["not_ready"][1]
    assert str(tmp_path / "missing-signing.key") in problem["detail"]
    assert str(tmp_path / "missing-opensm.secret") in problem["detail"]
    assert "isofabric keys create" in problem["detail"]
    assert problem["missing"] == [
        str(tmp_path / "missing-signing.key"),
        str(tmp_path / "missing-opensm.secret"),
    ]


def test_readyz_needs_no_token(make_client, tmp_path):
    client = without_keys(make_client, tmp_path, admin_token="s3cret-admin-token")

    assert client.get("/readyz").status_code == 503  # not 401: probes carry no token


PLAIN_KEYS = ["signing_key: missing or unusable", "opensm_secret: missing or unusable"]


def test_a_caller_without_an_operators_token_gets_check_names_and_states_only(
    make_client, tmp_path
):
    client = without_keys(make_client, tmp_path, admin_token="s3cret-admin-token")
    billing = tokens.create_token(
        client.app.state.uow,  # type: ignore[attr-defined]  # the app create_app built
        spec=TokenCreate(name="billing", role="billing"),
    ).token

    for headers in ({}, {"Authorization": f"Bearer {billing}"}, {"Authorization": "Bearer nope"}):
        response = client.get("/readyz", headers=headers)
        assert response.status_code == 503
        problem = response.json()
        assert problem["not_ready"] == PLAIN_KEYS and "missing" not in problem
        assert str(tmp_path) not in response.text and "keys create" not in response.text

    detailed = client.get("/readyz", headers={"Authorization": "Bearer s3cret-admin-token"})
    assert detailed.json()["missing"] == [
        str(tmp_path / "missing-signing.key"),
        str(tmp_path / "missing-opensm.secret"),
    ]


def test_a_schema_behind_is_a_state_without_its_revisions_to_a_probe(make_client, engine):
    client = make_client(admin_token="adm1n")
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0017'"))
    probe = client.get("/readyz")
    assert probe.json()["not_ready"] == ["migrations: not at head"]
    assert "0017" not in probe.text
    operator = client.get("/readyz", headers={"Authorization": "Bearer adm1n"})
    assert "the database is at revision 0017" in operator.json()["not_ready"][0]


def test_start_up_logs_what_is_missing(make_client, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="isofabric.api"):
        without_keys(make_client, tmp_path)

    logged = [r.getMessage() for r in caplog.records if r.name == "isofabric.api"]
    assert any("not ready" in m and "missing-signing.key" in m for m in logged), logged
    assert any("isofabric keys create" in m for m in logged)


def test_a_checkpoint_without_the_key_file_is_503_and_creates_no_key(
    make_client, tmp_path, db_dump
):
    client = without_keys(make_client, tmp_path)
    client.post("/v1/tenants", json={"name": "initech", "kind": "internal"})  # a checkpoint is due
    before = db_dump()

    response = client.get("/v1/audit/checkpoint")

    assert response.status_code == 503
    assert response.json()["type"] == KEY_UNAVAILABLE
    assert "isofabric keys create" in response.json()["detail"]
    assert db_dump() == before
    assert not (tmp_path / "missing-signing.key").exists()


def test_a_proof_without_the_keys_is_503_and_stores_nothing(make_client, tmp_path, onboarded):
    client = without_keys(make_client, tmp_path)

    response = client.post("/v1/tenants/acme/isolation-proofs", json={"fabric": FABRIC})

    assert response.status_code == 503
    assert response.json()["type"] == KEY_UNAVAILABLE
    assert client.get("/v1/proofs").json()["count"] == 0


def test_a_proof_with_a_key_file_that_is_not_the_active_key_is_503(
    make_client, tmp_path, onboarded
):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from tenancy.store import key_store

    other = tmp_path / "other.key"
    key_store.write_private_file(other, key_store.private_pem(Ed25519PrivateKey.generate()))
    client = make_client(signing_key_file=str(other))

    response = client.post("/v1/tenants/acme/isolation-proofs", json={"fabric": FABRIC})

    assert response.status_code == 503
    assert "not the active key" in response.json()["detail"]


def test_opensm_conf_without_the_secret_is_503(make_client, tmp_path, onboarded):
    client = without_keys(make_client, tmp_path)

    response = client.get(f"/v1/fabrics/{FABRIC}/artifacts/opensm/opensm.conf")

    assert response.status_code == 503
    assert "missing-opensm.secret" in response.json()["detail"]
