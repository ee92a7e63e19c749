"""Accepted peerings as snapshots carry them: who peers with whom on a fabric, and the P_Key.

Only accepted peerings are part of a snapshot (a pending request changes nothing); on InfiniBand
each holds the P_Key of its shared partition (`plan_partitions`' ``peering_keys``), on RoCE none.
A scoped snapshot takes the peerings `widen` read for its context
(tenancy/record/snapshot/common.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, Protocol

from sqlalchemy import Select, bindparam, or_, select
from sqlalchemy.orm import aliased
from sqlmodel import Session, col

from policies.policy import Peering
from tenancy import models as m

# An accepted peering and the P_Key of its partition (None on RoCE).
KeyedPeering = tuple[Peering, int | None]


class Scoped(Protocol):
    """A scoped snapshot's context (`common.Context`) as the peering reads use it."""

    @property
    def peerings(self) -> tuple[KeyedPeering, ...]:
        """The accepted peerings between the context's owners, resolved once."""


def accepted(
    session: Session, fabric: m.Fabric, context: Scoped | None = None
) -> tuple[KeyedPeering, ...]:
    """The fabric's accepted peerings with their keys, or the context's (sorted)."""
    if context is not None:
        return context.peerings
    rows = session.connection().execute(_OF_FABRIC, {"fabric": m.pk(fabric)})
    return _keyed(rows)


def peering_keys(
    session: Session, fabric: m.Fabric, context: Scoped | None = None
) -> dict[Peering, int]:
    """The P_Key of each accepted peering's partition (InfiniBand), whole fabric or context."""
    return {peering: key for peering, key in accepted(session, fabric, context) if key is not None}


def peerings_touching(
    session: Session, fabric_id: int, tenant_ids: Collection[int]
) -> tuple[tuple[KeyedPeering, ...], dict[str, int]]:
    """The accepted peerings on the fabric with a side among `tenant_ids`, and both sides' ids.

    `widen` adds the peers to a change's context: a peering's partition or route-target imports
    hold both tenants, so a change to one side is verified with the other side's ports.
    """
    if not tenant_ids:
        return (), {}
    values = {"fabric": fabric_id, "ids": sorted(tenant_ids)}
    rows = session.connection().execute(_OF_TENANTS, values).all()
    ids = {
        name: tenant_id
        for a, a_id, b, b_id, _ in rows
        for name, tenant_id in ((a, a_id or 0), (b, b_id or 0))
    }
    return _keyed(rows), ids


def accepted_peering_fabrics(tenant_id: int) -> Select[int]:
    """The fabrics whose snapshots carry an accepted peering of the tenant.

    A peered tenant's facts (kind, QoS class, own quota) are in its digest group there even
    where it holds nothing else (policies.digest `add_policy_facts`): a change of its facts
    is verified on those fabrics too.
    """
    return select(col(m.Peering.fabric_id)).where(
        col(m.Peering.state) == "accepted",
        or_(col(m.Peering.requester_id) == tenant_id, col(m.Peering.peer_id) == tenant_id),
    )


def _keyed(rows: Iterable[Any]) -> tuple[KeyedPeering, ...]:
    found = ((Peering.between(a, b), key) for a, _, b, _, key in rows)
    return tuple(sorted(found, key=lambda keyed: keyed[0]))


def _statement() -> Select[str, int | None, str, int | None, int | None]:
    """Accepted peerings of a fabric (``fabric``): each side's name and id, and the P_Key."""
    requester, peer = aliased(m.Tenant), aliased(m.Tenant)
    active_key = (col(m.Segment.peering_id) == col(m.Peering.id)) & (
        col(m.Segment.state) == "active"
    )
    return (
        select(
            col(requester.name),
            col(requester.id),
            col(peer.name),
            col(peer.id),
            col(m.Segment.value),
        )
        .select_from(m.Peering)
        .join(requester, col(requester.id) == col(m.Peering.requester_id))
        .join(peer, col(peer.id) == col(m.Peering.peer_id))
        .outerjoin(m.Segment, active_key)
        .where(col(m.Peering.fabric_id) == bindparam("fabric"), col(m.Peering.state) == "accepted")
    )


# Built once: every scoped check reads the peerings of its tenants.
_OF_FABRIC = _statement()
_OF_TENANTS = _statement().where(
    or_(
        col(m.Peering.requester_id).in_(bindparam("ids", expanding=True)),
        col(m.Peering.peer_id).in_(bindparam("ids", expanding=True)),
    )
)
