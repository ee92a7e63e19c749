"""Topology: ibnetdiscover and RoCE inventory imports, nodes, ports and NICs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from tenancy.schemas.common import (
    PORT_NAME_PATTERN,
    SWITCH_PORT_REF,
    Ipv4Text,
    NodeName,
    Strict,
)


class TopologyPortChange(BaseModel):
    guid: str
    node: str
    hca: str
    port: int
    allocated: bool = False
    action: Literal["added", "removed", "kept"] = "added"


class NicChange(BaseModel):
    node: str
    nic: str
    switch: str | None = None
    port: str | None = None
    allocated: bool = False
    action: Literal["added", "removed", "kept"] = "added"


class TopologyImportResult(BaseModel):
    """Counts after the import; `added` and `missing` list HCA ports (InfiniBand) or NICs (RoCE)."""

    switches: int
    nodes: int
    ports: int
    added: list[TopologyPortChange] | list[NicChange]
    missing: list[TopologyPortChange] | list[NicChange]


class PortView(BaseModel):
    guid: str
    hca: str
    port: int
    switch: str | None
    switch_port: int | None


class NodeView(BaseModel):
    """A host: its HCA ports on InfiniBand, its NICs (and no ports) on RoCE."""

    name: str
    role: str
    tenant: str | None
    service: str | None = None
    ports: list[PortView]
    nics: list[NicView] | None = None

    @model_serializer(mode="wrap")
    def _without_absent_nics(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("nics") is None:
            data.pop("nics", None)
        return data


class NodePatch(Strict):
    role: Literal["compute", "storage", "management"]


class InventoryPort(Strict):
    name: str = Field(pattern=PORT_NAME_PATTERN)
    lanes: str = Field(pattern=r"^[0-9]{1,4}(,[0-9]{1,4}){0,15}$")
    speed: int = Field(ge=1000, le=1_600_000, description="Mb/s, as SONiC writes it")
    cable_length: str = Field(default="5m", pattern=r"^[0-9]{1,4}m$")


class InventorySwitch(Strict):
    name: NodeName
    role: Literal["leaf", "spine"]
    asn: int = Field(ge=1, le=4_294_967_294)
    loopback: Ipv4Text
    vtep: Ipv4Text | None = None
    platform: Literal["sonic"] = "sonic"
    ports: list[InventoryPort] = Field(default_factory=list, max_length=1024)


class InventoryLink(Strict):
    a: str = Field(pattern=SWITCH_PORT_REF, examples=["leaf01:Ethernet248"])
    b: str = Field(pattern=SWITCH_PORT_REF, examples=["spine01:Ethernet0"])


class InventoryNic(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,31}$")
    switch: NodeName
    port: str = Field(pattern=PORT_NAME_PATTERN)


class InventoryNode(Strict):
    name: NodeName
    nics: list[InventoryNic] = Field(min_length=1, max_length=64)


class RoceInventory(Strict):
    switches: list[InventorySwitch] = Field(min_length=1, max_length=10_000)
    links: list[InventoryLink] = Field(default_factory=list, max_length=100_000)
    nodes: list[InventoryNode] = Field(default_factory=list, max_length=100_000)


class NicView(BaseModel):
    name: str
    switch: str
    port: str
