"""The UFM-compatible API's writes: UFM's PKey operations as verified isofabric changes.

A P_Key is a tenant's default partition (its nodes' ports, following its allocations), one of
its additional partitions (explicit members), a service's or a peering's (changed through grants
and peerings, never here), or unknown. Each operation runs in one transaction through the use
cases /v1 uses (allocation, partitions), so every change is verified before commit, audited under
the caller's principal, and part of the snapshots the deploy agents apply. An operation that
changes nothing commits nothing: an identical retry is a no-op. Refusals never say whether a key
the scope does not own is held, quarantined or outside the pool.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from sqlmodel import Session, col, select

from policies.errors import ConflictError, InvalidValueError
from tenancy import models as m
from tenancy.record import audit_log
from tenancy.record import partitions as rows
from tenancy.schemas import MemberSpec, PartitionCreate
from tenancy.schemas.ufm import GuidsBody, HostsBody, PkeyBody, guid_text, pkey_text, stored_guid
from tenancy.store.locks import lock_active_tenant, lock_fabric
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.usecases import partitions
from tenancy.usecases import ufm_nodes as nodes
from tenancy.usecases import ufm_services as services
from tenancy.usecases.ufm_views import FacadeScope, ignored_flags, infiniband_fabric


@dataclass
class WriteOutcome:
    """What a write did: whether it changed anything, and what it ignored (field -> sent)."""

    changed: bool = False
    ignored: dict[str, Any] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        """UFM answers an empty object; the ignored fields are reported beside it."""
        return {"ignored": self.ignored} if self.ignored else {}


@dataclass(frozen=True, slots=True)
class Target:
    """What a P_Key is to the scope: a tenant's partition, a shared service's, or free."""

    pkey: int
    tenant: m.Tenant | None = None
    partition: m.Partition | None = None
    service: m.Service | None = None
    created: bool = False  # by this request

    @property
    def is_default(self) -> bool:
        """The tenant's default partition (its nodes' ports)."""
        return self.tenant is not None and self.partition is None


def unavailable(pkey: int) -> InvalidValueError:
    """The one refusal for a key the scope may not use: it does not say why."""
    return InvalidValueError(
        f"pkey {pkey_text(pkey)} is not available: it is outside the fabric's pool, reserved, or "
        "not a partition of this token's tenants",
        reason="pkey-unavailable",
    )


def add_guids(
    uow: UnitOfWork, *, scope: FacadeScope, body: GuidsBody, replace: bool
) -> WriteOutcome:
    """Add GUIDs to a P_Key (POST merges) or make them its members (PUT replaces).

    An unknown key free in the fabric's pool becomes a partition of the scope's tenant. A port
    of a free compute node allocates the node to the tenant (quota, policy and verification
    apply; the allocation records the orchestrator as its origin).
    """
    with uow.transaction() as tx:
        target = _locked_target(tx, scope, body.pkey, create=body)
        outcome = WriteOutcome(
            changed=target.created,
            ignored=ignored_flags(tx.session, target.partition, target.tenant, body),
        )
        _change_members(tx, scope, target, body.wanted(), replace, outcome)
        _audit_ignored(tx, scope, target.pkey, outcome)
        return outcome


def _change_members(
    tx: Tx,
    scope: FacadeScope,
    target: Target,
    wanted: dict[str, bool],
    replace: bool,
    outcome: WriteOutcome,
) -> None:
    if target.service is not None:
        if _service_members(tx, scope, target, wanted, replace):
            outcome.changed = True
        return
    assert target.tenant is not None
    if nodes.allocate_free_nodes(tx, scope, target.tenant, list(wanted)):
        outcome.changed = True
    if target.is_default:
        _default_members(tx, scope, target, wanted, replace, outcome)
    else:
        _set_members(tx, scope, target, wanted, replace, outcome)


def remove_guids(
    uow: UnitOfWork, *, scope: FacadeScope, pkey: int, guids: list[int]
) -> WriteOutcome:
    """Remove GUIDs from a P_Key; a GUID that is not a member is a no-op."""
    with uow.transaction() as tx:
        target = _locked_target(tx, scope, pkey, create=None)
        outcome = WriteOutcome()
        leaving = {stored_guid(g) for g in guids}
        if target.service is not None:
            outcome.changed = services.revoke_for_ports(tx, scope, target.service, leaving)
            return outcome
        if target.tenant is None:
            return outcome  # a free key has no members
        if target.is_default:
            outcome.changed = nodes.release_from_default(
                tx, scope, target.tenant, leaving, _default_refusal(target)
            )
            return outcome
        current = _members(tx.session, target)
        kept = {g: full for g, full in current.items() if g not in leaving}
        _write_members(tx, scope, target, current, kept, outcome)
        return outcome


def create_pkey(uow: UnitOfWork, *, scope: FacadeScope, body: PkeyBody) -> WriteOutcome:
    """``pkeys/add``: an empty partition of the scope's tenant; its own key again is a no-op."""
    with uow.transaction() as tx:
        target = _locked_target(tx, scope, body.pkey, create=body)
        if target.service is not None:
            raise unavailable(body.pkey)
        return _reported(tx, scope, target, body)


