"""Rows -> `RoceSnapshot`: switches, links, NICs, VRF segments and QoS of one RoCE fabric."""

from __future__ import annotations

from collections import defaultdict
from ipaddress import IPv4Address

from sqlalchemy import or_
from sqlalchemy import select as core_select
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from policies.model import Owner
from policies.roce.model import (
    Link,
    Nic,
    RoceQos,
    RoceSnapshot,
    Switch,
    SwitchPort,
    SwitchRole,
    VrfSegment,
    with_grant_imports,
)
from tenancy import models as m
from tenancy.db import fetch_all
from tenancy.roce import engine_settings, settings_row, subnet_at
from tenancy.snapshot.common import (
    Context,
    grants_of,
    node_rows,
    scoped_values,
    segment_queries,
)


def load_roce_snapshot(
    session: Session, fabric: m.Fabric, context: Context | None = None
) -> RoceSnapshot:
    """Rows -> RoceSnapshot for one fabric (bulk queries; this transaction's view).

    With a `context`, only its owners' nodes, NICs, segments and grants between them, the
    switches those NICs are cabled to with their links, and the QoS classes any segment of the
    fabric uses (they share its queues and PFC budget): see tenancy/snapshot/common.py `widen`.
    """
    session.flush()
    row = settings_row(session, fabric)
    settings = engine_settings(fabric, row)
    grants = grants_of(session, fabric, context)
    segments = _segments(session, fabric, row, context)
    rows = node_rows(session, fabric, context)
    nics = _nics(session, fabric, None if context is None else [i for i, _ in rows])
    switch_names = None if context is None else {n.switch for n in nics}
    return RoceSnapshot(
        fabric=settings,
        switches=_switches(session, fabric, switch_names),
        links=_links(session, fabric, switch_names),
        nodes=tuple(node for _, node in rows),
        nics=nics,
        segments=with_grant_imports(segments, grants, settings.rt_asn),
        grants=grants,
        qos_classes=_qos(session, _used_classes(session, fabric)),
    )


def _used_classes(session: Session, fabric: m.Fabric) -> set[str | None]:
    """The QoS classes of the fabric's active segments (one query, however many segments)."""
    rows = fetch_all(
        session,
        core_select(col(m.QosClass.name))
        .distinct()
        .select_from(m.Segment)
        .outerjoin(m.Tenant, col(m.Tenant.id) == col(m.Segment.tenant_id))
        .outerjoin(m.QosClass, col(m.QosClass.id) == col(m.Tenant.qos_class_id))
        .where(col(m.Segment.fabric_id) == fabric.id, col(m.Segment.state) == "active"),
    )
    return {name for (name,) in rows}


def _switches(session: Session, fabric: m.Fabric, names: set[str] | None) -> tuple[Switch, ...]:
    wanted = [col(m.RoceSwitch.fabric_id) == fabric.id]
    if names is not None:
        wanted.append(col(m.RoceSwitch.name).in_(names))
    ports: dict[int, list[SwitchPort]] = defaultdict(list)
    for switch_id, name, lanes, speed, cable in fetch_all(
        session,
        core_select(
            col(m.RoceSwitchPort.switch_id),
            col(m.RoceSwitchPort.name),
            col(m.RoceSwitchPort.lanes),
            col(m.RoceSwitchPort.speed),
            col(m.RoceSwitchPort.cable_length),
        )
        .join(m.RoceSwitch, col(m.RoceSwitch.id) == col(m.RoceSwitchPort.switch_id))
        .where(*wanted),
    ):
        ports[switch_id].append(SwitchPort(name, lanes, speed, cable))
    switches = session.exec(select(m.RoceSwitch).where(*wanted).order_by(col(m.RoceSwitch.id)))
    return tuple(
        Switch(
            s.name,
            SwitchRole(s.role),
            s.asn,
            IPv4Address(s.loopback),
            IPv4Address(s.vtep) if s.vtep else None,
            tuple(sorted(ports[m.pk(s)], key=lambda p: p.name)),
            s.platform,
        )
        for s in switches
    )


