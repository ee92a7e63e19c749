"""A shared service's P_Key on the UFM-compatible API: tenants reach it through grants.

A service's partition holds its own nodes as full members and the ports of every tenant granted
it as limited members (policies/infiniband/intent.py). A scheduler adding a tenant's ports to it
as limited members (the Together fork's storage partition) asks for that tenant's grant, which
the policy's service visibility then admits or refuses at verification; the grant covers every
port of the tenant, as a grant always does. Full memberships are the service's own: never
changed here. Removing a tenant's ports revokes its grant only when they are all of its ports
on the fabric; a grant cannot leave some of a tenant's ports in and others out.
"""

from __future__ import annotations

from collections import defaultdict

from sqlmodel import Session, col, select

from policies.errors import ConflictError, InvalidValueError
from tenancy import models as m
from tenancy.schemas import GrantCreate
from tenancy.schemas.ufm import guid_text, pkey_text
from tenancy.store.uow import Tx
from tenancy.usecases import shared_services
from tenancy.usecases.ufm_nodes import ports, tenant_ports
from tenancy.usecases.ufm_views import FacadeScope


def grant_for_ports(
    tx: Tx, scope: FacadeScope, service: m.Service, pkey: int, wanted: dict[str, bool]
) -> bool:
    """Grant the service to each tenant whose ports are `wanted` as limited members.

    Returns whether a grant was made. Refuses full members, and ports that are not a scope
    tenant's (a free node is not allocated for a service's key).
    """
    if any(wanted.values()):
        raise InvalidValueError(
            f"pkey {pkey_text(pkey)} is a shared service's partition: its full members are the "
            "service's own; a tenant's ports join it as limited members only",
            reason="service-full-member",
        )
    changed = False
    for tenant in _tenants_of(tx.session, scope, wanted, pkey):
        if _grant(tx.session, tenant, service) is None:
            spec = GrantCreate(fabric=scope.fabric, service=service.name)
            shared_services.grant_service_in(tx, tenant_name=tenant.name, spec=spec)
            changed = True
    return changed


def revoke_for_ports(tx: Tx, scope: FacadeScope, service: m.Service, leaving: set[str]) -> bool:
    """Revoke the grant of each tenant all of whose ports leave; a non-member is a no-op."""
    changed = False
    for tenant, guids in _holders(tx.session, scope, list(leaving)):
        grant = _grant(tx.session, tenant, service)
        if grant is None:
            continue
        own = set(tenant_ports(tx.session, scope.fabric, tenant))
        if own - guids:
            raise InvalidValueError(
                "a grant covers every port of a tenant: remove all of them (or none) from a "
                "shared service's partition",
                reason="partial-grant",
            )
        shared_services.revoke_grant_in(tx, tenant_name=tenant.name, grant_id=grant.id)
        changed = True
    return changed


def _tenants_of(
    session: Session, scope: FacadeScope, wanted: dict[str, bool], pkey: int
) -> list[m.Tenant]:
    held = _holders(session, scope, list(wanted))
    covered = {guid for _, guids in held for guid in guids}
    stray = sorted(set(wanted) - covered)
    if stray:
        shown = guid_text(int(stray[0], 16))
        raise ConflictError(
            f"port {shown} is not on a node of this token's tenants: only their ports join "
            f"pkey {pkey_text(pkey)}",
            guid=shown,
            reason="foreign-guid",
        )
    return sorted((tenant for tenant, _ in held), key=lambda t: t.name)


def _holders(
    session: Session, scope: FacadeScope, guids: list[str]
) -> list[tuple[m.Tenant, set[str]]]:
    """The scope's tenants holding nodes of `guids`, each with its GUIDs among them."""
    found: dict[int, set[str]] = defaultdict(set)
    for guid, holder in ports(session, scope.fabric, guids).items():
        if holder.tenant_id is not None:
            found[holder.tenant_id].add(guid)
    held = []
    for tenant_id, members in sorted(found.items()):
        tenant = session.get(m.Tenant, tenant_id)
        if tenant is not None and (scope.tenant is None or tenant.name == scope.tenant):
            held.append((tenant, members))
    return held


def _grant(session: Session, tenant: m.Tenant, service: m.Service) -> m.Grant | None:
    query = select(m.Grant).where(
        m.Grant.tenant_id == tenant.id,
        m.Grant.service_id == service.id,
        col(m.Grant.revoked_at).is_(None),
    )
    return session.exec(query).first()
