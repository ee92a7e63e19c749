"""Rows -> `IbSnapshot`: a handful of bulk queries per InfiniBand fabric."""

from __future__ import annotations

from sqlalchemy import Select, bindparam, select
from sqlmodel import Session, col

from policies.infiniband.intent import plan_partitions
from policies.infiniband.model import IbPort, IbSettings, IbSnapshot, Partition
from policies.infiniband.model import QosClass as QosClassValue
from policies.model import FabricKind
from tenancy import models as m
from tenancy.record.snapshot.common import (
    Context,
    grants_of,
    node_rows,
    scoped_values,
    segment_queries,
)
from tenancy.record.snapshot.partitions import additional_partitions, bound_virtual_guids
from tenancy.record.snapshot.peerings import peering_keys
from tenancy.record.snapshot.policy_inputs import policy_inputs
from tenancy.record.virtual_guids import setting_of


def load_ib_snapshot(
    session: Session, fabric: m.Fabric, context: Context | None = None
) -> IbSnapshot:
    """Read the fabric's current state (including this transaction's uncommitted changes).

    With a `context`, only its owners' nodes, ports, partitions, grants and accepted peerings
    between them (and its nodes), and no QoS classes: a scoped snapshot whose rules and owner
    and node digest groups match the whole fabric's for those owners
    (tenancy/record/snapshot/common.py `widen`).
    """
    session.flush()
    rows = node_rows(session, fabric, context)
    nodes = tuple(node for _, node in rows)
    ports = _ports(session, fabric, None if context is None else [i for i, _ in rows])
    tenant_keys, service_keys = _segments(session, fabric, context)
    additional = additional_partitions(session, fabric, context)
    grants = grants_of(session, fabric, context)
    peerings = peering_keys(session, fabric, context)
    policy = policy_inputs(
        session, fabric, context, nodes=nodes, grants=grants, segment_tenants=tenant_keys
    )
    return IbSnapshot(
        fabric=IbSettings(
            name=fabric.name,
            kind=FabricKind(fabric.kind),
            pkey_first=fabric.pkey_first,
            pkey_last=fabric.pkey_last,
            pkeys_per_port=fabric.pkeys_per_port,
            virtual_guids=bool(setting_of(fabric)["enabled"]),
        ),
        nodes=nodes,
        ports=ports,
        partitions=_sorted(
            plan_partitions(nodes, ports, tenant_keys, service_keys, grants, peerings) + additional
        ),
        grants=grants,
        # Only the fabric's digest group and rendering read the classes, never a scoped check.
        qos_classes=_qos_classes(session) if context is None else (),
        policy=policy.policy,
        tenants=policy.tenants,
        peerings=policy.peerings,
        virtual_guids=bound_virtual_guids(session, fabric, context),
    )


def _sorted(partitions: tuple[Partition, ...]) -> tuple[Partition, ...]:
    return tuple(sorted(partitions, key=lambda p: p.pkey))


def _ports(session: Session, fabric: m.Fabric, node_ids: list[int] | None) -> tuple[IbPort, ...]:
    if node_ids is None:
        found = session.connection().execute(_PORTS_OF_FABRIC, {"fabric": m.pk(fabric)})
    else:
        # The node ids are the fabric's.
        found = session.connection().execute(_PORTS_OF_NODES, {"nodes": node_ids})
    # Ordered by the database: a GUID is unique on a fabric, and its text (``0x`` and 16
    # lower-case hex digits) sorts as its number.
    return tuple(
        IbPort(int(guid, 16), node, hca, port, switch, switch_port)
        for guid, node, hca, port, switch, switch_port in found
    )


def _segments(
    session: Session, fabric: m.Fabric, context: Context | None
) -> tuple[dict[str, tuple[int, str | None]], dict[str, int]]:
    statement = _SEGMENTS[context is not None]
    rows = session.connection().execute(statement, scoped_values(fabric, context)).all()
    tenant_keys: dict[str, tuple[int, str | None]] = {
        t: (value, q) for value, t, q, _, purpose in rows if t is not None and purpose == "pkey"
    }
    service_keys = {s: value for value, _, _, s, _ in rows if s is not None}
    return tenant_keys, service_keys


def _qos_classes(session: Session) -> tuple[QosClassValue, ...]:
    rows = session.connection().execute(_QOS_CLASSES)
    return tuple(QosClassValue(*row) for row in rows)


def _ports_query() -> Select[str, str, str, int, str | None, int | None]:
    return select(
        col(m.Port.guid),
        col(m.Node.name),
        col(m.Port.hca),
        col(m.Port.port_num),
        col(m.Port.switch_name),
        col(m.Port.switch_port),
    ).join(m.Node, col(m.Node.id) == m.Port.node_id)


# Built once: loading a scoped snapshot runs prepared statements only.
_PORTS_OF_FABRIC = (
    _ports_query().where(col(m.Port.fabric_id) == bindparam("fabric")).order_by(col(m.Port.guid))
)
_PORTS_OF_NODES = (
    _ports_query()
    .where(col(m.Port.node_id).in_(bindparam("nodes", expanding=True)))
    .order_by(col(m.Port.guid))
)
_SEGMENTS = segment_queries(
    select(
        col(m.Segment.value),
        col(m.Tenant.name),
        col(m.QosClass.name),
        col(m.Service.name),
        col(m.Segment.purpose),
    )
    .select_from(m.Segment)
    .outerjoin(m.Tenant, col(m.Tenant.id) == m.Segment.tenant_id)
    .outerjoin(m.QosClass, col(m.QosClass.id) == m.Tenant.qos_class_id)
    .outerjoin(m.Service, col(m.Service.id) == m.Segment.service_id)
)
_QOS_CLASSES = select(
    col(m.QosClass.name),
    col(m.QosClass.ib_sl),
    col(m.QosClass.ib_rate),
    col(m.QosClass.ib_mtu),
    col(m.QosClass.vlarb_weight),
).order_by(col(m.QosClass.id))