def _links(session: Session, fabric: m.Fabric, names: set[str] | None) -> tuple[Link, ...]:
    """The fabric's links, or those with an end on one of the named switches."""
    a_port, b_port = aliased(m.RoceSwitchPort), aliased(m.RoceSwitchPort)
    a_switch, b_switch = aliased(m.RoceSwitch), aliased(m.RoceSwitch)
    query = (
        core_select(col(a_switch.name), col(a_port.name), col(b_switch.name), col(b_port.name))
        .select_from(m.RoceLink)
        .join(a_port, col(a_port.id) == col(m.RoceLink.a_port_id))
        .join(a_switch, col(a_switch.id) == col(a_port.switch_id))
        .join(b_port, col(b_port.id) == col(m.RoceLink.b_port_id))
        .join(b_switch, col(b_switch.id) == col(b_port.switch_id))
        .where(col(m.RoceLink.fabric_id) == fabric.id)
        .order_by(col(m.RoceLink.id))
    )
    if names is not None:
        query = query.where(or_(col(a_switch.name).in_(names), col(b_switch.name).in_(names)))
    return tuple(Link(*row) for row in fetch_all(session, query))


def _nics(session: Session, fabric: m.Fabric, node_ids: list[int] | None) -> tuple[Nic, ...]:
    query = (
        core_select(
            col(m.Node.name), col(m.Nic.name), col(m.RoceSwitch.name), col(m.RoceSwitchPort.name)
        )
        .join(m.Node, col(m.Node.id) == col(m.Nic.node_id))
        .join(m.RoceSwitchPort, col(m.RoceSwitchPort.id) == col(m.Nic.switch_port_id))
        .join(m.RoceSwitch, col(m.RoceSwitch.id) == col(m.RoceSwitchPort.switch_id))
        .where(
            col(m.Nic.fabric_id) == fabric.id
            if node_ids is None
            else col(m.Nic.node_id).in_(node_ids)  # the node ids are the fabric's
        )
        .order_by(col(m.Nic.id))
    )
    return tuple(Nic(*row) for row in fetch_all(session, query))


def _segments(
    session: Session, fabric: m.Fabric, row: m.RoceFabricSettings, context: Context | None
) -> tuple[VrfSegment, ...]:
    statement = _SEGMENTS[context is not None]
    values: dict[Owner, dict[str, int]] = defaultdict(dict)
    qos: dict[Owner, str | None] = {}
    for purpose, value, tenant, qos_name, service in session.connection().execute(
        statement, scoped_values(fabric, context)
    ):
        owner = Owner.tenant(tenant) if tenant is not None else Owner.service(service)
        values[owner][purpose] = value
        qos[owner] = qos_name
    return tuple(
        VrfSegment(
            owner,
            f"Vrf{v['l3vni']}",
            v["l3vni"],
            v["l3vni_vlan"],
            v["vlan"],
            v["l2vni"],
            subnet_at(row, v["subnet"]),
            v["rd"],
            qos[owner],
        )
        for owner, v in values.items()
        if "l3vni" in v
    )


def _qos(session: Session, used: set[str | None]) -> tuple[RoceQos, ...]:
    """The classes the fabric's segments use: only those share its queues and PFC budget."""
    return tuple(
        RoceQos(
            q.name,
            q.roce_dscp,
            q.roce_tc,
            q.lossless,
            q.ets_weight,
            q.ecn_min_bytes,
            q.ecn_max_bytes,
            q.ecn_probability,
        )
        for q in session.exec(select(m.QosClass))
        if q.name in used
    )


# Built once (see tenancy/snapshot/common.py `segment_queries`).
_SEGMENTS = segment_queries(
    core_select(
        col(m.Segment.purpose),
        col(m.Segment.value),
        col(m.Tenant.name),
        col(m.QosClass.name),
        col(m.Service.name),
    )
    .select_from(m.Segment)
    .outerjoin(m.Tenant, col(m.Tenant.id) == col(m.Segment.tenant_id))
    .outerjoin(m.QosClass, col(m.QosClass.id) == col(m.Tenant.qos_class_id))
    .outerjoin(m.Service, col(m.Service.id) == col(m.Segment.service_id))
)