def delete_pkey(uow: UnitOfWork, *, scope: FacadeScope, pkey: int) -> WriteOutcome:
    """Delete an additional partition (its key goes into quarantine); its own deleted key: no-op.

    A tenant's default partition ends with its last allocation, never here.
    """
    with uow.transaction() as tx:
        target = _locked_target(tx, scope, pkey, create=None)
        if target.service is not None:
            raise unavailable(pkey)
        if target.tenant is None:
            if _deleted_before(tx.session, scope, pkey):
                return WriteOutcome()  # a retry is a no-op for every scope
            raise unavailable(pkey)
        if target.is_default:
            raise _default_refusal(target)
        assert target.partition is not None
        outcome = WriteOutcome(changed=True)
        leaving = set(_members(tx.session, target))
        partitions.delete_partition_in(
            tx, tenant_name=target.tenant.name, name=target.partition.name, fabric=scope.fabric
        )
        nodes.release_if_last(tx, scope, target.tenant, leaving)
        return outcome


def set_qos(uow: UnitOfWork, *, scope: FacadeScope, body: PkeyBody) -> WriteOutcome:
    """``qos_conf``: a partition's class is the operator's policy; other values are reported."""
    with uow.transaction() as tx:
        target = _locked_target(tx, scope, body.pkey, create=None, lock=False)
        if target.tenant is None and target.service is None:
            raise unavailable(body.pkey)
        return _reported(tx, scope, target, body)


def host_guids(uow: UnitOfWork, *, scope: FacadeScope, hosts: list[str]) -> list[int]:
    """Every CA port GUID of the named hosts (nodes) of the scope's fabric."""
    with uow.transaction(read_only=True) as tx:
        fabric = infiniband_fabric(tx.session, scope.fabric)
        query = (
            select(m.Node.name, m.Port.guid)
            .join(m.Port, col(m.Port.node_id) == col(m.Node.id))
            .where(m.Node.fabric_id == fabric.id, col(m.Node.name).in_(hosts))
        )
        found = list(tx.session.exec(query))
    missing = sorted(set(hosts) - {name for name, _ in found})
    if missing:
        raise InvalidValueError(
            f"host {missing[0]!r} is not a node of fabric '{scope.fabric}'", host=missing[0]
        )
    return sorted(int(guid, 16) for _, guid in found)


def add_hosts(uow: UnitOfWork, *, scope: FacadeScope, body: HostsBody) -> WriteOutcome:
    """``pkeys/hosts``: add every CA port of the hosts (Slurm's prolog)."""
    guids = host_guids(uow, scope=scope, hosts=body.hosts_names)
    request = GuidsBody.model_validate(
        body.model_dump(exclude={"hosts_names", "pkey"})
        | {"pkey": str(body.pkey), "guids": [guid_text(g) for g in guids]}
    )
    return add_guids(uow, scope=scope, body=request, replace=False)


def _reported(tx: Tx, scope: FacadeScope, target: Target, body: PkeyBody) -> WriteOutcome:
    ignored = ignored_flags(tx.session, target.partition, target.tenant, body)
    outcome = WriteOutcome(changed=target.created, ignored=ignored)
    _audit_ignored(tx, scope, target.pkey, outcome)
    return outcome


