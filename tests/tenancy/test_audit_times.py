"""Audit entry times never go backwards in index order (issue 10, item 15).

On PostgreSQL a transaction's time is read when it starts but its entry is appended in lock
order, so a change that started earlier could be logged after a later one with an earlier time.
The clock stepping back between two changes stands in for that interleaving on both backends.
"""

from tenancy.record import audit_log
from tenancy.schemas import TenantCreate
from tenancy.usecases import tenants


def test_entry_times_are_monotonic_in_index_order(uow, clock):
    tenants.create_tenant(uow, spec=TenantCreate(name="first", kind="internal"))
    clock.advance(-3600)  # the next change "started" an hour before the previous one was logged
    tenants.create_tenant(uow, spec=TenantCreate(name="second", kind="internal"))

    page = audit_log.list_entries(uow, limit=1000, cursor=None)
    times = [entry.time for entry in page.data]

    assert times == sorted(times)
    assert [e.target for e in page.data][-2:] == ["tenants/first", "tenants/second"]
