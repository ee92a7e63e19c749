"""API tokens without HTTP: a secret shown once and stored hashed, the principal it authenticates,
expiry on the injected clock, revocation, tenant scoping and the role/tenant rules."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pydantic
import pytest

from policies.errors import NotFoundError
from tenancy.schemas import TokenCreate
from tenancy.store.uow import Principal, UnitOfWork
from tenancy.usecases import tokens
from tests.builders import audit_trail, rows


def mint(uow: UnitOfWork, name: str, role: str, tenant: str | None = None, **extra):
    return tokens.create_token(uow, spec=TokenCreate(name=name, role=role, tenant=tenant, **extra))


def test_a_token_secret_is_returned_once_and_stored_only_as_its_hash(uow, onboarded, engine):
    created = mint(uow, "ci", "tenant-viewer", "acme")

    assert created.token.startswith("isf_") and len(created.token) > 40
    assert (created.name, created.role, created.tenant) == ("ci", "tenant-viewer", "acme")
    stored = rows(engine, "SELECT secret_sha256 FROM api_token WHERE id = :id", id=created.id)
    assert stored == [(hashlib.sha256(created.token.encode()).hexdigest(),)]
    assert created.token not in repr(rows(engine, "SELECT * FROM api_token"))


def test_the_token_listing_shows_metadata_and_never_the_secret(uow, onboarded, clock):
    created = mint(uow, "ci", "operator")

    [view] = tokens.list_tokens(uow, limit=10, cursor=None).data

    assert view.model_dump() == {
        "id": created.id,
        "name": "ci",
        "role": "operator",
        "tenant": None,
        "fabric": None,
        "target": None,
        "created_at": clock.now,
        "expires_at": None,
        "revoked_at": None,
        "parent": None,
    }
    assert created.token not in view.model_dump_json()


def test_a_valid_secret_authenticates_as_its_token_with_its_role_and_tenant(uow, onboarded):
    created = mint(uow, "ci", "tenant-admin", "acme")

    principal = tokens.authenticate(uow, secret=created.token)

    assert principal == Principal(f"token:ci:{created.id}", "tenant-admin", "acme")


@pytest.mark.parametrize(
    "secret", ["isf_not-a-token", "not-isf-at-all", ""], ids=["unknown", "foreign", "empty"]
)
def test_an_unknown_secret_authenticates_no_one(uow, onboarded, secret):
    mint(uow, "ci", "operator")

    assert tokens.authenticate(uow, secret=secret) is None


def test_a_token_expires_at_its_expiry_time_on_the_clock(uow, onboarded, clock):
    created = mint(uow, "ci", "auditor", expires_at=clock.now + timedelta(hours=1))

    clock.advance(3599)
    before_expiry = tokens.authenticate(uow, secret=created.token)
    clock.advance(1)
    at_expiry = tokens.authenticate(uow, secret=created.token)

    assert before_expiry is not None and before_expiry.role == "auditor"
    assert at_expiry is None


def test_a_revoked_token_stops_authenticating_at_once_and_the_revocation_is_audited(
    uow, onboarded, clock, engine
):
    created = mint(uow, "ci", "operator")
    assert tokens.authenticate(uow, secret=created.token) is not None
    clock.advance(60)

    tokens.revoke_token(uow, token_id=created.id)

    assert tokens.authenticate(uow, secret=created.token) is None
    [view] = tokens.list_tokens(uow, limit=10, cursor=None).data
    assert view.revoked_at == clock.now
    assert audit_trail(engine)[-2:] == [
        ("token.create", f"tokens/{created.id}"),
        ("token.revoke", f"tokens/{created.id}"),
    ]


def test_revoking_twice_keeps_the_first_revocation_and_audits_it_once(
    uow, onboarded, clock, engine
):
    created = mint(uow, "ci", "operator")
    tokens.revoke_token(uow, token_id=created.id)
    first = tokens.list_tokens(uow, limit=10, cursor=None).data[0].revoked_at
    entries = len(audit_trail(engine))
    clock.advance(60)

    tokens.revoke_token(uow, token_id=created.id)

    assert tokens.list_tokens(uow, limit=10, cursor=None).data[0].revoked_at == first
    assert len(audit_trail(engine)) == entries


def test_a_tenant_sees_and_revokes_only_its_own_tokens(uow, onboarded, db_dump):
    own = mint(uow, "ci", "tenant-viewer", "acme")
    other = mint(uow, "ci", "tenant-viewer", "globex")
    mint(uow, "ops", "operator")

    acme = tokens.list_tokens(uow, limit=10, cursor=None, tenant="acme")
    assert ([t.id for t in acme.data], acme.count) == ([own.id], 1)
    before = db_dump()
    with pytest.raises(NotFoundError):
        tokens.revoke_token(uow, token_id=other.id, tenant="acme")
    assert db_dump() == before

    tokens.revoke_token(uow, token_id=own.id, tenant="acme")
    assert tokens.authenticate(uow, secret=own.token) is None
    assert tokens.authenticate(uow, secret=other.token) is not None


def test_a_token_for_an_unknown_tenant_is_not_found(uow, onboarded, db_dump):
    before = db_dump()

    with pytest.raises(NotFoundError, match="nope"):
        mint(uow, "x", "tenant-viewer", "nope")

    assert db_dump() == before


def test_revoking_an_unknown_token_is_not_found(uow, onboarded):
    with pytest.raises(NotFoundError):
        tokens.revoke_token(uow, token_id="00000000-0000-0000-0000-000000000000")


def test_the_first_token_closes_the_service_to_anonymous_callers(uow, onboarded):
    assert not tokens.tokens_exist(uow)

    created = mint(uow, "ci", "operator")
    tokens.revoke_token(uow, token_id=created.id)

    assert tokens.tokens_exist(uow)  # revoked or not, the service stays closed


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "x", "role": "tenant-viewer"},
        {"name": "x", "role": "tenant-admin", "tenant": None},
        {"name": "x", "role": "operator", "tenant": "acme"},
        {"name": "x", "role": "billing", "tenant": "acme"},
        {"name": "x", "role": "root"},
        {"name": "Bad Name", "role": "operator"},
        {"name": "x", "role": "operator", "expires_at": "2026-03-01T13:00:00"},
    ],
    ids=repr,
)
def test_tenant_roles_need_a_tenant_and_global_roles_must_not_have_one(spec):
    with pytest.raises(pydantic.ValidationError):
        TokenCreate.model_validate(spec)
