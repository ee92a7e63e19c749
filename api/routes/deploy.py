"""Routes under /v1/fabrics/{fabric}: deploy targets, their reports, sync status and drains."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Response, status

from api.deps import Listing, Uow, authorized_router
from api.params import FabricPath, NodePath
from tenancy.schemas import (
    SLUG_PATTERN,
    ForceDrain,
    Page,
    ReportCreate,
    ReportView,
    SyncView,
    TargetCreate,
    TargetView,
)
from tenancy.schemas.deploy import ForceDrainView
from tenancy.usecases import deploy, deploy_sync, drains

router = authorized_router(prefix="/v1/fabrics", tags=["deployment"])
TargetName = Annotated[
    str,
    Path(
        pattern=SLUG_PATTERN,
        description="The deploy target's name, a slug: the OpenSM host it is, e.g. 'sm01', or "
        "the RoCE leaf ('sonic' targets), e.g. 'leaf01'",
    ),
]


@router.put(
    "/{fabric}/targets/{name}",
    responses={201: {"model": TargetView, "description": "Registered"}},
)
def put_target(
    fabric: FabricPath, name: TargetName, spec: TargetCreate, uow: Uow, response: Response
) -> TargetView:
    """Register a deploy target (an OpenSM host, a RoCE leaf): 201 when new, 200 when known."""
    view, created = deploy.put_target(uow, fabric_name=fabric, name=name, spec=spec)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return view


@router.get("/{fabric}/targets")
def list_targets(fabric: FabricPath, uow: Uow, listing: Listing) -> Page[TargetView]:
    """The fabric's targets with their last reported state and role (master or standby)."""
    return deploy.list_targets(uow, fabric_name=fabric, limit=listing.limit, cursor=listing.cursor)


@router.get("/{fabric}/targets/{name}")
def get_target(fabric: FabricPath, name: TargetName, uow: Uow) -> TargetView:
    """One target with its last reported state, role, deployed digest and mismatches."""
    return deploy.get_target(uow, fabric_name=fabric, name=name)


@router.delete("/{fabric}/targets/{name}", status_code=status.HTTP_204_NO_CONTENT)
def delete_target(fabric: FabricPath, name: TargetName, uow: Uow) -> None:
    """Forget a target; drains that waited only for it complete.

    Not on RoCE those of hosts cabled to its leaf: nothing reads that leaf back any more, so they
    wait for a new target there, or a force-drain. Removing a fabric's last target ends every
    drain, as on a fabric that never had one.
    """
    deploy.delete_target(uow, fabric_name=fabric, name=name)


@router.post(
    "/{fabric}/targets/{name}/reports",
    status_code=status.HTTP_201_CREATED,
    responses={200: {"model": ReportView, "description": "A repeat of the target's state"}},
)
def post_report(
    fabric: FabricPath, name: TargetName, report: ReportCreate, uow: Uow, response: Response
) -> ReportView:
    """An agent's report of one cycle: 201 when it changed the target's state (audited)."""
    view = deploy.post_report(uow, fabric_name=fabric, target_name=name, report=report)
    if not view.changed_state:
        response.status_code = status.HTTP_200_OK
    return view


@router.get("/{fabric}/sync")
def get_sync(fabric: FabricPath, uow: Uow) -> SyncView:
    """The desired snapshot digest, whether every target applied it and who is behind.

    On RoCE also the phase published for the desired snapshot: 1 while a leaf that must remove
    access (ports leaving tenant VLANs, revoked route-target imports) has applied neither
    phase of it, then 2; and each leaf's phase and whether it must remove access first.
    """
    return deploy_sync.sync_status(uow, fabric_name=fabric)


@router.get("/{fabric}/deployments")
def list_deployments(fabric: FabricPath, uow: Uow, listing: Listing) -> Page[ReportView]:
    """Every report that changed a target's state (deploy receipts), oldest first."""
    return deploy.list_deployments(
        uow, fabric_name=fabric, limit=listing.limit, cursor=listing.cursor
    )


@router.post("/{fabric}/nodes/{node}/force-drain")
def force_drain(fabric: FabricPath, node: NodePath, spec: ForceDrain, uow: Uow) -> ForceDrainView:
    """Free a draining node without waiting for the deploy targets (audited, with a reason)."""
    state = drains.force_drain(uow, fabric_name=fabric, node_name=node, spec=spec)
    return ForceDrainView(node=node, state=state)
