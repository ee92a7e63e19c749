"""The full re-verification (issue 12, item 1): it re-derives what the incremental gate stored."""

from __future__ import annotations

from sqlalchemy import text

from tenancy import models as m
from tenancy.gate.full_check import full_check, full_check_all, upgrade_digests
from tenancy.schemas import AllocationCreate
from tenancy.store.lookups import fabric_named
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations
from tests.builders import FABRIC


def stored(uow: UnitOfWork) -> m.FabricDigest:
    with uow.transaction(read_only=True) as tx:
        row = tx.session.get(m.FabricDigest, fabric_named(tx.session, FABRIC).id)
    assert row is not None
    return row


def test_a_full_check_of_an_incrementally_changed_fabric_reproduces_its_digest(uow, onboarded):
    allocations.allocate(uow, tenant_name="globex", spec=AllocationCreate(fabric=FABRIC, count=1))

    check = full_check(uow, fabric_name=FABRIC)

    assert check.matches and check.holds and check.alarm is None
    assert check.digest == check.stored_digest == stored(uow).digest
    assert stored(uow).checked_digest == check.digest and stored(uow).checked_at is not None


def test_a_stored_digest_that_disagrees_raises_an_alarm_until_a_change_rebuilds_it(
    uow, onboarded, engine, caplog
):
    good = stored(uow).digest
    with engine.begin() as connection:
        connection.execute(text("UPDATE fabric_digest SET digest = :d"), {"d": "v2:" + "0" * 64})

    check = full_check(uow, fabric_name=FABRIC)

    assert not check.matches and check.digest == good
    assert "disagrees" in (check.alarm or "") and "disagrees" in caplog.text
    row = stored(uow)
    assert row.alarm == check.alarm and not row.holds  # the next change is verified whole
    allocations.allocate(uow, tenant_name="globex", spec=AllocationCreate(fabric=FABRIC, count=1))
    assert full_check(uow, fabric_name=FABRIC).matches
    assert stored(uow).alarm is None and stored(uow).holds


def test_every_fabric_is_checked(uow, onboarded):
    assert [c.fabric for c in full_check_all(uow)] == [FABRIC]


def test_a_state_logged_with_a_v1_digest_is_renamed_once_by_an_audited_upgrade(
    uow, onboarded, engine
):
    old = "sha256:" + "ab" * 32
    with engine.begin() as connection:  # as a database written before issue 12 holds it
        connection.execute(text("UPDATE snapshot_record SET digest = :d"), {"d": old})
        connection.execute(
            text("UPDATE audit_entry SET digest_after = :d WHERE digest_after IS NOT NULL"),
            {"d": old},
        )
        connection.execute(text("DELETE FROM digest_group"))
        connection.execute(text("DELETE FROM fabric_digest"))

    assert upgrade_digests(uow) == [FABRIC]
    assert upgrade_digests(uow) == []  # once

    with engine.connect() as connection:
        action, before, after = connection.execute(
            text(
                'SELECT action, digest_before, digest_after FROM audit_entry ORDER BY "index" DESC'
            )
        ).first()
        newest = connection.execute(
            text("SELECT digest FROM snapshot_record ORDER BY id DESC")
        ).scalar()
    assert (action, before) == ("snapshot.digest-upgrade", old)
    assert after == newest == stored(uow).digest and after.startswith("v2:")
    assert full_check(uow, fabric_name=FABRIC).matches
