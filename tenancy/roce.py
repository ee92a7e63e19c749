"""RoCE fabrics in the system of record: settings, inventory import, segments and snapshots.

A tenant (or shared service) on a RoCE fabric holds one VRF segment: an L3VNI and its VLAN, one
L2 VLAN and L2VNI, a subnet from the fabric's tenant pool and a per-VRF RD index. Each value is
a `segment` row claimed from its pool (VLANs are fabric-wide; L2 and L3 VNIs share one pool so
they are unique across both), so the same race-free claim and quarantine rules as P_Keys apply.
"""

from __future__ import annotations

from collections import defaultdict
from ipaddress import IPv4Address, IPv4Network

from sqlalchemy import select as core_select
from sqlmodel import Session, col, select

from policies.errors import ValidationError
from policies.model import Owner
from policies.roce.model import (
    Link,
    Nic,
    RoceQos,
    RoceSettings,
    RoceSnapshot,
    Switch,
    SwitchPort,
    SwitchRole,
    VrfSegment,
    with_grant_imports,
)
from policies.roce.settings import check_roce_settings
from tenancy import models as m
from tenancy.db import fetch_all
from tenancy.keys import Pool, claim
from tenancy.schemas import IntRange, RoceFabricCreate, RoceFabricSettingsView, RoceSegmentView
from tenancy.uow import Tx

RD_POOL = (1, 65535)  # type-1 RD <loopback>:<index>: the index is 16 bits


def engine_settings(fabric: m.Fabric, row: m.RoceFabricSettings) -> RoceSettings:
    return RoceSettings(
        name=fabric.name,
        vlan_first=row.vlan_first,
        vlan_last=row.vlan_last,
        l2vni_first=row.l2vni_first,
        l2vni_last=row.l2vni_last,
        l3vni_first=row.l3vni_first,
        l3vni_last=row.l3vni_last,
        tenant_prefix_pool=IPv4Network(row.tenant_prefix_pool),
        tenant_prefix_length=row.tenant_prefix_length,
        rt_asn=row.rt_asn,
        host_mtu=row.host_mtu,
        underlay_mtu=row.underlay_mtu,
        anycast_gateway_mac=row.anycast_gateway_mac,
        max_lossless_priorities=row.max_lossless_priorities,
    )


def create_fabric_rows(tx: Tx, spec: RoceFabricCreate) -> m.Fabric:
    """Insert a RoCE fabric and its settings; inconsistent pools or limits are a 422."""
    row = m.RoceFabricSettings(
        fabric_id=0,
        vlan_first=spec.vlan_range.first,
        vlan_last=spec.vlan_range.last,
        l2vni_first=spec.l2vni_range.first,
        l2vni_last=spec.l2vni_range.last,
        l3vni_first=spec.l3vni_range.first,
        l3vni_last=spec.l3vni_range.last,
        tenant_prefix_pool=str(spec.tenant_prefix_pool),
        tenant_prefix_length=spec.tenant_prefix_length,
        rt_asn=spec.rt_asn,
        host_mtu=spec.host_mtu,
        underlay_mtu=spec.underlay_mtu,
        anycast_gateway_mac=spec.anycast_gateway_mac,
        max_lossless_priorities=spec.max_lossless_priorities,
    )
    fabric = m.Fabric(
        name=spec.name, kind="roce", pkey_first=0, pkey_last=0, pkeys_per_port=0, created_at=tx.now
    )
    problems = check_roce_settings(engine_settings(fabric, row))
    if problems:
        raise ValidationError("; ".join(problems), problems=problems)
    tx.session.add(fabric)
    tx.session.flush()
    row.fabric_id = m.pk(fabric)
    tx.session.add(row)
    tx.session.flush()
    return fabric


def settings_row(session: Session, fabric: m.Fabric) -> m.RoceFabricSettings:
    row = session.get(m.RoceFabricSettings, fabric.id)
    assert row is not None, "every RoCE fabric has a settings row"
    return row


