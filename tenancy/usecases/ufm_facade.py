"""The UFM-compatible API's writes: UFM's PKey operations as verified isofabric changes.

A P_Key is a tenant's default partition (its nodes' ports, following its allocations), one of
its additional partitions (explicit members), a shared service's (a tenant's ports join or leave
it as limited members only, by its grant: tenancy/usecases/ufm_services.py), a peering's (never
changed here), or unknown (tenancy/usecases/ufm_targets.py). Each operation runs in one
transaction through the use cases /v1 uses (allocation, partitions), so every change is verified
before commit, audited under the caller's principal, and part of the snapshots the deploy agents
apply. An operation that changes nothing commits nothing: an identical retry is a no-op.
Refusals never say whether a key the scope does not own is held, quarantined or outside the pool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, col, select

from policies.errors import InvalidValueError
from tenancy import models as m
from tenancy.record import audit_log
from tenancy.record import partitions as rows
from tenancy.schemas.ufm import (
    GuidsBody,
    HostsBody,
    PkeyBody,
    guid_text,
    pkey_text,
    stored_guid,
)
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.usecases import partitions
from tenancy.usecases import ufm_nodes as nodes
from tenancy.usecases import ufm_services as services
from tenancy.usecases.ufm_nodes import ORIGIN
from tenancy.usecases.ufm_targets import (
    Target,
    default_refusal,
    deleted_before,
    locked_target,
    unavailable,
)
from tenancy.usecases.ufm_views import FacadeScope, ignored_flags, infiniband_fabric


@dataclass
class WriteOutcome:
    """What a write did: whether it changed anything, and what it ignored (field -> sent)."""

    changed: bool = False
    ignored: dict[str, Any] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        """UFM answers an empty object; the ignored fields are reported beside it."""
        return {"ignored": self.ignored} if self.ignored else {}


def add_guids(
    uow: UnitOfWork, *, scope: FacadeScope, body: GuidsBody, replace: bool
) -> WriteOutcome:
    """Add GUIDs to a P_Key (POST merges) or make them its members (PUT replaces).

    An unknown key free in the fabric's pool becomes a partition of the scope's tenant. A port
    of a free compute node allocates the node to the tenant (quota, policy and verification
    apply; the allocation records the orchestrator as its origin).
    """
    with uow.transaction() as tx:
        target = locked_target(tx, scope, body.pkey, create=body)
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
        target = locked_target(tx, scope, pkey, create=None)
        outcome = WriteOutcome()
        leaving = {stored_guid(g) for g in guids}
        if target.service is not None:
            outcome.changed = services.revoke_for_ports(tx, scope, target.service, leaving)
            return outcome
        if target.tenant is None:
            return outcome  # a free key has no members
        if target.is_default:
            outcome.changed = nodes.release_from_default(
                tx, scope, target.tenant, leaving, default_refusal(target)
            )
            return outcome
        current = _members(tx.session, target)
        kept = {g: full for g, full in current.items() if g not in leaving}
        _write_members(tx, scope, target, current, kept, outcome)
        return outcome


def create_pkey(uow: UnitOfWork, *, scope: FacadeScope, body: PkeyBody) -> WriteOutcome:
    """``pkeys/add``: an empty partition of the scope's tenant; its own key again is a no-op."""
    with uow.transaction() as tx:
        target = locked_target(tx, scope, body.pkey, create=body)
        if target.service is not None:
            raise unavailable(body.pkey)
        return _reported(tx, scope, target, body)


def delete_pkey(uow: UnitOfWork, *, scope: FacadeScope, pkey: int) -> WriteOutcome:
    """Delete an additional partition (its key goes into quarantine); its own deleted key: no-op.

    A tenant's default partition ends with its last allocation, never here.
    """
    with uow.transaction() as tx:
        target = locked_target(tx, scope, pkey, create=None)
        if target.service is not None:
            raise unavailable(pkey)
        if target.tenant is None:
            if deleted_before(tx.session, scope, pkey):
                return WriteOutcome()  # a retry is a no-op for every scope
            raise unavailable(pkey)
        if target.is_default:
            raise default_refusal(target)
        assert target.partition is not None
        outcome = WriteOutcome(changed=True)
        leaving = set(_members(tx.session, target))
        partitions.delete_partition_in(
            tx, tenant_name=target.tenant.name, name=target.partition.name, fabric=scope.fabric
        )
        nodes.release_if_last(tx, scope, target.tenant, leaving)
        return outcome


def set_qos(uow: UnitOfWork, *, scope: FacadeScope, body: PkeyBody) -> WriteOutcome:
    """``qos_conf``: a partition's class is the operator's policy; other values are reported.

    A tenant's P_Key only: a shared service's class is no scheduler's to set (nor to be told).
    """
    with uow.transaction() as tx:
        target = locked_target(tx, scope, body.pkey, create=None, lock=False)
        if target.tenant is None:
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


def _service_members(
    tx: Tx, scope: FacadeScope, target: Target, wanted: dict[str, bool], replace: bool
) -> bool:
    """A service's key: grants for the tenants whose ports join (POST); never replaced (PUT).

    Its member list is the service's and every granted tenant's: no scheduler replaces it.
    """
    assert target.service is not None
    if replace:
        raise InvalidValueError(
            f"pkey {pkey_text(target.pkey)} is a shared service's partition: its members are not "
            "replaced; add a tenant's ports as limited members (POST) or remove them",
            reason="service-replace",
        )
    return services.grant_for_ports(tx, scope, target.service, target.pkey, wanted)


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
    """Make the partition's members `members`; emptied, a partition the facade made may go.

    Where the policy releases on last removal, a partition the orchestrator created is deleted
    when its last member leaves (a Slurm job's P_Key), so that finished jobs do not use up
    the tenant's `max_partitions`; its key is quarantined as any deleted partition's.
    """
    if members == current:
        return
    tenant, partition = target.tenant, target.partition
    assert tenant is not None and partition is not None
    name, fabric = partition.name, scope.fabric
    if not members and partition.origin == ORIGIN and nodes.releases(tx, tenant):
        partitions.delete_partition_in(tx, tenant_name=tenant.name, name=name, fabric=fabric)
    else:
        # Only the GUIDs that join are admitted (`current` was read under the tenant's lock),
        # and no view is built: one GUID added to a partition of thousands costs one GUID's.
        joining = [guid for guid in members if guid not in current]
        partitions.replace_members_in(
            tx, tenant_name=tenant.name, name=name, members=members, fabric=fabric, joining=joining
        )
    outcome.changed = True
    nodes.release_if_last(tx, scope, tenant, set(current) - set(members))


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
        raise default_refusal(target)
    if not all(wanted.values()):
        outcome.ignored["membership"] = "limited"
    if replace:
        own = set(nodes.tenant_ports(tx.session, scope.fabric, target.tenant))
        leaving = own - set(wanted)
        refusal = default_refusal(target)
        if nodes.release_from_default(tx, scope, target.tenant, leaving, refusal):
            outcome.changed = True
