"""A token never outlives the token that minted it (issue 10, item 7), without HTTP.

A token minted by a request that authenticated with a token is that token's child: its expiry is
capped at its parent's, revoking a token revokes all its descendants, and a tenant's tokens stop
working when the tenant is offboarded. Before, an expiring token could mint a non-expiring
tenant-admin token that kept working after its parent got 401.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from policies.errors import AuthenticationError, ConflictError, NotFoundError
from tenancy.schemas import TenantCreate, TokenCreate, TokenCreated, TokenView
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import tenants, tokens
from tenancy.usecases.bootstrap import prepare_database
from tests.builders import audit_trail, rows
from tests.tenancy.test_races import race

HOUR = timedelta(hours=1)


def holder(uow: UnitOfWork, token: TokenCreated) -> UnitOfWork:
    """`uow` acting for a request authenticated with `token`."""
    principal = tokens.authenticate(uow, secret=token.token)
    assert principal is not None, f"token {token.name} does not authenticate"
    return dataclasses.replace(uow, principal=principal)


def mint(
    uow: UnitOfWork,
    name: str,
    role: str = "tenant-admin",
    tenant: str | None = "acme",
    by: TokenCreated | None = None,
    expires_at: datetime | None = None,
) -> TokenCreated:
    """Mint a token, as the holder of `by` if given (else as the CLI does: no parent)."""
    spec = TokenCreate(name=name, role=role, tenant=tenant, expires_at=expires_at)
    return tokens.create_token(uow if by is None else holder(uow, by), spec=spec)


def views(uow: UnitOfWork) -> dict[str, TokenView]:
    return {v.name: v for v in tokens.list_tokens(uow, limit=100, cursor=None).data}


def working(uow: UnitOfWork, *created: TokenCreated) -> list[str]:
    return [c.name for c in created if tokens.authenticate(uow, secret=c.token) is not None]


# --- expiry ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        pytest.param(None, 2 * HOUR, id="no-expiry-gets-the-parents"),
        pytest.param(3 * HOUR, 2 * HOUR, id="a-later-one-is-capped"),
        pytest.param(HOUR, HOUR, id="an-earlier-one-is-kept"),
    ],
)
def test_a_child_expires_no_later_than_its_parent(uow, onboarded, clock, requested, expected):
    parent = mint(uow, "parent", expires_at=clock.now + 2 * HOUR)
    wanted = None if requested is None else clock.now + requested

    child = mint(uow, "child", by=parent, expires_at=wanted)

    assert views(uow)["child"].expires_at == clock.now + expected
    clock.advance(expected.total_seconds())
    assert working(uow, parent, child) == (["parent"] if expected < 2 * HOUR else [])


def test_a_child_of_a_token_without_expiry_keeps_the_expiry_it_asked_for(uow, onboarded, clock):
    parent = mint(uow, "parent")

    mint(uow, "forever", by=parent)
    mint(uow, "an-hour", by=parent, expires_at=clock.now + HOUR)

    assert views(uow)["forever"].expires_at is None
    assert views(uow)["an-hour"].expires_at == clock.now + HOUR


def test_the_parent_is_recorded_and_shown_and_a_token_minted_without_one_is_a_root(
    uow, onboarded, engine
):
    operator = mint(uow, "ops", "operator", None)
    admin = mint(uow, "admin", by=operator)
    viewer = mint(uow, "viewer", "tenant-viewer", by=admin)

    shown = {name: view.parent for name, view in views(uow).items()}
    assert shown == {"ops": None, "admin": operator.id, "viewer": admin.id}
    assert rows(engine, "SELECT parent_id FROM api_token WHERE id = :id", id=viewer.id) == [
        (admin.id,)
    ]


# --- revocation --------------------------------------------------------------------------------


def test_revoking_a_token_revokes_all_its_descendants_each_audited(uow, onboarded, clock, engine):
    root = mint(uow, "root", "operator", None)
    child = mint(uow, "child", by=root)
    grandchild = mint(uow, "grandchild", "tenant-viewer", by=child)
    sibling = mint(uow, "sibling", "operator", None)
    clock.advance(60)

    tokens.revoke_token(uow, token_id=root.id)

    assert working(uow, root, child, grandchild, sibling) == ["sibling"]
    revoked = {name: view.revoked_at for name, view in views(uow).items()}
    assert revoked == {
        "root": clock.now,
        "child": clock.now,
        "grandchild": clock.now,
        "sibling": None,
    }
    assert audit_trail(engine)[-3:] == [
        ("token.revoke", f"tokens/{root.id}"),
        ("token.revoke", f"tokens/{child.id}"),
        ("token.revoke", f"tokens/{grandchild.id}"),
    ]


# --- reissue: moving a token to another lineage before its parent is revoked -----------------


def test_a_reissued_agent_token_outlives_the_operator_token_it_was_minted_with(
    uow, onboarded, clock, engine
):
    old = mint(uow, "old-operator", "operator", None)
    new = mint(uow, "new-operator", "operator", None, expires_at=clock.now + HOUR)
    agent = mint(uow, "agent", "tenant-viewer", by=old)

    view = tokens.reissue_token(holder(uow, new), token_id=agent.id)
    tokens.revoke_token(uow, token_id=old.id)

    assert (view.parent, view.expires_at) == (new.id, clock.now + HOUR)  # capped at its parent's
    assert working(uow, old, new, agent) == ["new-operator", "agent"]  # same secret
    assert ("token.reissue", f"tokens/{agent.id}") in audit_trail(engine)
    tokens.revoke_token(uow, token_id=new.id)
    assert working(uow, agent) == []  # the new lineage holds it now


def test_reissued_from_the_command_line_a_token_becomes_a_root(uow, onboarded):
    parent = mint(uow, "parent", "operator", None)
    child = mint(uow, "child", by=parent)

    assert tokens.reissue_token(uow, token_id=child.id).parent is None
    tokens.revoke_token(uow, token_id=parent.id)
    assert working(uow, child) == ["child"]


def test_a_lineage_cannot_loop_nor_a_dead_token_come_back(uow, onboarded, db_dump):
    root = mint(uow, "root", "operator", None)
    child = mint(uow, "child", "operator", None, by=root)
    dead = mint(uow, "dead", by=root)
    tokens.revoke_token(uow, token_id=dead.id)
    before = db_dump()

    for token_id, by in ((root.id, child), (child.id, child), (dead.id, root), ("nope", root)):
        error = NotFoundError if token_id == "nope" else ConflictError
        with pytest.raises(error):
            tokens.reissue_token(holder(uow, by), token_id=token_id)
    assert db_dump() == before


def test_revoking_a_child_leaves_its_parent_working(uow, onboarded):
    parent = mint(uow, "parent")
    child = mint(uow, "child", by=parent)

    tokens.revoke_token(uow, token_id=child.id, tenant="acme")

    assert working(uow, parent, child) == ["parent"]


LATE = TokenCreate(name="late", role="tenant-admin", tenant="acme")


def test_a_token_revoked_after_authenticating_mints_nothing(uow, onboarded, db_dump):
    parent = mint(uow, "parent")
    as_parent = holder(uow, parent)
    tokens.revoke_token(uow, token_id=parent.id)
    before = db_dump()

    with pytest.raises(AuthenticationError, match="revoked or expired"):
        tokens.create_token(as_parent, spec=LATE)

    assert db_dump() == before


def test_a_token_expired_after_authenticating_mints_nothing(uow, onboarded, clock):
    parent = mint(uow, "parent", expires_at=clock.now + HOUR)
    as_parent = holder(uow, parent)
    clock.advance(HOUR.total_seconds())

    with pytest.raises(AuthenticationError, match="revoked or expired"):
        tokens.create_token(as_parent, spec=LATE)


# --- offboarding -------------------------------------------------------------------------------


def test_offboarding_revokes_the_tenants_tokens_and_their_descendants(uow, onboarded, engine):
    operator = mint(uow, "ops", "operator", None)
    admin = mint(uow, "acme-admin", by=operator)
    viewer = mint(uow, "acme-viewer", "tenant-viewer", by=admin)
    globex = mint(uow, "globex-admin", tenant="globex", by=operator)

    tenants.offboard_tenant(uow, name="acme")

    assert working(uow, operator, admin, viewer, globex) == ["ops", "globex-admin"]
    assert {name for name, view in views(uow).items() if view.revoked_at} == {
        "acme-admin",
        "acme-viewer",
    }
    assert ("token.revoke", f"tokens/{viewer.id}") in audit_trail(engine)


def test_a_token_of_a_tenant_offboarded_before_tokens_were_revoked_does_not_authenticate(
    uow, onboarded, engine
):
    kept = mint(uow, "acme-admin")
    tenants.offboard_tenant(uow, name="acme")
    # What an offboarding left behind before it revoked tokens: the token unrevoked.
    with engine.begin() as connection:
        connection.exec_driver_sql("UPDATE api_token SET revoked_at = NULL")

    assert tokens.authenticate(uow, secret=kept.token) is None


# --- real concurrency: minting under a token while it is revoked -------------------------------


@dataclasses.dataclass(frozen=True)
class Lineage:
    url: str
    engine: Engine
    parent: TokenCreated


@pytest.fixture
def lineage(shared_url: str) -> Iterator[Lineage]:
    """A tenant 'acme' and a tenant-admin token of it, in a database several connections share."""
    engine = make_engine(shared_url)
    prepare_database(engine)
    uow = UnitOfWork(engine, Settings(database_url=shared_url))
    tenants.create_tenant(uow, spec=TenantCreate(name="acme", kind="external"))
    try:
        yield Lineage(shared_url, engine, mint(uow, "parent"))
    finally:
        engine.dispose()


def revoke(token: TokenCreated) -> Any:
    return lambda uow: tokens.revoke_token(uow, token_id=token.id)


def mint_under(lineage: Lineage) -> Any:
    """Mint a child for a request that authenticated with the parent before the race began."""
    uow = UnitOfWork(lineage.engine, Settings(database_url=lineage.url))
    principal = holder(uow, lineage.parent).principal
    spec = TokenCreate(name="child", role="tenant-admin", tenant="acme")
    return lambda uow: tokens.create_token(dataclasses.replace(uow, principal=principal), spec=spec)


def test_a_child_minted_while_its_parent_is_revoked_is_revoked_too(lineage):
    minted, revoked = race(lineage.url, mint_under(lineage), revoke(lineage.parent))

    assert minted.error is None and revoked.error is None, (minted.error, revoked.error)
    uow = UnitOfWork(lineage.engine, Settings(database_url=lineage.url))
    assert working(uow, lineage.parent, minted.value) == []


def test_a_parent_revoked_while_it_mints_mints_nothing(lineage):
    revoked, minted = race(lineage.url, revoke(lineage.parent), mint_under(lineage))

    assert revoked.error is None, repr(revoked.error)
    assert isinstance(minted.error, AuthenticationError), repr(minted.error)
    assert rows(lineage.engine, "SELECT name FROM api_token") == [("parent",)]