def settings_view(row: m.RoceFabricSettings) -> RoceFabricSettingsView:
    return RoceFabricSettingsView(
        vlan_range=IntRange(first=row.vlan_first, last=row.vlan_last),
        l2vni_range=IntRange(first=row.l2vni_first, last=row.l2vni_last),
        l3vni_range=IntRange(first=row.l3vni_first, last=row.l3vni_last),
        tenant_prefix_pool=row.tenant_prefix_pool,
        tenant_prefix_length=row.tenant_prefix_length,
        rt_asn=row.rt_asn,
        host_mtu=row.host_mtu,
        underlay_mtu=row.underlay_mtu,
        anycast_gateway_mac=row.anycast_gateway_mac,
        max_lossless_priorities=row.max_lossless_priorities,
    )


# --- segments -----------------------------------------------------------------------------------


def _pools(row: m.RoceFabricSettings) -> tuple[Pool, ...]:
    pool = IPv4Network(row.tenant_prefix_pool)
    subnets = 2 ** (row.tenant_prefix_length - pool.prefixlen)
    return (
        Pool("vni", "l3vni", row.l3vni_first, row.l3vni_last, "L3VNI"),
        Pool("vlan", "vlan", row.vlan_first, row.vlan_last, "VLAN"),
        Pool("vlan", "l3vni_vlan", row.vlan_first, row.vlan_last, "VLAN"),
        Pool("vni", "l2vni", row.l2vni_first, row.l2vni_last, "L2VNI"),
        Pool("subnet", "subnet", 0, subnets - 1, "tenant subnet"),
        Pool("rd", "rd", *RD_POOL, "RD index"),
    )


def claim_vrf_segment(
    tx: Tx, fabric: m.Fabric, *, tenant_id: int | None = None, service_id: int | None = None
) -> None:
    """Claim every identifier of a VRF segment for a tenant or a service (all or nothing)."""
    for pool in _pools(settings_row(tx.session, fabric)):
        claim(tx, fabric, pool, tenant_id=tenant_id, service_id=service_id)


def _owned_values(
    session: Session,
    fabric_id: int,
    *,
    tenant_id: int | None = None,
    service_id: int | None = None,
) -> dict[str, int]:
    query = select(m.Segment).where(m.Segment.fabric_id == fabric_id, m.Segment.state == "active")
    if tenant_id is not None:
        query = query.where(m.Segment.tenant_id == tenant_id)
    if service_id is not None:
        query = query.where(m.Segment.service_id == service_id)
    return {s.purpose: s.value for s in session.exec(query)}


def has_vrf_segment(
    session: Session,
    fabric: m.Fabric,
    *,
    tenant_id: int | None = None,
    service_id: int | None = None,
) -> bool:
    values = _owned_values(session, m.pk(fabric), tenant_id=tenant_id, service_id=service_id)
    return "l3vni" in values


def _subnet(row: m.RoceFabricSettings, index: int) -> IPv4Network:
    pool = IPv4Network(row.tenant_prefix_pool)
    size = 2 ** (32 - row.tenant_prefix_length)
    return IPv4Network(
        f"{IPv4Address(int(pool.network_address) + index * size)}/{row.tenant_prefix_length}"
    )


def vrf_segment_view(
    session: Session,
    fabric: m.Fabric,
    *,
    tenant_id: int | None = None,
    service_id: int | None = None,
) -> RoceSegmentView | None:
    values = _owned_values(session, m.pk(fabric), tenant_id=tenant_id, service_id=service_id)
    if "l3vni" not in values:
        return None
    return RoceSegmentView(
        vrf=f"Vrf{values['l3vni']}",
        l3vni=values["l3vni"],
        l3vni_vlan=values["l3vni_vlan"],
        vlan=values["vlan"],
        l2vni=values["l2vni"],
        subnet=str(_subnet(settings_row(session, fabric), values["subnet"])),
    )


# --- snapshot -----------------------------------------------------------------------------------


def load_roce_snapshot(session: Session, fabric: m.Fabric) -> RoceSnapshot:
    """Rows -> RoceSnapshot for one fabric (bulk queries; this transaction's view)."""
    from tenancy.snapshot import grants_of, nodes_of  # shared with the InfiniBand loader

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
            _subnet(row, v["subnet"]),
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