def _audit_ignored(tx: Tx, scope: FacadeScope, pkey: int, outcome: WriteOutcome) -> None:
    """Beside a change, an entry saying which sent values the partition's settings overrode.

    Only beside a change: an identical retry (ib-kubernetes sends ``index0`` with every add)
    writes nothing, this entry included.
    """
    if not outcome.ignored or not outcome.changed:
        return
    fields = ",".join(f"{name}={value}" for name, value in sorted(outcome.ignored.items()))
    target = f"fabrics/{scope.fabric}/pkeys/{pkey_text(pkey)}#ignored:{fields}"
    audit_log.record(tx, "ufm.fields-ignored", target[:512])


# --- resolving a P_Key -------------------------------------------------------------------------


def _locked_target(
    tx: Tx, scope: FacadeScope, pkey: int, *, create: PkeyBody | None, lock: bool = True
) -> Target:
    """What `pkey` is to the scope, under the tenant's and the fabric's locks (lock order).

    With `create`, an unknown key free in the pool becomes a partition of the scope's tenant.
    """
    fabric = infiniband_fabric(tx.session, scope.fabric)
    target = _target(tx.session, fabric, scope, pkey)
    if lock:
        name = target.tenant.name if target.tenant else scope.tenant
        if name is not None:
            lock_active_tenant(tx.session, name)
        lock_fabric(tx.session, fabric)
        target = _target(tx.session, fabric, scope, pkey)  # as it is under the locks
    if target.tenant is None and target.service is None and create is not None:
        target = _create(tx, fabric, scope, pkey, create)
    return target


def _target(session: Session, fabric: m.Fabric, scope: FacadeScope, pkey: int) -> Target:
    segment = session.exec(
        select(m.Segment).where(
            m.Segment.fabric_id == fabric.id,
            m.Segment.kind == "pkey",
            m.Segment.value == pkey,
            m.Segment.state == "active",
        )
    ).first()
    if segment is None:
        return Target(pkey)
    if segment.service_id is not None:
        return Target(pkey, service=session.get(m.Service, segment.service_id))
    tenant = session.get(m.Tenant, segment.tenant_id) if segment.tenant_id else None
    if tenant is None or segment.peering_id is not None or not _in_scope(scope, tenant):
        raise unavailable(pkey)
    if segment.purpose == "pkey":
        return Target(pkey, tenant)
    partition = session.exec(
        select(m.Partition).where(m.Partition.segment_id == segment.id)
    ).first()
    if partition is None:
        raise unavailable(pkey)
    return Target(pkey, tenant, partition)


def _in_scope(scope: FacadeScope, tenant: m.Tenant) -> bool:
    return scope.tenant is None or tenant.name == scope.tenant


def _create(tx: Tx, fabric: m.Fabric, scope: FacadeScope, pkey: int, body: PkeyBody) -> Target:
    """A new partition of the scope's tenant holding `pkey` (free in the pool, or its own)."""
    if scope.tenant is None:
        raise InvalidValueError(
            f"pkey {pkey_text(pkey)} is not a partition yet, and a fabric-wide token cannot "
            "create one: it does not say for which tenant (use a tenant's orchestrator token)",
            reason="pkey-unavailable",
        )
    if not fabric.pkey_first <= pkey <= fabric.pkey_last:
        raise unavailable(pkey)
    spec = PartitionCreate(
        fabric=fabric.name,
        name=f"pkey-0x{pkey:x}",
        pkey=f"0x{pkey:x}",
        ipoib=True if body.ip_over_ib is None else body.ip_over_ib,
        index0=bool(body.index0),
    )
    try:
        partitions.create_partition_in(tx, tenant_name=scope.tenant, spec=spec)
    except ConflictError as error:
        # Held or quarantined for another owner (tenancy/record/partitions.py names the key):
        # one refusal that does not say which. The tenant's own limits pass through.
        if "pkey" in error.extensions:
            raise unavailable(pkey) from error
        raise
    found = _target(tx.session, fabric, scope, pkey)
    if found.partition is not None:
        found.partition.label = body.partition_name or body.pkey_name_prefix
        tx.session.add(found.partition)
    return replace(found, created=True)


