"""A full re-verification that disagrees is an alarm on the verification resource (issue 12)."""

from __future__ import annotations

from sqlalchemy import text

from tenancy.gate.full_check import full_check
from tests.builders import FABRIC, created, ok

VERIFICATION = f"/v1/fabrics/{FABRIC}/verification"


def test_a_disagreeing_full_check_shows_on_the_verification_until_a_change_rebuilds(
    client, onboarded, engine
):
    assert ok(client.get(VERIFICATION))["alarm"] is None
    with engine.begin() as connection:  # a digest the state does not have
        connection.execute(text("UPDATE fabric_digest SET digest = :d"), {"d": "v2:" + "1" * 64})

    check = full_check(client.app.state.uow, fabric_name=FABRIC)

    shown = client.get(VERIFICATION)
    assert shown.status_code == 200 and shown.json()["alarm"] == check.alarm
    assert "disagrees" in (check.alarm or "")
    created(client.post("/v1/tenants/globex/allocations", json={"fabric": FABRIC, "count": 1}))
    assert full_check(client.app.state.uow, fabric_name=FABRIC).matches
    assert ok(client.get(VERIFICATION))["alarm"] is None
