"""RoCE fabrics in the system of record: settings and VRF segments.

A tenant (or shared service) on a RoCE fabric holds one VRF segment: an L3VNI and its VLAN, one
L2 VLAN and L2VNI, a subnet from the fabric's tenant pool and a per-VRF RD index. Each value is
a `segment` row claimed from its pool (VLANs are fabric-wide; L2 and L3 VNIs share one pool so
they are unique across both), so the same race-free claim and quarantine rules as P_Keys apply.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from typing import Any

from sqlmodel import Session

from policies.errors import InvalidValueError
from policies.roce.model import (
    RoceSettings,
)
from policies.roce.settings import check_roce_settings
from tenancy import models as m
from tenancy.record.pools import Pool, held_values, take
from tenancy.schemas import IntRange, RoceFabricCreate, RoceFabricSettingsView, RoceSegmentView
from tenancy.store.uow import Tx

RD_POOL = (1, 65535)  # type-1 RD <loopback>:<index>: the index is 16 bits


# Each RoCE setting once: ranges are `<name>_range` {first, last} in the API and `<name>_first`,
# `<name>_last` columns; scalars have one name everywhere (the prefix pool is text in the row).
_RANGES = ("vlan", "l2vni", "l3vni")
_SCALARS = (
    "tenant_prefix_length",
    "rt_asn",
    "host_mtu",
    "underlay_mtu",
    "anycast_gateway_mac",
    "max_lossless_priorities",
)


def _row_values(row: m.RoceFabricSettings) -> dict[str, Any]:
    """The settings as flat column values (ranges as first/last, the prefix pool as text)."""
    values = {name: getattr(row, name) for name in _SCALARS}
    for name in _RANGES:
        for end in ("first", "last"):
            values[f"{name}_{end}"] = getattr(row, f"{name}_{end}")
    return values | {"tenant_prefix_pool": row.tenant_prefix_pool}


def engine_settings(fabric: m.Fabric, row: m.RoceFabricSettings) -> RoceSettings:
    """The engine's view of a RoCE fabric's pools and limits."""
    values = _row_values(row) | {"tenant_prefix_pool": IPv4Network(row.tenant_prefix_pool)}
    return RoceSettings(name=fabric.name, **values)


def _settings_row(spec: RoceFabricCreate) -> m.RoceFabricSettings:
    values: dict[str, Any] = {name: getattr(spec, name) for name in _SCALARS}
    for name in _RANGES:
        bounds: IntRange = getattr(spec, f"{name}_range")
        values |= {f"{name}_first": bounds.first, f"{name}_last": bounds.last}
    pool = str(spec.tenant_prefix_pool)
    return m.RoceFabricSettings(fabric_id=0, tenant_prefix_pool=pool, **values)


def create_fabric_rows(tx: Tx, spec: RoceFabricCreate) -> m.Fabric:
    """Insert a RoCE fabric and its settings; inconsistent pools or limits are a 422."""
    row = _settings_row(spec)
    fabric = m.Fabric(
        name=spec.name, kind="roce", pkey_first=0, pkey_last=0, pkeys_per_port=0, created_at=tx.now
    )
    problems = check_roce_settings(engine_settings(fabric, row))
    if problems:
        raise InvalidValueError("; ".join(problems), problems=problems)
    tx.session.add(fabric)
    tx.session.flush()
    row.fabric_id = m.pk(fabric)
    tx.session.add(row)
    tx.session.flush()
    return fabric


def settings_row(session: Session, fabric: m.Fabric) -> m.RoceFabricSettings:
    """The pools and limits of a RoCE fabric; only call it for ``roce`` fabrics (asserted)."""
    row = session.get(m.RoceFabricSettings, fabric.id)
    assert row is not None, "every RoCE fabric has a settings row"
    return row


def settings_view(row: m.RoceFabricSettings) -> RoceFabricSettingsView:
    """The fabric resource's `roce` member: pools as ranges, limits as stored."""
    ranges = {
        f"{name}_range": IntRange(
            first=getattr(row, f"{name}_first"), last=getattr(row, f"{name}_last")
        )
        for name in _RANGES
    }
    scalars = {name: getattr(row, name) for name in _SCALARS}
    return RoceFabricSettingsView(tenant_prefix_pool=row.tenant_prefix_pool, **ranges, **scalars)


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


def take_vrf_segment(
    tx: Tx, fabric: m.Fabric, *, tenant_id: int | None = None, service_id: int | None = None
) -> dict[str, int]:
    """Claim every identifier of a VRF segment for a tenant or a service (all or nothing).

    Returns the values claimed by purpose (as `owned_values` would read them).
    """
    owner = {"tenant_id": tenant_id, "service_id": service_id}
    return {
        pool.purpose: take(tx, fabric, pool, **owner)
        for pool in _pools(settings_row(tx.session, fabric))
    }


def owned_values(
    session: Session,
    fabric: m.Fabric,
    *,
    tenant_id: int | None = None,
    service_id: int | None = None,
) -> dict[str, int]:
    """The identifiers the owner holds on the fabric by purpose (empty before it holds any)."""
    return held_values(session, m.pk(fabric), tenant_id=tenant_id, service_id=service_id)


def has_vrf_segment(values: dict[str, int]) -> bool:
    """Whether `owned_values` hold a VRF segment (its L3VNI stands for the whole set)."""
    return "l3vni" in values


def subnet_at(row: m.RoceFabricSettings, index: int) -> IPv4Network:
    """The `index`-th tenant subnet of the fabric's prefix pool (the value a subnet claim holds)."""
    pool = IPv4Network(row.tenant_prefix_pool)
    size = 2 ** (32 - row.tenant_prefix_length)
    return IPv4Network(
        f"{IPv4Address(int(pool.network_address) + index * size)}/{row.tenant_prefix_length}"
    )


def vrf_segment_view(
    session: Session, fabric: m.Fabric, values: dict[str, int]
) -> RoceSegmentView | None:
    """The VRF segment of `owned_values` as the API shows it, or None before the owner holds one."""
    if not has_vrf_segment(values):
        return None
    return RoceSegmentView(
        vrf=f"Vrf{values['l3vni']}",
        l3vni=values["l3vni"],
        l3vni_vlan=values["l3vni_vlan"],
        vlan=values["vlan"],
        l2vni=values["l2vni"],
        subnet=str(subnet_at(settings_row(session, fabric), values["subnet"])),
    )


# --- snapshot -----------------------------------------------------------------------------------
