"""Fetch-or-404 helpers shared by the use cases."""

from __future__ import annotations

from sqlalchemy import bindparam
from sqlmodel import Session, select

from policies.errors import NotFoundError
from tenancy.models import DeployTarget, Fabric, Node, QosClass, Service, Tenant
from tenancy.store.tx_memo import memo


def fabric_named(session: Session, name: str) -> Fabric:
    """Raises `NotFoundError` (a 404) if no fabric has this name."""
    # Fabrics are never renamed nor deleted: one found stays valid for the whole transaction.
    known = memo(session, "fabrics")
    fabric = known.get(name)
    if fabric is None:
        fabric = session.exec(_FABRIC, params={"name": name}).first()
        if fabric is None:
            raise NotFoundError(f"fabric '{name}' does not exist", resource="fabric", name=name)
        known[name] = fabric
    return fabric


def fabric_with_id(session: Session, fabric_id: int) -> Fabric:
    """The fabric a row refers to (a foreign key guarantees that it exists)."""
    fabric = session.get(Fabric, fabric_id)
    assert fabric is not None
    return fabric


def tenant_named(session: Session, name: str) -> Tenant:
    """Raises `NotFoundError` if no tenant has this name; offboarded tenants are returned too."""
    tenant = session.exec(_TENANT, params={"name": name}).first()
    if tenant is None:
        raise tenant_not_found(name)
    return known_tenant(session, tenant)


def known_tenant(session: Session, tenant: Tenant) -> Tenant:
    """Remember a tenant's id for the transaction (`tenant_ids`); returns it for chaining."""
    memo(session, "tenant_ids")[tenant.name] = tenant.id
    return tenant


def tenant_ids(session: Session) -> dict[str, int]:
    """The ids of the tenants this transaction looked up, by name.

    Tenants are never renamed nor deleted: an id found stays valid for the whole transaction.
    """
    return memo(session, "tenant_ids")


def tenant_not_found(name: str) -> NotFoundError:
    """The 404 of an unknown tenant name."""
    return NotFoundError(f"tenant '{name}' does not exist", resource="tenant", name=name)


def node_named(session: Session, fabric: Fabric, name: str) -> Node:
    """Raises `NotFoundError` if `fabric` has no node of this name (names are per fabric)."""
    node = session.exec(select(Node).where(Node.fabric_id == fabric.id, Node.name == name)).first()
    if node is None:
        raise NotFoundError(
            f"node '{name}' does not exist on fabric '{fabric.name}'", resource="node", name=name
        )
    return node


def service_named(session: Session, fabric: Fabric, name: str) -> Service:
    """Raises `NotFoundError` if `fabric` has no shared service of this name."""
    service = session.exec(
        select(Service).where(Service.fabric_id == fabric.id, Service.name == name)
    ).first()
    if service is None:
        raise NotFoundError(
            f"service '{name}' does not exist on fabric '{fabric.name}'",
            resource="service",
            name=name,
        )
    return service


def qos_class_named(session: Session, name: str) -> QosClass:
    """Raises `NotFoundError` (resource ``qos-class``) if no QoS class has this name."""
    # Classes are never renamed nor deleted: one found stays valid for the whole transaction.
    known = memo(session, "qos_classes")
    qos = known.get(name)
    if qos is None:
        qos = session.exec(select(QosClass).where(QosClass.name == name)).first()
        if qos is None:
            raise NotFoundError(
                f"QoS class '{name}' does not exist", resource="qos-class", name=name
            )
        known[name] = qos
    return qos


def target_row(session: Session, fabric: Fabric, name: str) -> DeployTarget | None:
    """The fabric's deploy target `name`, or None."""
    query = select(DeployTarget).where(
        DeployTarget.fabric_id == fabric.id, DeployTarget.name == name
    )
    return session.exec(query).first()


def target_named(session: Session, fabric: Fabric, name: str) -> DeployTarget:
    """The fabric's target `name`, or `NotFoundError`."""
    row = target_row(session, fabric, name)
    if row is None:
        raise NotFoundError(
            f"fabric '{fabric.name}' has no target '{name}'", resource="target", name=name
        )
    return row


# Built once: nearly every request looks a tenant or a fabric up by name.
_TENANT = select(Tenant).where(Tenant.name == bindparam("name"))
_FABRIC = select(Fabric).where(Fabric.name == bindparam("name"))
