"""Serialise the mutations of one fabric across processes.

Verify-before-commit checks a global property of the whole fabric (isolation, per-port key
budgets), so two transactions that each verify their own change could both commit and together
break it (write skew under READ COMMITTED). Every mutating use case therefore takes the fabric's
lock before it reads the state it decides on: a PostgreSQL transaction-scoped advisory lock (the
pattern NetBox uses for its available-ID endpoints); SQLite already serialises writers with
BEGIN IMMEDIATE (tenancy/db.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import text
from sqlmodel import Session

from tenancy import models as m

# First key of pg_advisory_xact_lock(int, int): the lock class for fabrics ("IF" in ASCII).
FABRIC_LOCK_CLASS = 0x4946


def lock_fabrics(session: Session, fabrics: Iterable[m.Fabric]) -> None:
    """Block until this transaction holds the mutation lock of each fabric (in id order)."""
    if session.get_bind().dialect.name != "postgresql":
        return
    for fabric_id in sorted({m.pk(f) for f in fabrics}):
        session.connection().execute(
            text("SELECT pg_advisory_xact_lock(:cls, :fabric)"),
            {"cls": FABRIC_LOCK_CLASS, "fabric": fabric_id},
        )


def lock_fabric(session: Session, fabric: m.Fabric) -> m.Fabric:
    """`lock_fabrics` for one fabric; returns it for chaining."""
    lock_fabrics(session, [fabric])
    return fabric