def _deleted_before(session: Session, scope: FacadeScope, pkey: int) -> bool:
    """Whether `pkey` may be one the scope deleted: free in the pool, or quarantined for it.

    A deleted key no deploy target enforced is free at once; saying that a key of the pool is
    free tells nothing `pkeys/add` would not (it creates a partition on a free key only).
    """
    fabric = infiniband_fabric(session, scope.fabric)
    if not fabric.pkey_first <= pkey <= fabric.pkey_last:
        return False
    held = session.exec(
        select(m.Segment.id).where(
            m.Segment.fabric_id == fabric.id, m.Segment.kind == "pkey", m.Segment.value == pkey
        )
    ).first()
    return held is None or _own_quarantined(session, scope, pkey)


def _own_quarantined(session: Session, scope: FacadeScope, pkey: int) -> bool:
    """Whether `pkey` is quarantined for the scope's tenant (any tenant: a fabric-wide scope)."""
    query = (
        select(m.Segment.id)
        .join(m.Tenant, col(m.Tenant.id) == col(m.Segment.tenant_id))
        .join(m.Fabric, col(m.Fabric.id) == col(m.Segment.fabric_id))
        .where(
            m.Fabric.name == scope.fabric,
            m.Segment.kind == "pkey",
            m.Segment.value == pkey,
            m.Segment.state != "active",
        )
    )
    if scope.tenant is not None:
        query = query.where(m.Tenant.name == scope.tenant)
    return session.exec(query).first() is not None


def _default_refusal(target: Target) -> InvalidValueError:
    return InvalidValueError(
        f"pkey {pkey_text(target.pkey)} is a tenant's default partition: its members are the "
        "ports of the tenant's nodes, which join with an allocation and leave with its "
        "release; use another P_Key for virtual GUIDs and explicit members",
        reason="default-partition",
    )


def _service_members(
    tx: Tx, scope: FacadeScope, target: Target, wanted: dict[str, bool], replace: bool
) -> bool:
    """A service's key: grants for the tenants whose ports join; PUT revokes those left out."""
    assert target.service is not None
    changed = False
    if replace and scope.tenant is not None:
        tenant = lock_active_tenant(tx.session, scope.tenant)
        own = set(nodes.tenant_ports(tx.session, scope.fabric, tenant))
        if not own & set(wanted):
            changed = services.revoke_for_ports(tx, scope, target.service, own)
    if wanted:
        changed = (
            services.grant_for_ports(tx, scope, target.service, target.pkey, wanted) or changed
        )
    return changed


# --- members -----------------------------------------------------------------------------------


def _members(session: Session, target: Target) -> dict[str, bool]:
    assert target.partition is not None
    return {row.guid: row.full for row in rows.members_of(session, m.pk(target.partition))}


def _set_members(
    tx: Tx,
    scope: FacadeScope,
    target: Target,
    wanted: dict[str, bool],
    replace: bool,
    outcome: WriteOutcome,
) -> None:
    current = _members(tx.session, target)
    members = dict(wanted) if replace else current | wanted
    _write_members(tx, scope, target, current, members, outcome)


def _write_members(
    tx: Tx,
    scope: FacadeScope,
    target: Target,
    current: dict[str, bool],
    members: dict[str, bool],
    outcome: WriteOutcome,
) -> None:
    if members == current:
        return
    assert target.tenant is not None and target.partition is not None
    specs = [
        MemberSpec(guid=guid, membership="full" if full else "limited")
        for guid, full in members.items()
    ]
    partitions.set_members_in(
        tx,
        tenant_name=target.tenant.name,
        name=target.partition.name,
        members=specs,
        fabric=scope.fabric,
    )
    outcome.changed = True
    nodes.release_if_last(tx, scope, target.tenant, set(current) - set(members))


def _default_members(
    tx: Tx,
    scope: FacadeScope,
    target: Target,
    wanted: dict[str, bool],
    replace: bool,
    outcome: WriteOutcome,
) -> None:
    """The default partition holds the tenant's ports, full: no virtual GUID, nothing limited."""
    assert target.tenant is not None
    found = nodes.ports(tx.session, scope.fabric, list(wanted))
    if any(guid not in found for guid in wanted):
        raise _default_refusal(target)
    if not all(wanted.values()):
        outcome.ignored["membership"] = "limited"
    if replace:
        own = set(nodes.tenant_ports(tx.session, scope.fabric, target.tenant))
        leaving = own - set(wanted)
        refusal = _default_refusal(target)
        if nodes.release_from_default(tx, scope, target.tenant, leaving, refusal):
            outcome.changed = True
