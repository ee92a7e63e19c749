"""Rows -> `RoceSnapshot`: switches, links, NICs, VRF segments and QoS of one RoCE fabric."""

from __future__ import annotations

from collections import defaultdict
from ipaddress import IPv4Address

from sqlalchemy import select as core_select
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
from tenancy.snapshot.common import grants_of, nodes_of


def load_roce_snapshot(session: Session, fabric: m.Fabric) -> RoceSnapshot:
    """Rows -> RoceSnapshot for one fabric (bulk queries; this transaction's view)."""
    session.flush()
    row = settings_row(session, fabric)
    settings = engine_settings(fabric, row)
    grants = grants_of(session, fabric)
    segments = _segments(session, fabric, row)
    return RoceSnapshot(
        fabric=settings,
        switches=_switches(session, fabric),
        links=_links(session, fabric),
        nodes=nodes_of(session, fabric),
        nics=_nics(session, fabric),
        segments=with_grant_imports(segments, grants, settings.rt_asn),
        grants=grants,
        qos_classes=_qos(session, {s.qos_class for s in segments}),
    )


def _switches(session: Session, fabric: m.Fabric) -> tuple[Switch, ...]:
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
        .where(col(m.RoceSwitch.fabric_id) == fabric.id),
    ):
        ports[switch_id].append(SwitchPort(name, lanes, speed, cable))
    switches = session.exec(select(m.RoceSwitch).where(m.RoceSwitch.fabric_id == fabric.id))
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


def _port_names(session: Session, fabric: m.Fabric) -> dict[int, tuple[str, str]]:
    rows = fetch_all(
        session,
        core_select(col(m.RoceSwitchPort.id), col(m.RoceSwitch.name), col(m.RoceSwitchPort.name))
        .join(m.RoceSwitch, col(m.RoceSwitch.id) == col(m.RoceSwitchPort.switch_id))
        .where(col(m.RoceSwitch.fabric_id) == fabric.id),
    )
    return {port_id: (switch, port) for port_id, switch, port in rows}


def _links(session: Session, fabric: m.Fabric) -> tuple[Link, ...]:
    names = _port_names(session, fabric)
    links = session.exec(select(m.RoceLink).where(m.RoceLink.fabric_id == fabric.id))
    return tuple(Link(*names[x.a_port_id], *names[x.b_port_id]) for x in links)


def _nics(session: Session, fabric: m.Fabric) -> tuple[Nic, ...]:
    names = _port_names(session, fabric)
    rows = fetch_all(
        session,
        core_select(col(m.Node.name), col(m.Nic.name), col(m.Nic.switch_port_id))
        .join(m.Node, col(m.Node.id) == col(m.Nic.node_id))
        .where(col(m.Nic.fabric_id) == fabric.id),
    )
    return tuple(Nic(node, nic, *names[port_id]) for node, nic, port_id in rows)


def _segments(
    session: Session, fabric: m.Fabric, row: m.RoceFabricSettings
) -> tuple[VrfSegment, ...]:
    rows = fetch_all(
        session,
        core_select(
            col(m.Segment.purpose),
            col(m.Segment.value),
            col(m.Tenant.name),
            col(m.QosClass.name),
            col(m.Service.name),
        )
        .outerjoin(m.Tenant, col(m.Tenant.id) == col(m.Segment.tenant_id))
        .outerjoin(m.QosClass, col(m.QosClass.id) == col(m.Tenant.qos_class_id))
        .outerjoin(m.Service, col(m.Service.id) == col(m.Segment.service_id))
        .where(col(m.Segment.fabric_id) == fabric.id, col(m.Segment.state) == "active"),
    )
    values: dict[Owner, dict[str, int]] = defaultdict(dict)
    qos: dict[Owner, str | None] = {}
    for purpose, value, tenant, qos_name, service in rows:
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
