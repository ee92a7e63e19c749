"""Demo data for `isofabric serve --demo`: an InfiniBand and a RoCE fabric, three tenants each."""

from __future__ import annotations

from contextlib import suppress

from sqlmodel import select

from policies.errors import ConflictError
from tenancy import models as m
from tenancy.schemas import (
    AllocationCreate,
    FabricCreate,
    GrantCreate,
    NodePatch,
    PKeyRange,
    RoceFabricCreate,
    ServiceCreate,
    TenantCreate,
)
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, fabrics, nodes, shared_services, tenants, topology

DEMO_FABRIC = "ib-east"
DEMO_ROCE_FABRIC = "roce-west"
DEMO_TENANTS = (
    ("acme", "external", "gold"),
    ("research", "internal", "silver"),
    ("globex", "external", "bronze"),
)


def _exists(uow: UnitOfWork, name: str) -> bool:
    with uow.transaction() as tx:
        return tx.session.exec(select(m.Fabric).where(m.Fabric.name == name)).first() is not None


def load_demo(
    uow: UnitOfWork, *, topology_text: str, roce_inventory_text: str | None = None
) -> bool:
    """Create the demo fabrics that do not exist yet; True if anything was created.

    ib-east (InfiniBand, from ibnetdiscover output) and, given its inventory, roce-west (RoCE):
    on each, tenants acme (gold), research (silver) and globex (bronze) hold two nodes and a
    storage service on stor01/stor02 is granted to acme. A demo tenant that was offboarded stays
    offboarded and gets nothing on a fabric created now.
    """
    created = False
    if not _exists(uow, DEMO_FABRIC):
        fabrics.create_fabric(
            uow,
            spec=FabricCreate(
                name=DEMO_FABRIC,
                kind="infiniband",
                pkey_range=PKeyRange(first="0x0100", last="0x7ffe"),
            ),
        )
        topology.import_topology(uow, fabric_name=DEMO_FABRIC, text=topology_text)
        nodes.set_node_role(
            uow, fabric_name=DEMO_FABRIC, node_name="sm01", patch=NodePatch(role="management")
        )
        _onboard(uow, DEMO_FABRIC)
        created = True
    if roce_inventory_text is not None and not _exists(uow, DEMO_ROCE_FABRIC):
        fabrics.create_fabric(uow, spec=RoceFabricCreate(name=DEMO_ROCE_FABRIC, kind="roce"))
        topology.import_document(
            uow,
            fabric_name=DEMO_ROCE_FABRIC,
            media_type="application/json",
            text=roce_inventory_text,
        )
        _onboard(uow, DEMO_ROCE_FABRIC)
        created = True
    return created


def _onboard(uow: UnitOfWork, fabric: str) -> None:
    for storage in ("stor01", "stor02"):
        nodes.set_node_role(
            uow, fabric_name=fabric, node_name=storage, patch=NodePatch(role="storage")
        )
    shared_services.create_service(
        uow, fabric_name=fabric, spec=ServiceCreate(name="storage", nodes=["stor01", "stor02"])
    )
    active = [name for name, kind, qos in DEMO_TENANTS if _active_tenant(uow, name, kind, qos)]
    for name in active:
        allocations.allocate(uow, tenant_name=name, spec=AllocationCreate(fabric=fabric, count=2))
    if "acme" in active:
        shared_services.grant_service(
            uow, tenant_name="acme", spec=GrantCreate(fabric=fabric, service="storage")
        )


def _active_tenant(uow: UnitOfWork, name: str, kind: str, qos: str) -> bool:
    """Onboard a demo tenant unless it exists; whether it is active (not offboarded).

    A database the worked examples changed may hold a demo tenant offboarded: the demo leaves
    it so and loads only what is missing.
    """
    with suppress(ConflictError):  # the tenant exists (e.g. on another fabric): reuse it
        tenants.create_tenant(uow, spec=TenantCreate(name=name, kind=kind, qos_class=qos))
    return tenants.get_tenant(uow, name=name).status == "active"
