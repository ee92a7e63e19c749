"""Routes under /v1/tenants: onboard, list, read, patch and offboard tenants; their reachability."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, status

from api.deps import CurrentPrincipal, Listing, Uow, authorized_router
from api.params import TenantPath
from policies.authz import Role
from tenancy.gate import cached_reads
from tenancy.schemas import (
    Page,
    TenantCreate,
    TenantReachabilityView,
    TenantSummary,
    TenantView,
)
from tenancy.schemas.tenants import TenantPatch
from tenancy.usecases import tenant_patch, tenants

router = authorized_router(prefix="/v1/tenants", tags=["tenants"])


@router.post("", status_code=status.HTTP_201_CREATED)
def create_tenant(spec: TenantCreate, uow: Uow) -> TenantView:
    """Onboard a tenant (internal or external) with its QoS class."""
    return tenants.create_tenant(uow, spec=spec)


# The billing role gets a narrower shape than the declared one: serialize what the handler returns.
@router.get("", response_model=None, responses={200: {"model": Page[TenantView]}})
def list_tenants(
    uow: Uow,
    listing: Listing,
    principal: CurrentPrincipal,
    status_: Annotated[
        str | None,
        Query(
            alias="status",
            pattern="^(active|offboarded)$",
            description="Only tenants in this status: active, or offboarded (kept for audit "
            "and billing history); omitted: both",
        ),
    ] = None,
    kind: Annotated[
        str | None,
        Query(
            pattern="^(internal|external)$",
            description="Only tenants of this kind: internal (the operator's own teams) or "
            "external (customers); omitted: both",
        ),
    ] = None,
) -> Page[TenantView] | Page[TenantSummary]:
    """Tenants by name, optionally filtered by status or kind; a tenant role sees its own only,
    the billing role only names and billing accounts.
    """  # noqa: D205 - the published OpenAPI description, kept word for word
    page = tenants.list_tenants(
        uow,
        limit=listing.limit,
        cursor=listing.cursor,
        status=status_,
        kind=kind,
        only=principal.tenant,
    )
    if principal.role == Role.BILLING:
        return Page(data=[_summary(t) for t in page.data], count=page.count, next=page.next)
    return page


def _summary(view: TenantView) -> TenantSummary:
    return TenantSummary(name=view.name, billing_account=view.billing_account)


@router.get("/{tenant}", response_model=None, responses={200: {"model": TenantView}})
def get_tenant(
    tenant: TenantPath, uow: Uow, principal: CurrentPrincipal
) -> TenantView | TenantSummary:
    """One tenant (the billing role sees its name and billing account only)."""
    view = tenants.get_tenant(uow, name=tenant)
    return _summary(view) if principal.role == Role.BILLING else view


@router.get("/{tenant}/reachability")
def get_reachability(tenant: TenantPath, uow: Uow) -> TenantReachabilityView:
    """Per fabric where the tenant has segments: the reachability edges that involve it and
    whether the fabric's isolation verdict holds.
    """  # noqa: D205 - the published OpenAPI description, kept word for word
    return cached_reads.tenant_reachability(uow, tenant_name=tenant)


@router.patch("/{tenant}")
def patch_tenant(tenant: TenantPath, spec: TenantPatch, uow: Uow) -> TenantView:
    """Change a tenant's own node quota (`max_nodes`, null: its kind's), QoS class or billing
    account (operators); verified like any change: a class or quota the policy or the tenant's
    holdings refute is a 409 with the counterexamples.
    """  # noqa: D205 - the published OpenAPI description, kept word for word
    return tenant_patch.patch_tenant(uow, name=tenant, spec=spec)


@router.delete("/{tenant}")
def offboard_tenant(tenant: TenantPath, uow: Uow) -> TenantView:
    """Offboard: release all nodes, grants and segments; the record stays as `offboarded`."""
    return tenants.offboard_tenant(uow, name=tenant)
