"""Owners, nodes and grants: the vocabulary every fabric technology shares.

Technology models (`policies.infiniband.model`, `policies.roce.model`) build their snapshots from
these values. They are plain frozen values, hashable and cheap to compare.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["FabricKind", "Grant", "Node", "NodeRole", "Owner", "OwnerKind"]


class FabricKind(StrEnum):
    """Which isolation technology a fabric uses."""

    INFINIBAND = "infiniband"
    ROCE = "roce"


class NodeRole(StrEnum):
    """What a host is for; only `compute` nodes are allocated to tenants."""

    COMPUTE = "compute"
    STORAGE = "storage"
    MANAGEMENT = "management"


class OwnerKind(StrEnum):
    """Who can own ports: a tenant, an operator-owned shared service, or nobody."""

    TENANT = "tenant"
    SERVICE = "service"
    UNASSIGNED = "unassigned"


@dataclass(frozen=True, slots=True)
class Owner:
    """The party a port belongs to; rendered as ``"tenant:acme"`` or ``"service:storage"``.

    Owners sort tenants first, then services, then unassigned nodes, each by name.
    """

    kind: OwnerKind
    name: str

    def __lt__(self, other: Owner) -> bool:
        return self.sort_key < other.sort_key

    @property
    def sort_key(self) -> tuple[int, str]:
        """Tenants before services before unassigned nodes, then by name."""
        return (_OWNER_KIND_ORDER[self.kind], self.name)

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.name}"

    @classmethod
    def tenant(cls, name: str) -> Owner:
        """The owner value for tenant `name`."""
        return cls(OwnerKind.TENANT, name)

    @classmethod
    def service(cls, name: str) -> Owner:
        """The owner value for shared service `name`."""
        return cls(OwnerKind.SERVICE, name)

    @classmethod
    def unassigned(cls, node: str) -> Owner:
        """The owner value of a node that no tenant or service holds."""
        return cls(OwnerKind.UNASSIGNED, node)


_OWNER_KIND_ORDER = {OwnerKind.TENANT: 0, OwnerKind.SERVICE: 1, OwnerKind.UNASSIGNED: 2}


@dataclass(frozen=True, slots=True)
class Node:
    """A host. `owners` has one entry when allocated, none when free; more is a violation."""

    name: str
    role: NodeRole = NodeRole.COMPUTE
    owners: tuple[Owner, ...] = ()


@dataclass(frozen=True, slots=True, order=True)
class Grant:
    """Tenant `tenant` may reach shared service `service`."""

    tenant: str
    service: str
