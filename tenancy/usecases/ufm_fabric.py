"""What the UFM-compatible API shows of the fabric itself: its SM settings and hosts' ports.

UFM's ``app/smconf`` and ``resources/ports`` (NVIDIA's infra-controller reads both); the P_Keys
are tenancy/usecases/ufm_views.py's.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select as core_select
from sqlmodel import col

from tenancy import models as m
from tenancy.record.subnet_manager import subnet_manager_keys
from tenancy.schemas.ufm import guid_text
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.ufm_views import FacadeScope, infiniband_fabric


def sm_config(uow: UnitOfWork, *, fabric_name: str, reveal_keys: bool) -> dict[str, Any]:
    """UFM's ``app/smconf`` for the fabric as isofabric renders its opensm.conf.

    Booleans and states for everyone; the keys themselves only with `reveal_keys` (the
    operator's), as UFM gives them only to its administrators. Without it the key fields are
    there but empty: NVIDIA's infra-controller reads this answer into a struct that requires
    ``m_key``, ``sm_key`` and ``sa_key`` (ufmclient/mod.rs `SmConfig`) and takes a missing one
    as a malformed answer. OpenSM's M_Key is one key for every port (no per-port M_Key);
    partitions are enforced both ways (``part_enforce both``).
    """
    with uow.transaction(read_only=True) as tx:
        fabric = infiniband_fabric(tx.session, fabric_name)
        keys = subnet_manager_keys(fabric, tx.settings) if reveal_keys else None
    answer: dict[str, Any] = {
        "subnet_prefix": "0xfe80000000000000",
        "m_key_enabled": True,
        "m_key_per_port": False,
        "m_key_protection_level": 2,
        "sm_key_enabled": True,
        "sa_key_enabled": True,
        "partition_enforcement": "both",
        "default_membership": "limited",
    }
    if keys is None:
        answer |= dict.fromkeys(("m_key", "sm_key", "sa_key"), "")
    else:
        answer |= {
            "m_key": f"0x{keys.m_key:016x}",
            "sm_key": f"0x{keys.sm_key:016x}",
            "sa_key": f"0x{keys.sa_key:016x}",
            "m_key_lease_period": keys.m_key_lease_period,
        }
    return answer


def list_ports(
    uow: UnitOfWork, *, scope: FacadeScope, computers_only: bool
) -> list[dict[str, Any]]:
    """UFM's ``resources/ports``: the CA ports a scope may put in partitions, by GUID.

    Its tenants' nodes' ports and free compute nodes' (a scheduler adds a free node's port to
    allocate it); never a service's, a management node's or another tenant's. `computers_only`
    is UFM's ``sys_type=Computer`` (every port shown here is a host's).
    """
    del computers_only  # isofabric's ports are all CA ports of hosts
    with uow.transaction(read_only=True) as tx:
        fabric = infiniband_fabric(tx.session, scope.fabric)
        query = (
            core_select(
                m.Port,
                col(m.Node.name),
                col(m.Node.role),
                col(m.Tenant.name),
                col(m.NodeAssignment.service_id),
            )
            .join(m.Node, col(m.Node.id) == col(m.Port.node_id))
            .join(m.NodeAssignment, col(m.NodeAssignment.node_id) == col(m.Node.id), isouter=True)
            .join(
                m.Allocation,
                col(m.Allocation.id) == col(m.NodeAssignment.allocation_id),
                isouter=True,
            )
            .join(m.Tenant, col(m.Tenant.id) == col(m.Allocation.tenant_id), isouter=True)
            .where(col(m.Port.fabric_id) == fabric.id)
            .order_by(col(m.Port.guid))
        )
        return [
            _port_entry(port, node)
            for port, node, role, tenant, service in tx.session.execute(query).all()
            if _shown_port(scope, role, tenant, service)
        ]


def _shown_port(scope: FacadeScope, role: str, tenant: str | None, service: int | None) -> bool:
    if tenant is not None:
        return scope.tenant is None or tenant == scope.tenant
    return role == "compute" and service is None


def _port_entry(port: m.Port, node: str) -> dict[str, Any]:
    return {
        "guid": guid_text(int(port.guid, 16)),
        "name": f"{guid_text(int(port.guid, 16))}_{port.port_num}",
        "dname": f"{port.hca}/{port.port_num}",
        "system_name": node,
        "systemID": node,
        "number": port.port_num,
        # A port of the imported topology is one ibnetdiscover found linked; its LID is the
        # SM's to assign and is not recorded (0: unknown).
        "lid": 0,
        "physical_state": "LinkUp",
        "logical_state": "Active",
        "type": "Computer",
    }
