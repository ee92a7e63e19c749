"""Use cases for consented peerings between two tenants on one fabric.

A tenant (its tenant-admin or an operator) requests a peering with another tenant on a fabric;
the peer (its tenant-admin or an operator) accepts it; either side ends it, which also withdraws
or declines a pending request. Every route is under the acting tenant, so tenant-scoped
authorization and 404-for-others hold unchanged. Only an accepted peering that the policy allows
connects the two (an intended edge): on InfiniBand a partition of its own, whose P_Key is taken
on acceptance (within both tenants' shares of the pool when a tenant role accepts:
tenancy/record/pool_shares.py) and released when the peering ends (tenancy/record/quarantine.py);
on RoCE route-target imports between the two VRFs. Decisions:

- Neither tenant needs to hold nodes on the fabric, at request or acceptance: requiring it would
  tell a requester where another tenant runs. A peering applies to whatever both hold there.
- An unknown and an offboarded peer are the same 404; the policy (`Policy.may_peer`) is checked
  at request and again at acceptance (a 409 naming the rule ``policy-peering``), and the
  verifier refuses any state holding an accepted peering the policy does not allow.
- One open (requested or accepted) peering per fabric and pair of tenants, in either direction.

Every change passes the commit gate with both tenants in its scope and is audited
(``peering.request``, ``peering.accept``, ``peering.end``); offboarding a tenant ends its
peerings (`end_tenant_peerings`, from tenancy/usecases/releases.py).
"""

from __future__ import annotations

import uuid
from typing import TypeVar

from sqlalchemy import ColumnElement, or_
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from policies.authz import TENANT_ROLES
from policies.errors import ConflictError, InvalidValueError, NotFoundError
from policies.infiniband.model import format_pkey
from policies.model import Owner
from policies.verdict import Rule
from tenancy import models as m
from tenancy.gate.change_check import ChangeScope
from tenancy.gate.verification import commit_gate
from tenancy.record.policy_store import current_policy
from tenancy.record.pools import take_for_peering
from tenancy.record.quarantine import release_segment
from tenancy.schemas import Page, SegmentView
from tenancy.schemas.peerings import PeeringCreate, PeeringState, PeeringView
from tenancy.store.locks import lock_active_tenant, lock_fabric, lock_tenant
from tenancy.store.lookups import fabric_named, fabric_with_id, tenant_named
from tenancy.store.pagination import page_rows
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.technology import technology_of

REQUESTED, ACCEPTED, ENDED = "requested", "accepted", "ended"
R = TypeVar("R")


def request_peering(uow: UnitOfWork, *, tenant_name: str, spec: PeeringCreate) -> PeeringView:
    """Ask `spec.peer` to peer with tenant `tenant_name` on `spec.fabric`: a pending request.

    Raises:
        InvalidValueError: the tenant names itself as the peer.
        NotFoundError: the tenant, the fabric or an active peer of that name does not exist.
        ConflictError: the tenant is offboarded, the policy does not allow the two kinds to
            peer (``rule`` ``policy-peering``), or the two have an open peering on the fabric.
    """
    with uow.transaction() as tx:
        requester, peer = _lock_pair(tx.session, tenant_name, spec.peer)
        fabric = lock_fabric(tx.session, fabric_named(tx.session, spec.fabric))
        _check_requestable(tx, requester, peer)
        _refuse_open_twin(tx.session, fabric, requester, peer)
        peering = _new_request(tx, fabric, requester, peer)
        _gate(tx, fabric, peering, "peering.request", tenant_name)
        return peering_view(tx.session, peering)


def _new_request(tx: Tx, fabric: m.Fabric, requester: m.Tenant, peer: m.Tenant) -> m.Peering:
    peering = m.Peering(
        id=str(uuid.uuid4()),
        fabric_id=m.pk(fabric),
        requester_id=m.pk(requester),
        peer_id=m.pk(peer),
        state=REQUESTED,
        requested_at=tx.now,
        requested_by=_by(tx),
    )
    tx.session.add(peering)
    tx.session.flush()
    return peering


