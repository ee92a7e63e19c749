"""API tokens: minted once, hashed at rest, scoped, expiring and revocable."""

from __future__ import annotations

from datetime import timedelta

import pytest
from typer.testing import CliRunner

from cli import app as cli_app
from tenancy.schemas import TokenCreate
from tenancy.usecases import tokens
from tests.builders import assert_problem, created, ok

ADMIN = "bootstrap-admin-token"


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def mint(client, role: str, tenant: str | None = None, **extra) -> str:
    spec = TokenCreate(name=f"t-{role}", role=role, tenant=tenant, **extra)
    return tokens.create_token(client.app.state.uow, spec=spec).token


@pytest.fixture
def guarded(make_client):
    return make_client(admin_token=ADMIN)


def test_a_token_is_shown_once_and_never_listed(guarded, onboarded):
    body = created(
        guarded.post(
            "/v1/tokens",
            json={"name": "ci", "role": "tenant-viewer", "tenant": "acme", "expires_at": None},
            headers=bearer(ADMIN),
        )
    )

    assert body.keys() == {"id", "name", "role", "tenant", "fabric", "target", "token"}
    assert body["token"].startswith("isf_") and len(body["token"]) > 40
    assert (body["name"], body["role"], body["tenant"]) == ("ci", "tenant-viewer", "acme")

    listed = ok(guarded.get("/v1/tokens", headers=bearer(ADMIN)))
    assert listed["count"] == 1 and listed["next"] is None
    assert "token" not in listed["data"][0]
    assert body["token"] not in guarded.get("/v1/tokens", headers=bearer(ADMIN)).text
    assert ok(guarded.get("/v1/tenants/acme", headers=bearer(body["token"])))["name"] == "acme"


def test_creating_the_first_token_closes_an_open_service(client, onboarded):
    assert client.get("/v1/fabrics").status_code == 200  # open: no admin token, no API token

    secret = created(client.post("/v1/tokens", json={"name": "ops", "role": "operator"}))["token"]

    assert_problem(client.get("/v1/fabrics"), 401, "unauthorized")
    assert ok(client.get("/v1/fabrics", headers=bearer(secret)))["count"] == 1


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x", "role": "tenant-viewer"},
        {"name": "x", "role": "tenant-admin", "tenant": None},
        {"name": "x", "role": "operator", "tenant": "acme"},
        {"name": "x", "role": "billing", "tenant": "acme"},
        {"name": "x", "role": "root"},
        {"name": "Bad Name", "role": "operator"},
    ],
)
def test_tenant_roles_need_a_tenant_and_global_roles_must_not_have_one(guarded, onboarded, body):
    assert_problem(guarded.post("/v1/tokens", json=body, headers=bearer(ADMIN)), 422)


def test_a_token_for_a_missing_tenant_is_a_404(guarded, onboarded):
    response = guarded.post(
        "/v1/tokens",
        json={"name": "x", "role": "tenant-viewer", "tenant": "nope"},
        headers=bearer(ADMIN),
    )
    assert_problem(response, 404, "not-found")


def test_an_expired_token_is_a_401(guarded, onboarded, clock):
    secret = mint(guarded, "auditor", expires_at=clock.now + timedelta(hours=1))
    assert guarded.get("/v1/fabrics", headers=bearer(secret)).status_code == 200

    clock.advance(3600)

    assert_problem(guarded.get("/v1/fabrics", headers=bearer(secret)), 401, "unauthorized")


def test_a_revoked_token_is_a_401_at_once_and_revocation_is_audited(guarded, onboarded):
    secret = mint(guarded, "operator")
    token_id = ok(guarded.get("/v1/tokens", headers=bearer(ADMIN)))["data"][0]["id"]
    assert guarded.get("/v1/fabrics", headers=bearer(secret)).status_code == 200

    response = guarded.delete(f"/v1/tokens/{token_id}", headers=bearer(ADMIN))

    assert response.status_code == 204
    assert_problem(guarded.get("/v1/fabrics", headers=bearer(secret)), 401, "unauthorized")
    view = ok(guarded.get("/v1/tokens", headers=bearer(ADMIN)))["data"][0]
    assert view["revoked_at"] is not None
    entries = ok(guarded.get("/v1/audit/entries", headers=bearer(ADMIN)))["data"]
    assert [e["action"] for e in entries][-1] == "token.revoke"
    assert entries[-1]["principal"] == "admin-token"


def test_the_audit_log_records_which_token_acted(guarded, onboarded):
    secret = mint(guarded, "operator")

    created(
        guarded.post(
            "/v1/tenants",
            json={"name": "initech", "kind": "external", "qos_class": "gold"},
            headers=bearer(secret),
        )
    )

    entry = ok(guarded.get("/v1/audit/entries", headers=bearer(ADMIN)))["data"][-1]
    assert entry["action"] == "tenant.create"
    assert entry["principal"].startswith("token:t-operator:")
    assert entry["role"] == "operator"


def test_a_tenant_admin_manages_its_own_tenants_tokens_only(guarded, onboarded):
    admin = bearer(mint(guarded, "tenant-admin", "acme"))
    mint(guarded, "tenant-viewer", "globex")

    own = created(
        guarded.post(
            "/v1/tokens",
            json={"name": "ci", "role": "tenant-viewer", "tenant": "acme"},
            headers=admin,
        )
    )
    for body in (
        {"name": "ci", "role": "tenant-viewer", "tenant": "globex"},
        {"name": "ci", "role": "operator"},
    ):
        assert guarded.post("/v1/tokens", json=body, headers=admin).status_code in (403, 404)

    listed = ok(guarded.get("/v1/tokens", headers=admin))
    assert {t["tenant"] for t in listed["data"]} == {"acme"}
    assert listed["count"] == 2
    every = ok(guarded.get("/v1/tokens", headers=bearer(ADMIN)))["data"]
    globex_id = next(t["id"] for t in every if t["tenant"] == "globex")

    assert_problem(guarded.delete(f"/v1/tokens/{globex_id}", headers=admin), 404, "not-found")
    assert guarded.delete(f"/v1/tokens/{own['id']}", headers=admin).status_code == 204
    assert_problem(guarded.get("/v1/tenants/acme", headers=bearer(own["token"])), 401)


def test_the_admin_token_stays_a_bootstrap_operator_token(guarded, onboarded):
    mint(guarded, "tenant-viewer", "acme")

    assert ok(guarded.get("/v1/fabrics", headers=bearer(ADMIN)))["count"] == 1


def test_cli_token_create_prints_a_working_token(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    runner = CliRunner()
    assert runner.invoke(cli_app, ["db", "upgrade", "--db", url]).exit_code == 0

    result = runner.invoke(
        cli_app, ["token", "create", "--role", "operator", "--name", "ops", "--db", url]
    )

    assert result.exit_code == 0, result.output
    secret = result.output.strip()
    assert secret.startswith("isf_")
    listed = runner.invoke(cli_app, ["token", "list", "--db", url, "--json"])
    assert listed.exit_code == 0 and '"role": "operator"' in listed.output
    assert secret not in listed.output
    refused = runner.invoke(
        cli_app, ["token", "create", "--role", "tenant-admin", "--name", "x", "--db", url]
    )
    assert refused.exit_code == 2
