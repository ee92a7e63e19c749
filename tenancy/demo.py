"""Demo data for `isofabric serve --demo`: one fabric, three tenants, storage granted to one."""

from __future__ import annotations

from contextlib import suppress

from sqlmodel import select

from policies.errors import ConflictError
from tenancy import allocations, fabrics, nodes, services, tenants, topology
from tenancy import models as m
from tenancy.schemas import (
    AllocationCreate,
    FabricCreate,
    GrantCreate,
    NodePatch,
    PKeyRange,
    ServiceCreate,
    TenantCreate,
)
from tenancy.uow import UnitOfWork

DEMO_FABRIC = "ib-east"
DEMO_TENANTS = (
    ("acme", "external", "gold"),
    ("research", "internal", "silver"),
    ("globex", "external", "bronze"),
)


def load_demo(uow: UnitOfWork, topology_text: str) -> bool:
    """Create the demo state unless the demo fabric already exists; True if it was created."""
    with uow.transaction() as tx:
        if tx.session.exec(select(m.Fabric).where(m.Fabric.name == DEMO_FABRIC)).first():
            return False
    fabrics.create_fabric(
        uow,
        FabricCreate(
            name=DEMO_FABRIC, kind="infiniband", pkey_range=PKeyRange(first="0x0100", last="0x7ffe")
        ),
    )
    topology.import_topology(uow, DEMO_FABRIC, topology_text)
    nodes.set_node_role(uow, DEMO_FABRIC, "sm01", NodePatch(role="management"))
    for storage in ("stor01", "stor02"):
        nodes.set_node_role(uow, DEMO_FABRIC, storage, NodePatch(role="storage"))
    services.create_service(
        uow, DEMO_FABRIC, ServiceCreate(name="storage", nodes=["stor01", "stor02"])
    )
    for name, kind, qos in DEMO_TENANTS:
        with suppress(ConflictError):  # the tenant exists (e.g. on another fabric): reuse it
            tenants.create_tenant(uow, TenantCreate(name=name, kind=kind, qos_class=qos))
        allocations.allocate(uow, name, AllocationCreate(fabric=DEMO_FABRIC, count=2))
    services.grant_service(uow, "acme", GrantCreate(fabric=DEMO_FABRIC, service="storage"))
    return True