def _lock_pair(session: Session, tenant_name: str, peer_name: str) -> tuple[m.Tenant, m.Tenant]:
    """Both tenants, locked shared (an offboarding waits); the peer must be active."""
    if peer_name == tenant_name:
        raise InvalidValueError(f"tenant '{tenant_name}' cannot peer with itself", name=peer_name)
    requester = lock_active_tenant(session, tenant_name)
    try:
        peer = lock_tenant(session, peer_name)
    except NotFoundError:
        peer = None
    if peer is None or peer.status != "active":
        # One answer for unknown and offboarded peers: a requester learns no tenant's status.
        raise _no_peer(peer_name)
    return requester, peer


def _no_peer(peer_name: str) -> NotFoundError:
    return NotFoundError(
        f"no active tenant '{peer_name}' to peer with", resource="tenant", name=peer_name
    )


def _check_requestable(tx: Tx, requester: m.Tenant, peer: m.Tenant) -> None:
    """`_check_allowed`; to a tenant role a peer the policy rules out is a missing one.

    Tenant roles cannot list other tenants: a 409 naming the peering rule would tell them that
    the tenant exists and its kind, which a 404 for an unknown name would not.
    """
    try:
        _check_allowed(tx.session, requester, peer)
    except ConflictError as refused:
        if tx.principal.role in TENANT_ROLES:
            raise _no_peer(peer.name) from refused
        raise


def _check_allowed(session: Session, requester: m.Tenant, peer: m.Tenant) -> None:
    policy = current_policy(session)
    if not policy.may_peer(requester.kind, peer.kind):
        raise ConflictError(
            f"the policy (version {policy.version}) does not let {requester.kind} tenant "
            f"'{requester.name}' peer with tenant '{peer.name}' (rule "
            f"{Rule.PEERING_NOT_ALLOWED.value}); nothing was changed",
            rule=Rule.PEERING_NOT_ALLOWED.value,
            policy_version=policy.version,
        )


def _refuse_open_twin(
    session: Session, fabric: m.Fabric, requester: m.Tenant, peer: m.Tenant
) -> None:
    """409 if the two have an open peering on the fabric, in either direction.

    The caller holds the fabric's lock; the partial unique index `uq_peering_open` is the
    backstop for the same direction.
    """
    pair = (m.pk(requester), m.pk(peer))
    twin = session.exec(
        _open(select(m.Peering)).where(
            m.Peering.fabric_id == fabric.id,
            or_(
                (col(m.Peering.requester_id) == pair[0]) & (col(m.Peering.peer_id) == pair[1]),
                (col(m.Peering.requester_id) == pair[1]) & (col(m.Peering.peer_id) == pair[0]),
            ),
        )
    ).first()
    if twin is not None:
        raise ConflictError(
            f"tenants '{requester.name}' and '{peer.name}' already have an open peering on "
            f"fabric '{fabric.name}' ({twin.state})",
            peering=twin.id,
        )


def accept_peering(uow: UnitOfWork, *, tenant_name: str, peering_id: str) -> PeeringView:
    """The peer accepts a pending request: the two tenants reach each other, verified first.

    On InfiniBand the peering's partition gets a P_Key from the fabric's range.

    Raises:
        NotFoundError: no pending request `peering_id` is addressed to the tenant.
        ConflictError: either tenant is offboarded, or the policy does not allow the peering.
        PoolExhaustedError: no free P_Key is left on the fabric.
        PoolShareExceededError: a tenant role accepts, and either tenant holds its share of
            the fabric's P_Keys.
        IsolationViolationError: the resulting state does not verify; nothing was changed.
    """
    with uow.transaction() as tx:
        peer = lock_active_tenant(tx.session, tenant_name)
        peering = _request_to(tx.session, peer, peering_id)
        requester = lock_active_tenant(tx.session, _tenant_name(tx.session, peering.requester_id))
        fabric = lock_fabric(tx.session, fabric_with_id(tx.session, peering.fabric_id))
        tx.session.refresh(peering)  # it may have been ended while we waited
        if peering.state != REQUESTED:  # accepted or ended by a concurrent request
            raise NotFoundError(
                f"peering request '{peering_id}' is no longer pending", resource="peering"
            )
        _check_allowed(tx.session, requester, peer)
        _accept(tx, fabric, peering)
        _gate(tx, fabric, peering, "peering.accept", tenant_name)
        return peering_view(tx.session, peering)


