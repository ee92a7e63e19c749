"""Over HTTP, a token minted with a token never outlives it (issue 10, item 7).

An expiring tenant-admin token could mint a non-expiring one that kept working after the parent
got 401, and an offboarded tenant's tokens kept authenticating.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.builders import assert_problem, created, ok

ADMIN = "bootstrap-admin-token"


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def guarded(make_client):
    return make_client(admin_token=ADMIN)


def post_token(client, by: str, **body: Any) -> dict[str, Any]:
    return created(client.post("/v1/tokens", json=body, headers=bearer(by)))


def listed(client) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in ok(client.get("/v1/tokens", headers=bearer(ADMIN)))["data"]}


def works(client, secret: str) -> bool:
    status: int = client.get("/v1/tenants/acme", headers=bearer(secret)).status_code
    return status == 200


def test_an_expiring_token_cannot_mint_a_token_that_outlives_it(guarded, onboarded, clock):
    expiry = clock.now + timedelta(hours=1)
    parent = post_token(
        guarded,
        ADMIN,
        name="short",
        role="tenant-admin",
        tenant="acme",
        expires_at=expiry.isoformat(),
    )
    child = post_token(guarded, parent["token"], name="forever", role="tenant-admin", tenant="acme")

    tokens = listed(guarded)
    assert tokens["forever"]["parent"] == parent["id"]
    assert tokens["forever"]["expires_at"] == tokens["short"]["expires_at"]
    assert works(guarded, child["token"])

    clock.advance(3600)

    assert not works(guarded, parent["token"])
    assert_problem(
        guarded.get("/v1/tenants/acme", headers=bearer(child["token"])), 401, "unauthorized"
    )


def test_revoking_a_token_revokes_the_tokens_it_minted(guarded, onboarded):
    parent = post_token(guarded, ADMIN, name="parent", role="tenant-admin", tenant="acme")
    child = post_token(guarded, parent["token"], name="child", role="tenant-admin", tenant="acme")
    grandchild = post_token(
        guarded, child["token"], name="grandchild", role="tenant-viewer", tenant="acme"
    )

    response = guarded.delete(f"/v1/tokens/{parent['id']}", headers=bearer(ADMIN))

    assert response.status_code == 204
    assert [works(guarded, t["token"]) for t in (parent, child, grandchild)] == [False] * 3
    assert {name: t["revoked_at"] is not None for name, t in listed(guarded).items()} == {
        "parent": True,
        "child": True,
        "grandchild": True,
    }


def test_the_token_views_show_the_parent_and_null_for_the_admin_tokens(guarded, onboarded):
    parent = post_token(guarded, ADMIN, name="parent", role="tenant-admin", tenant="acme")
    post_token(guarded, parent["token"], name="child", role="tenant-viewer", tenant="acme")

    own = ok(guarded.get("/v1/tokens", headers=bearer(parent["token"])))["data"]

    assert {t["name"]: t["parent"] for t in own} == {"parent": None, "child": parent["id"]}


def test_an_offboarded_tenants_tokens_are_revoked_and_get_401(guarded, onboarded):
    acme = post_token(guarded, ADMIN, name="acme-admin", role="tenant-admin", tenant="acme")
    globex = post_token(guarded, ADMIN, name="globex-admin", role="tenant-admin", tenant="globex")

    ok(guarded.delete("/v1/tenants/acme", headers=bearer(ADMIN)))

    assert_problem(
        guarded.get("/v1/tenants/acme", headers=bearer(acme["token"])), 401, "unauthorized"
    )
    assert guarded.get("/v1/tenants/globex", headers=bearer(globex["token"])).status_code == 200
    tokens = listed(guarded)
    assert tokens["acme-admin"]["revoked_at"] is not None
    assert tokens["globex-admin"]["revoked_at"] is None


def test_no_token_is_minted_for_an_offboarded_tenant(guarded, onboarded):
    ok(guarded.delete("/v1/tenants/acme", headers=bearer(ADMIN)))

    response = guarded.post(
        "/v1/tokens",
        json={"name": "late", "role": "tenant-viewer", "tenant": "acme"},
        headers=bearer(ADMIN),
    )

    assert_problem(response, 409, "conflict")
    assert "late" not in listed(guarded)
