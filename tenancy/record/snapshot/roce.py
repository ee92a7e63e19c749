"""Rows -> `RoceSnapshot`: switches, links, NICs, VRF segments and QoS of one RoCE fabric."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from ipaddress import IPv4Address
from typing import Any, NamedTuple

from sqlalchemy import CompoundSelect, Select, bindparam, or_, union_all
from sqlalchemy import select as core_select
from sqlalchemy.orm import aliased
from sqlmodel import Session, col

from policies.model import Owner, OwnerKind
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
from policies.roce.verify_qos import deployable_classes
from tenancy import models as m
from tenancy.record.snapshot.common import (
    Context,
    grants_of,
    node_rows,
    scoped_values,
    segment_queries,
)
from tenancy.record.snapshot.policy_inputs import policy_inputs
from tenancy.record.vrf_segments import engine_settings, settings_row, subnet_at


def load_roce_snapshot(
    session: Session, fabric: m.Fabric, context: Context | None = None
) -> RoceSnapshot:
    """Rows -> RoceSnapshot for one fabric (bulk queries; this transaction's view).

    With a `context`, only its owners' nodes, NICs, segments and grants between them, the
    switches those NICs are cabled to with the ports they use and the links on those ports
    (`_context_cabling`), and every QoS class with RoCE parameters (`_roce_classes`: they
    share the fabric's queues and PFC budget): see tenancy/record/snapshot/common.py `widen`.
    """
    session.flush()
    row = settings_row(session, fabric)
    settings = engine_settings(fabric, row)
    grants = grants_of(session, fabric, context)
    segments = _segments(session, fabric, row, context)
    rows = node_rows(session, fabric, context)
    cabling = (
        _fabric_cabling(session, fabric)
        if context is None
        else _context_cabling(session, [i for i, _ in rows])
    )
    nodes = tuple(node for _, node in rows)
    owners = (s.owner for s in segments)
    policy = policy_inputs(
        session,
        fabric,
        context,
        nodes=nodes,
        grants=grants,
        segment_tenants=[o.name for o in owners if o.kind is OwnerKind.TENANT],
    )
    carried, defined = _qos(session, fabric, settings.max_lossless_priorities)
    return RoceSnapshot(
        fabric=settings,
        switches=cabling.switches,
        links=cabling.links,
        nodes=nodes,
        nics=cabling.nics,
        segments=with_grant_imports(segments, grants, settings.rt_asn, policy.peerings),
        grants=grants,
        qos_classes=carried,
        defined_qos_classes=defined,
        policy=policy.policy,
        tenants=policy.tenants,
        peerings=policy.peerings,
    )


class _Cabling(NamedTuple):
    """What places a snapshot's NICs: the NICs, their switches (with ports) and links."""

    nics: tuple[Nic, ...]
    switches: tuple[Switch, ...]
    links: tuple[Link, ...]


def _fabric_cabling(session: Session, fabric: m.Fabric) -> _Cabling:
    """Every NIC, switch (with all its ports) and link of the fabric."""
    values = {"fabric": m.pk(fabric)}
    connection = session.connection()
    nics = tuple(Nic(*row) for row in connection.execute(_NICS_OF_FABRIC, values))
    ports: dict[int, list[SwitchPort]] = defaultdict(list)
    for switch_id, *port in connection.execute(_PORTS_OF_FABRIC, values):
        ports[switch_id].append(SwitchPort(*port))
    switches = _switch_values(connection.execute(_SWITCHES_OF_FABRIC, values), ports)
    links = tuple(Link(*ends) for _, *ends in connection.execute(_LINKS_OF_FABRIC, values))
    return _Cabling(nics, switches, links)


def _context_cabling(session: Session, node_ids: list[int]) -> _Cabling:
    """The nodes' NICs, the switches they are cabled to with just those ports, and their links.

    The rules read switches and links only to place NICs (a leaf's host port, not an uplink),
    so a scoped snapshot holds what its NICs use and nothing that grows with the fabric: a
    rail-optimised node reaches a leaf per NIC, each with hundreds of ports.
    """
    if not node_ids:
        return _Cabling((), (), ())
    connection = session.connection()
    rows = connection.execute(_NICS_OF_NODES, {"nodes": node_ids}).all()
    ports: dict[int, list[SwitchPort]] = defaultdict(list)
    port_ids = []
    for *_, switch_id, port_id, port_name, lanes, speed, cable in rows:
        ports[switch_id].append(SwitchPort(port_name, lanes, speed, cable))
        port_ids.append(port_id)  # a port holds one NIC (unique): no repeats
    on_ports = {"ports": sorted(port_ids)}
    switches = connection.execute(_SWITCHES_BY_ID, {"ids": sorted(ports)})
    linked = {link_id: ends for link_id, *ends in connection.execute(_LINKS_ON_PORTS, on_ports)}
    return _Cabling(
        tuple(Nic(*row[:4]) for row in rows),
        _switch_values(switches, ports),
        tuple(Link(*linked[link_id]) for link_id in sorted(linked)),
    )


def _switch_values(rows: Iterable[Any], ports: dict[int, list[SwitchPort]]) -> tuple[Switch, ...]:
    """Engine switches from (id, name, role, asn, loopback, vtep, platform) rows, in row order."""
    return tuple(
        Switch(
            name,
            SwitchRole(role),
            asn,
            IPv4Address(loopback),
            IPv4Address(vtep) if vtep else None,
            tuple(sorted(ports[switch_id], key=lambda p: p.name)),
            platform,
        )
        for switch_id, name, role, asn, loopback, vtep, platform in rows
    )


def _switches_query() -> Select[*tuple[Any, ...]]:
    return core_select(
        col(m.RoceSwitch.id),
        col(m.RoceSwitch.name),
        col(m.RoceSwitch.role),
        col(m.RoceSwitch.asn),
        col(m.RoceSwitch.loopback),
        col(m.RoceSwitch.vtep),
        col(m.RoceSwitch.platform),
    ).order_by(col(m.RoceSwitch.id))


def _ports_of_fabric() -> Select[*tuple[Any, ...]]:
    return (
        core_select(
            col(m.RoceSwitchPort.switch_id),
            col(m.RoceSwitchPort.name),
            col(m.RoceSwitchPort.lanes),
            col(m.RoceSwitchPort.speed),
            col(m.RoceSwitchPort.cable_length),
        )
        .join(m.RoceSwitch, col(m.RoceSwitch.id) == col(m.RoceSwitchPort.switch_id))
        .where(col(m.RoceSwitch.fabric_id) == bindparam("fabric"))
    )


def _links_query() -> tuple[Select[*tuple[Any, ...]], Any]:
    """Links (id first) with both ends' switch and port names; the link table, for filters."""
    a_port, b_port = aliased(m.RoceSwitchPort), aliased(m.RoceSwitchPort)
    a_switch, b_switch = aliased(m.RoceSwitch), aliased(m.RoceSwitch)
    query = (
        core_select(
            col(m.RoceLink.id),
            col(a_switch.name),
            col(a_port.name),
            col(b_switch.name),
            col(b_port.name),
        )
        .select_from(m.RoceLink)
        .join(a_port, col(a_port.id) == col(m.RoceLink.a_port_id))
        .join(a_switch, col(a_switch.id) == col(a_port.switch_id))
        .join(b_port, col(b_port.id) == col(m.RoceLink.b_port_id))
        .join(b_switch, col(b_switch.id) == col(b_port.switch_id))
    )
    return query, m.RoceLink


def _links_on_ports() -> CompoundSelect[*tuple[Any, ...]]:
    """Links with an end on one of the ports (``ports``): one lookup per end's unique index."""
    query, link = _links_query()
    ports: Any = bindparam("ports", expanding=True)
    return union_all(
        query.where(col(link.a_port_id).in_(ports)), query.where(col(link.b_port_id).in_(ports))
    )


def _nics_query(*port: Any) -> Select[*tuple[Any, ...]]:
    """NICs as (node, NIC, switch, port) names, then the `port` columns asked for."""
    return (
        core_select(
            col(m.Node.name),
            col(m.Nic.name),
            col(m.RoceSwitch.name),
            col(m.RoceSwitchPort.name),
            *port,
        )
        .select_from(m.Nic)
        .join(m.Node, col(m.Node.id) == col(m.Nic.node_id))
        .join(m.RoceSwitchPort, col(m.RoceSwitchPort.id) == col(m.Nic.switch_port_id))
        .join(m.RoceSwitch, col(m.RoceSwitch.id) == col(m.RoceSwitchPort.switch_id))
        .order_by(col(m.Nic.id))
    )


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


def _qos(
    session: Session, fabric: m.Fabric, max_lossless: int
) -> tuple[tuple[RoceQos, ...], tuple[RoceQos, ...]]:
    """The classes the fabric's leaves carry, and every class with RoCE parameters.

    A leaf's DSCP maps, schedulers, queues and PFC are fabric-wide (declared, not owned) keys:
    rendering only the classes in use would make onboarding the first tenant of a class, or
    offboarding its last, rewrite them (a disruptive CONFIG_DB change, policies/roce/patch.py).
    So the leaves carry the classes in use plus every defined class that fits the fabric's PFC
    and ETS budget beside them (`deployable_classes`); a tenant of a class that does not fit is
    refused when it first needs the fabric, as before.
    """
    connection = session.connection()
    used = [RoceQos(*row) for row in connection.execute(_USED_CLASSES, {"fabric": m.pk(fabric)})]
    defined = tuple(RoceQos(*row) for row in connection.execute(_ROCE_CLASSES))
    return deployable_classes(defined, used, max_lossless), defined


def _class_columns() -> Select[*tuple[Any, ...]]:
    return core_select(
        col(m.QosClass.name),
        col(m.QosClass.roce_dscp),
        col(m.QosClass.roce_tc),
        col(m.QosClass.lossless),
        col(m.QosClass.ets_weight),
        col(m.QosClass.ecn_min_bytes),
        col(m.QosClass.ecn_max_bytes),
        col(m.QosClass.ecn_probability),
    )


def _used_classes() -> Select[*tuple[Any, ...]]:
    """The QoS classes of the fabric's active segments (one query, however many segments).

    Through the tenants' L3VNI rows only, one per tenant: a VRF segment is claimed whole.
    """
    used = (
        core_select(col(m.Tenant.qos_class_id))
        .select_from(m.Segment)
        .join(m.Tenant, col(m.Tenant.id) == col(m.Segment.tenant_id))
        .where(
            col(m.Segment.fabric_id) == bindparam("fabric"),
            col(m.Segment.state) == "active",
            col(m.Segment.purpose) == "l3vni",
        )
    )
    return _class_columns().where(col(m.QosClass.id).in_(used)).order_by(col(m.QosClass.id))


def _roce_classes() -> Select[*tuple[Any, ...]]:
    """Every class with a DSCP, a TC or PFC of its own, used or not.

    A class left at DSCP 0 / TC 0 / lossy (the defaults, e.g. an InfiniBand-only class) adds
    nothing beyond best effort: it is carried only while a segment uses it, as before.
    """
    has_roce_parameters = or_(
        col(m.QosClass.roce_dscp) != 0,
        col(m.QosClass.roce_tc) != 0,
        col(m.QosClass.lossless).is_(True),
    )
    return _class_columns().where(has_roce_parameters).order_by(col(m.QosClass.id))


# Built once: a scoped snapshot is prepared statements only.
_SWITCHES_OF_FABRIC = _switches_query().where(col(m.RoceSwitch.fabric_id) == bindparam("fabric"))
_SWITCHES_BY_ID = _switches_query().where(
    col(m.RoceSwitch.id).in_(bindparam("ids", expanding=True))
)
_PORTS_OF_FABRIC = _ports_of_fabric()
_LINKS_OF_FABRIC = (
    _links_query()[0]
    .where(col(m.RoceLink.fabric_id) == bindparam("fabric"))
    .order_by(col(m.RoceLink.id))
)
_LINKS_ON_PORTS = _links_on_ports()
_NICS_OF_FABRIC = _nics_query().where(col(m.Nic.fabric_id) == bindparam("fabric"))
# The node ids are the fabric's; each NIC with its switch's id and its port's id and facts.
_NICS_OF_NODES = _nics_query(
    col(m.RoceSwitchPort.switch_id),
    col(m.RoceSwitchPort.id),
    col(m.RoceSwitchPort.name),
    col(m.RoceSwitchPort.lanes),
    col(m.RoceSwitchPort.speed),
    col(m.RoceSwitchPort.cable_length),
).where(col(m.Nic.node_id).in_(bindparam("nodes", expanding=True)))
_USED_CLASSES = _used_classes()
_ROCE_CLASSES = _roce_classes()
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