def _accept(tx: Tx, fabric: m.Fabric, peering: m.Peering) -> None:
    """Mark the peering accepted; claim what it holds of its own (InfiniBand: a P_Key)."""
    peering.state, peering.accepted_at, peering.accepted_by = ACCEPTED, tx.now, _by(tx)
    tx.session.add(peering)
    tx.session.flush()
    pool = technology_of(fabric.kind).peering_pool
    if pool is not None:
        take_for_peering(tx, fabric, pool(fabric), peering_id=peering.id)


def _request_to(session: Session, tenant: m.Tenant, peering_id: str) -> m.Peering:
    peering = session.get(m.Peering, peering_id)
    if peering is None or peering.peer_id != tenant.id or peering.state != REQUESTED:
        raise NotFoundError(
            f"tenant '{tenant.name}' has no peering request '{peering_id}'", resource="peering"
        )
    return peering


def end_peering(uow: UnitOfWork, *, tenant_name: str, peering_id: str) -> None:
    """Either side ends an open peering: withdraws or declines a request, or disconnects.

    An accepted peering's P_Key is released like any key: quarantined, or free at once if no
    deploy target can have received it (tenancy/record/quarantine.py).

    Raises:
        NotFoundError: the tenant has no open peering `peering_id`.
    """
    with uow.transaction() as tx:
        tenant = tenant_named(tx.session, tenant_name)
        peering = _peering_of(tx.session, tenant, peering_id, "open")
        fabric = lock_fabric(tx.session, fabric_with_id(tx.session, peering.fabric_id))
        tx.session.refresh(peering)  # it may have been ended while we waited
        if peering.state == ENDED:
            raise NotFoundError(f"peering '{peering_id}' was ended meanwhile", resource="peering")
        _end(tx, fabric, peering, tenant_name)


def _end(tx: Tx, fabric: m.Fabric, peering: m.Peering, tenant_name: str) -> None:
    peering.state, peering.ended_at, peering.ended_by = ENDED, tx.now, _by(tx)
    tx.session.add(peering)
    held = select(m.Segment).where(m.Segment.peering_id == peering.id, m.Segment.state == "active")
    for segment in list(tx.session.exec(held)):
        release_segment(tx, segment)
    tx.session.flush()
    _gate(tx, fabric, peering, "peering.end", tenant_name)


def open_peering_fabric_ids(session: Session, tenant: m.Tenant) -> set[int]:
    """The fabrics on which the tenant has an open peering (offboarding locks them)."""
    query = _open(select(m.Peering.fabric_id)).where(_involves(tenant))
    return set(session.exec(query).all())


def end_tenant_peerings(tx: Tx, tenant: m.Tenant) -> None:
    """End every open peering of `tenant` (offboarding), each verified and audited.

    The caller holds the tenant's lock exclusively and the lock of every fabric in
    `open_peering_fabric_ids`.
    """
    query = _open(select(m.Peering)).where(_involves(tenant)).order_by(col(m.Peering.id))
    for peering in list(tx.session.exec(query)):
        _end(tx, fabric_with_id(tx.session, peering.fabric_id), peering, tenant.name)


def _gate(tx: Tx, fabric: m.Fabric, peering: m.Peering, action: str, tenant_name: str) -> None:
    """Verify and audit a peering's change; both tenants' groups and reach are touched."""
    sides = [_tenant_name(tx.session, t) for t in (peering.requester_id, peering.peer_id)]
    scope = ChangeScope.of(Owner.tenant(name) for name in sides)
    commit_gate(tx, fabric, action, f"tenants/{tenant_name}/peerings/{peering.id}", scope)


