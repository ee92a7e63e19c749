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

from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, col, select

from policies.errors import ConflictError, InvalidValueError
from tenancy import models as m
from tenancy.record import partitions as rows
from tenancy.schemas import PartitionCreate
from tenancy.schemas.ufm import GuidsBody, HostsBody, PkeyBody, guid_text, pkey_text, stored_guid
from tenancy.store.locks import lock_active_tenant, lock_fabric
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.usecases import partitions
from tenancy.usecases import ufm_nodes as nodes
from tenancy.usecases.ufm_views import FacadeScope, infiniband_fabric, qos_of

# The fields a client may send that the partition's own settings (or the operator's QoS
# policy) decide: a different value is ignored and reported.
_FLAG_OF = {"index0": "index0", "ip_over_ib": "ipoib"}


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
    """What a P_Key is to the scope: its tenant's default or additional partition, or free."""

    pkey: int
    tenant: m.Tenant | None = None
    partition: m.Partition | None = None

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
        outcome = WriteOutcome(ignored=_ignored_flags(tx, target, body))
        wanted = body.wanted()
        assert target.tenant is not None
        outcome.changed = nodes.allocate_free_nodes(tx, scope, target.tenant, list(wanted))
        if target.is_default:
            _default_members(tx, scope, target, wanted, replace, outcome)
        else:
            _set_members(tx, scope, target, wanted, replace, outcome)
        return outcome


def remove_guids(
    uow: UnitOfWork, *, scope: FacadeScope, pkey: int, guids: list[int]
) -> WriteOutcome:
    """Remove GUIDs from a P_Key; a GUID that is not a member is a no-op."""
    with uow.transaction() as tx:
        target = _locked_target(tx, scope, pkey, create=None)
        outcome = WriteOutcome()
        if target.tenant is None:
            return outcome  # a free key has no members
        leaving = {stored_guid(g) for g in guids}
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
        return WriteOutcome(changed=False, ignored=_ignored_flags(tx, target, body))


def delete_pkey(uow: UnitOfWork, *, scope: FacadeScope, pkey: int) -> WriteOutcome:
    """Delete an additional partition (its key goes into quarantine); its own deleted key: no-op.

    A tenant's default partition ends with its last allocation, never here.
    """
    with uow.transaction() as tx:
        target = _locked_target(tx, scope, pkey, create=None)
        if target.tenant is None:
            if scope.tenant is not None and _own_quarantined(tx.session, scope, pkey):
                return WriteOutcome()
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
    with uow.transaction(read_only=True) as tx:
        target = _locked_target(tx, scope, body.pkey, create=None, lock=False)
        if target.tenant is None:
            raise unavailable(body.pkey)
        return WriteOutcome(ignored=_ignored_flags(tx, target, body))


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
    if target.tenant is None and create is not None:
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
        if "P_Key" in error.detail or "pkey" in error.detail.lower():
            raise unavailable(pkey) from error
        raise
    found = _target(tx.session, fabric, scope, pkey)
    if found.partition is not None:
        found.partition.label = body.partition_name or body.pkey_name_prefix
        tx.session.add(found.partition)
    return found


def _own_quarantined(session: Session, scope: FacadeScope, pkey: int) -> bool:
    query = (
        select(m.Segment.id)
        .join(m.Tenant, col(m.Tenant.id) == col(m.Segment.tenant_id))
        .join(m.Fabric, col(m.Fabric.id) == col(m.Segment.fabric_id))
        .where(
            m.Fabric.name == scope.fabric,
            m.Segment.kind == "pkey",
            m.Segment.value == pkey,
            m.Segment.state != "active",
            m.Tenant.name == scope.tenant,
        )
    )
    return session.exec(query).first() is not None


def _default_refusal(target: Target) -> InvalidValueError:
    return InvalidValueError(
        f"pkey {pkey_text(target.pkey)} is a tenant's default partition: its members are the "
        "ports of the tenant's nodes, which join with an allocation and leave with its "
        "release; use another P_Key for virtual GUIDs and explicit members",
        reason="default-partition",
    )


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
    # Only the GUIDs that join are admitted (`current` was read under the tenant's lock), and
    # no view is built: one GUID added to a partition of thousands costs one GUID's checks.
    partitions.replace_members_in(
        tx,
        tenant_name=target.tenant.name,
        name=target.partition.name,
        members=members,
        fabric=scope.fabric,
        joining=[guid for guid in members if guid not in current],
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


# --- flags -------------------------------------------------------------------------------------


def _ignored_flags(tx: Tx, target: Target, body: PkeyBody) -> dict[str, Any]:
    """Sent values that differ from the partition's own: the partition keeps its settings.

    Its flags are its own; its QoS is its class's (the operator's policy), shown as UFM's
    ``qos_conf``.
    """
    sent = body.sent_flags()
    ignored: dict[str, Any] = {}
    if target.partition is not None:
        for name, column in _FLAG_OF.items():
            if name in sent and sent[name] != getattr(target.partition, column):
                ignored[name] = sent[name]
    elif sent.get("index0"):
        ignored["index0"] = True  # a default partition is never an index0 partition
    own_qos = qos_of(_class_of(tx.session, target))
    ignored.update({k: v for k, v in sent.items() if k in own_qos and v != own_qos[k]})
    return ignored


def _class_of(session: Session, target: Target) -> m.QosClass | None:
    class_id = target.partition.qos_class_id if target.partition else None
    if class_id is None and target.tenant is not None:
        class_id = target.tenant.qos_class_id
    return None if class_id is None else session.get(m.QosClass, class_id)
