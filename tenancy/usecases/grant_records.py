"""A grant's record: the one place a grant row is written, with its usage, gate and audit.

Used by `shared_services` (an operator's grant) and `default_grants` (the grants a tenant's
kind gets on its first allocation on a fabric).
"""

from __future__ import annotations

import uuid

from tenancy import models as m
from tenancy.gate.change_check import ChangeScope
from tenancy.gate.verification import commit_gate
from tenancy.store.uow import Tx
from tenancy.usecases import usage


def record_grant(tx: Tx, tenant: m.Tenant, fabric: m.Fabric, service: m.Service) -> m.Grant:
    """Grant `service` to `tenant`: the row, its usage interval, the commit gate, the audit.

    The caller holds the tenant's and the fabric's locks and checked that no grant is open.
    """
    grant = m.Grant(
        id=str(uuid.uuid4()),
        tenant_id=m.pk(tenant),
        fabric_id=m.pk(fabric),
        service_id=m.pk(service),
        created_at=tx.now,
    )
    tx.session.add(grant)
    tx.session.flush()
    usage.open_grant_interval(tx, tenant, fabric, service, grant.id)
    # The tenant's group holds its grants; the service's partition or VRF gains only derived
    # memberships or imports, and `widen` brings the service into the verified context.
    target = f"tenants/{tenant.name}/grants/{grant.id}"
    commit_gate(tx, fabric, "grant.create", target, ChangeScope.tenant(tenant.name))
    return grant