def _by(tx: Tx) -> str:
    return tx.principal.name


# --- reads -------------------------------------------------------------------------------------


def list_peerings(
    uow: UnitOfWork,
    *,
    tenant_name: str,
    limit: int,
    cursor: str | None,
    state: PeeringState = "open",
) -> Page[PeeringView]:
    """The tenant's peerings in `state`, requested by it or addressed to it, in id order."""
    with uow.transaction(read_only=True) as tx:
        tenant = tenant_named(tx.session, tenant_name)
        query = _in_state(select(m.Peering).where(_involves(tenant)), state)
        return _page(tx.session, query, limit, cursor)


def list_peering_requests(
    uow: UnitOfWork, *, tenant_name: str, limit: int, cursor: str | None
) -> Page[PeeringView]:
    """The pending requests addressed to the tenant (the ones it may accept), in id order."""
    with uow.transaction(read_only=True) as tx:
        tenant = tenant_named(tx.session, tenant_name)
        query = select(m.Peering).where(
            m.Peering.peer_id == tenant.id, m.Peering.state == REQUESTED
        )
        return _page(tx.session, query, limit, cursor)


def _page(
    session: Session, query: SelectOfScalar[m.Peering], limit: int, cursor: str | None
) -> Page[PeeringView]:
    rows, total, after = page_rows(session, query, col(m.Peering.id), limit, cursor)
    return Page(data=[peering_view(session, p) for p in rows], count=total, next=after)


def _peering_of(
    session: Session, tenant: m.Tenant, peering_id: str, state: PeeringState
) -> m.Peering:
    """One of the tenant's peerings (either side) in `state`; anything else is a 404."""
    peering = session.get(m.Peering, peering_id)
    if (
        peering is None
        or tenant.id not in (peering.requester_id, peering.peer_id)
        or not _is_in_state(peering.state, state)
    ):
        raise NotFoundError(
            f"tenant '{tenant.name}' has no peering '{peering_id}'", resource="peering"
        )
    return peering


def peering_view(session: Session, peering: m.Peering) -> PeeringView:
    """The API shape of a peering, with its partition's P_Key while it holds one."""
    key = session.exec(
        select(m.Segment.value).where(
            m.Segment.peering_id == peering.id, m.Segment.state == "active"
        )
    ).first()
    return PeeringView(
        id=peering.id,
        fabric=fabric_with_id(session, peering.fabric_id).name,
        requester=_tenant_name(session, peering.requester_id),
        peer=_tenant_name(session, peering.peer_id),
        state=peering.state,
        segment=None if key is None else SegmentView(pkey=format_pkey(key)),
        requested_at=peering.requested_at,
        requested_by=peering.requested_by,
        accepted_at=peering.accepted_at,
        accepted_by=peering.accepted_by,
        ended_at=peering.ended_at,
        ended_by=peering.ended_by,
    )


def _tenant_name(session: Session, tenant_id: int) -> str:
    tenant = session.get(m.Tenant, tenant_id)
    assert tenant is not None  # a foreign key guarantees it
    return tenant.name


def _involves(tenant: m.Tenant) -> ColumnElement[bool]:
    return or_(col(m.Peering.requester_id) == tenant.id, col(m.Peering.peer_id) == tenant.id)


def _open(query: SelectOfScalar[R]) -> SelectOfScalar[R]:
    return query.where(m.Peering.state != ENDED)


def _in_state(query: SelectOfScalar[m.Peering], state: PeeringState) -> SelectOfScalar[m.Peering]:
    if state == "all":
        return query
    if state == "open":
        return _open(query)
    return query.where(m.Peering.state == state)


def _is_in_state(current: str, state: PeeringState) -> bool:
    return state == "all" or current == state or (state == "open" and current != ENDED)
