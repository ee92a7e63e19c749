"""Reusable builders for the tenancy and API suites: literal fabric data, a controllable clock,
the standard onboarded fabric (through HTTP or through the use cases), topology text surgery,
problem+json assertions and a whole-database dump for "nothing changed" checks."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
from sqlalchemy import Engine, select, text
from sqlmodel import SQLModel

import tenancy.models  # noqa: F401  (registers every table on SQLModel.metadata)
from tenancy.gate import verification
from tenancy.schemas import (
    AllocationCreate,
    FabricCreate,
    GrantCreate,
    NodePatch,
    PKeyRange,
    RoceFabricCreate,
    RoceInventory,
    ServiceCreate,
    TenantCreate,
)
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, fabrics, nodes, shared_services, tenants, topology

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_TOPOLOGY_PATH = REPO / "examples" / "ib-east.ibnetdiscover"

FABRIC = "ib-east"
PKEY_RANGE = {"first": "0x0100", "last": "0x7ffe"}
TEXT_PLAIN = {"content-type": "text/plain"}
PROBLEM_JSON = "application/problem+json"
# Open mode trusts a loopback peer that names this host by a loopback name (api/auth.py).
LOCAL_URL = "http://127.0.0.1"
PROBLEM_MEMBERS = frozenset({"type", "title", "status", "detail", "instance"})
DEFAULT_PARTITION_LINE = "Default=0x7fff, ipoib : ALL=limited, ALL_SWITCHES=full, SELF=full ;"
ARTIFACT_PATHS = ("opensm/opensm.conf", "opensm/partitions.conf", "opensm/qos-policy.conf")
QUARANTINE_SECONDS = 24 * 3600

# ib-east: every host of the sample and its CA port GUIDs (port GUID = node GUID + 1).
PORT_GUIDS = {
    "sm01": ("0x0000000000100001",),
    "gpu0001": ("0x0000000000100003", "0x0000000000100005"),
    "gpu0002": ("0x0000000000100007", "0x0000000000100009"),
    "gpu0003": ("0x000000000010000b", "0x000000000010000d"),
    "gpu0004": ("0x000000000010000f", "0x0000000000100011"),
    "gpu0005": ("0x0000000000100013", "0x0000000000100015"),
    "gpu0006": ("0x0000000000100017", "0x0000000000100019"),
    "gpu0007": ("0x000000000010001b", "0x000000000010001d"),
    "gpu0008": ("0x000000000010001f", "0x0000000000100021"),
    "stor01": ("0x0000000000100023",),
    "stor02": ("0x0000000000100025",),
}
ROLES = {"sm01": "management", "stor01": "storage", "stor02": "storage"}
SERVICE = "storage"
SERVICE_NODES = ("stor01", "stor02")


@dataclass(frozen=True)
class TenantSpec:
    name: str
    kind: str
    qos_class: str
    nodes: tuple[str, ...]


TENANTS = (
    TenantSpec("acme", "external", "gold", ("gpu0001", "gpu0002")),
    TenantSpec("research", "internal", "silver", ("gpu0003", "gpu0004")),
    TenantSpec("globex", "external", "bronze", ("gpu0005", "gpu0006")),
)
GRANTED = ("acme",)
# What onboarding hands out, lowest key first: the service is created before the tenants.
SERVICE_PKEY = "0x0100"
TENANT_PKEYS = {"acme": "0x0101", "research": "0x0102", "globex": "0x0103"}
FREE_COMPUTE_NODES = ("gpu0007", "gpu0008")


def example_topology() -> str:
    return EXAMPLE_TOPOLOGY_PATH.read_text()


# --- time ------------------------------------------------------------------------------------


@dataclass
class FakeClock:
    """A clock tests move by hand; the unit of work reads it once per transaction."""

    now: datetime = field(default_factory=lambda: datetime(2026, 3, 1, 12, 0, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


# --- database --------------------------------------------------------------------------------

Dump = dict[str, list[tuple[Any, ...]]]


def dump_database(engine: Engine) -> Dump:
    """Every row of every table, in a stable order: equal dumps mean nothing changed."""
    with engine.connect() as connection:
        return {
            table.name: sorted((tuple(row) for row in connection.execute(select(table))), key=repr)
            for table in SQLModel.metadata.sorted_tables
        }


def rows(engine: Engine, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    """The result of one SQL query, as plain tuples."""
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(text(sql), params)]


# --- HTTP ------------------------------------------------------------------------------------


def assert_problem(
    response: httpx2.Response, status: int, type_suffix: str | None = None
) -> dict[str, Any]:
    """An RFC 9457 problem with every standard member; returns the body for further checks."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
    body: dict[str, Any] = response.json()
    assert body.keys() >= PROBLEM_MEMBERS, body
    assert body["status"] == status
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    assert isinstance(body["type"], str) and body["type"]
    assert body["instance"] == response.request.url.path
    if type_suffix is not None:
        assert body["type"].endswith(type_suffix), body["type"]
    return body


def created(response: httpx2.Response) -> dict[str, Any]:
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def ok(response: httpx2.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def walk_pages(client: httpx2.Client, path: str, limit: int, **params: Any) -> list[dict[str, Any]]:
    """Every page of a list endpoint, following `next` until it is null."""
    pages, cursor = [], None
    for _ in range(1000):
        query = {**params, "limit": limit, **({"cursor": cursor} if cursor else {})}
        page = ok(client.get(path, params=query))
        pages.append(page)
        cursor = page["next"]
        if cursor is None:
            return pages
    raise AssertionError(f"{path} never ends")


@dataclass(frozen=True)
class Onboarded:
    """What the standard onboarding created on ib-east."""

    fabric: str
    allocation_ids: dict[str, str]
    grant_ids: dict[str, str]


def api_create_fabric(
    client: httpx2.Client, name: str = FABRIC, topology_text: str | None = None, **spec: Any
) -> dict[str, Any]:
    body = created(
        client.post(
            "/v1/fabrics",
            json={"name": name, "kind": "infiniband", "pkey_range": PKEY_RANGE, **spec},
        )
    )
    ok(
        client.put(
            f"/v1/fabrics/{name}/topology",
            content=example_topology() if topology_text is None else topology_text,
            headers=TEXT_PLAIN,
        )
    )
    return body


def api_onboard(client: httpx2.Client) -> Onboarded:
    """ib-east from the sample; sm01 management, stor01/02 storage behind service 'storage';
    acme (external, gold), research (internal, silver), globex (external, bronze) with 2 nodes
    each; storage granted to acme."""
    api_create_fabric(client)
    for node, role in ROLES.items():
        ok(client.patch(f"/v1/fabrics/{FABRIC}/nodes/{node}", json={"role": role}))
    created(
        client.post(
            f"/v1/fabrics/{FABRIC}/services", json={"name": SERVICE, "nodes": list(SERVICE_NODES)}
        )
    )
    allocation_ids = {}
    for spec in TENANTS:
        created(
            client.post(
                "/v1/tenants",
                json={"name": spec.name, "kind": spec.kind, "qos_class": spec.qos_class},
            )
        )
        allocation = created(
            client.post(
                f"/v1/tenants/{spec.name}/allocations",
                json={"fabric": FABRIC, "nodes": list(spec.nodes)},
            )
        )
        allocation_ids[spec.name] = allocation["id"]
    grant_ids = {
        name: created(
            client.post(f"/v1/tenants/{name}/grants", json={"fabric": FABRIC, "service": SERVICE})
        )["id"]
        for name in GRANTED
    }
    return Onboarded(FABRIC, allocation_ids, grant_ids)


# --- use cases (no HTTP) ---------------------------------------------------------------------


def fabric_spec(
    name: str = FABRIC, first: str = "0x0100", last: str = "0x7ffe", **extra: Any
) -> FabricCreate:
    return FabricCreate(
        name=name, kind="infiniband", pkey_range=PKeyRange(first=first, last=last), **extra
    )


def uow_create_fabric(
    uow: UnitOfWork, name: str = FABRIC, topology_text: str | None = None, **spec: Any
) -> None:
    fabrics.create_fabric(uow, spec=fabric_spec(name, **spec))
    topology.import_topology(
        uow, fabric_name=name, text=example_topology() if topology_text is None else topology_text
    )


def uow_onboard(uow: UnitOfWork) -> Onboarded:
    """The same onboarding as `api_onboard`, through the tenancy use cases."""
    uow_create_fabric(uow)
    for node, role in ROLES.items():
        nodes.set_node_role(uow, fabric_name=FABRIC, node_name=node, patch=NodePatch(role=role))
    shared_services.create_service(
        uow, fabric_name=FABRIC, spec=ServiceCreate(name=SERVICE, nodes=list(SERVICE_NODES))
    )
    allocation_ids = {}
    for spec in TENANTS:
        tenants.create_tenant(
            uow, spec=TenantCreate(name=spec.name, kind=spec.kind, qos_class=spec.qos_class)
        )
        view = allocations.allocate(
            uow, tenant_name=spec.name, spec=AllocationCreate(fabric=FABRIC, nodes=list(spec.nodes))
        )
        allocation_ids[spec.name] = view.id
    grant_ids = {
        name: shared_services.grant_service(
            uow, tenant_name=name, spec=GrantCreate(fabric=FABRIC, service=SERVICE)
        ).id
        for name in GRANTED
    }
    return Onboarded(FABRIC, allocation_ids, grant_ids)


# --- ibnetdiscover text ----------------------------------------------------------------------


def _blocks(text: str) -> list[list[str]]:
    blocks: list[list[str]] = [[]]
    for line in text.split("\n"):
        if line == "":
            blocks.append([])
        else:
            blocks[-1].append(line)
    return [block for block in blocks if block]


def without_hosts(text: str, hosts: Iterable[str]) -> str:
    """The sample as ibnetdiscover prints it once `hosts` are unplugged: their Ca records and the
    switch port lines that lead to them are gone."""
    gone = tuple(f'"{host} ' for host in hosts)

    def mentions(line: str) -> bool:
        return any(name in line for name in gone)

    kept = [
        [line for line in block if not (line.startswith("[") and mentions(line))]
        for block in _blocks(text)
        if not any(line.startswith("Ca") and mentions(line) for line in block)
    ]
    return "\n\n".join("\n".join(block) for block in kept) + "\n"


def replace_line(text: str, number: int, new: str | Callable[[str], str]) -> str:
    """`text` with its 1-based line `number` replaced (or rewritten by a function)."""
    lines = text.split("\n")
    lines[number - 1] = new(lines[number - 1]) if callable(new) else new
    return "\n".join(lines)


def line_number(text: str, prefix: str) -> int:
    """The 1-based number of the first line that starts with `prefix`."""
    return next(n for n, line in enumerate(text.split("\n"), start=1) if line.startswith(prefix))


def generated_topology(hosts: Sequence[str]) -> str:
    """ibnetdiscover output of one leaf switch with one single-port HCA per host."""
    if not 1 <= len(hosts) <= 255:
        raise ValueError("one switch has 1..255 ports")
    switch = "0000000000200000"
    lines = [
        "vendid=0x0",
        "devid=0x0",
        "sysimgguid=0x200000",
        "switchguid=0x200000(200000)",
        f'Switch\t{len(hosts)} "S-{switch}"\t\t# "leaf01" base port 0 lid 1 lmc 0',
    ]
    for index, host in enumerate(hosts, start=1):
        node, port = 0x100000 + 2 * index, 0x100001 + 2 * index
        lines.append(
            f'[{index}]\t"H-{node:016x}"[1]({port:x}) \t\t# "{host} mlx5_0" lid {index + 1} 4xSDR'
        )
    for index, host in enumerate(hosts, start=1):
        node, port = 0x100000 + 2 * index, 0x100001 + 2 * index
        lines += [
            "",
            "vendid=0x0",
            "devid=0x0",
            f"sysimgguid={node:#x}",
            f"caguid={node:#x}",
            f'Ca\t1 "H-{node:016x}"\t\t# "{host} mlx5_0"',
            f'[1]({port:x}) \t"S-{switch}"[{index}]\t\t'
            f'# lid {index + 1} lmc 0 "leaf01" lid 1 4xSDR',
        ]
    return "\n".join(lines) + "\n"


# --- RoCE ------------------------------------------------------------------------------------

ROCE_INVENTORY_PATH = REPO / "examples" / "roce-west.json"
ROCE_FABRIC = "roce-west"
# The contract's fabric (issue 3), every setting spelled out.
ROCE_FABRIC_SPEC: dict[str, Any] = {
    "name": ROCE_FABRIC,
    "kind": "roce",
    "vlan_range": {"first": 100, "last": 3999},
    "l2vni_range": {"first": 10000, "last": 19999},
    "l3vni_range": {"first": 50000, "last": 59999},
    "tenant_prefix_pool": "10.64.0.0/10",
    "tenant_prefix_length": 24,
    "rt_asn": 65000,
    "host_mtu": 9000,
    "underlay_mtu": 9216,
    "anycast_gateway_mac": "00:00:5e:00:01:01",
    "max_lossless_priorities": 2,
}
APPLICATION_JSON = {"content-type": "application/json"}
APPLICATION_YAML = {"content-type": "application/yaml"}
ROCE_LEAVES = ("leaf01", "leaf02")
ROCE_ARTIFACT_PATHS = tuple(
    sorted(
        [f"sonic/{leaf}/config_db.json" for leaf in ROCE_LEAVES]
        + [f"sonic/{leaf}/ownership.json" for leaf in ROCE_LEAVES]
        + [f"frr/{leaf}/frr.conf" for leaf in ROCE_LEAVES]
    )
)
ROCE_STORAGE_NODES = ("stor01", "stor02")
# Tenants in creation order; `count` allocations pick free compute nodes in name order.
ROCE_TENANTS = (
    TenantSpec("acme", "external", "gold", ("gpu0001", "gpu0002")),
    TenantSpec("research", "internal", "silver", ("gpu0003", "gpu0004")),
    TenantSpec("globex", "external", "bronze", ("gpu0005", "gpu0006")),
)
ROCE_GRANTED = ("acme",)


def roce_inventory_text() -> str:
    """The demo inventory: leaf01/02, spine01/02, gpu0001..gpu0006, stor01/02 (eth0 on leaf01,
    eth1 on leaf02)."""
    return ROCE_INVENTORY_PATH.read_text()


def roce_inventory() -> dict[str, Any]:
    """The demo inventory as a fresh, freely mutable document."""
    import json

    document: dict[str, Any] = json.loads(roce_inventory_text())
    return document


@dataclass(frozen=True)
class RoceOnboarded:
    """What `api_onboard_roce` created on roce-west: each owner's segment as the API showed it."""

    fabric: str
    service_segment: dict[str, Any]
    segments: dict[str, dict[str, Any]]
    allocation_ids: dict[str, str]
    grant_ids: dict[str, str]


def api_create_roce_fabric(
    client: httpx2.Client, inventory: dict[str, Any] | None = None, **settings: Any
) -> dict[str, Any]:
    """Create roce-west (the contract's settings, overridable) and PUT its inventory as JSON."""
    body = created(client.post("/v1/fabrics", json={**ROCE_FABRIC_SPEC, **settings}))
    ok(
        client.put(
            f"/v1/fabrics/{body['name']}/topology",
            json=roce_inventory() if inventory is None else inventory,
        )
    )
    return body


def api_onboard_roce(
    client: httpx2.Client, inventory: dict[str, Any] | None = None
) -> RoceOnboarded:
    """roce-west from the demo inventory; stor01/02 storage behind service 'storage'; acme (gold),
    research (silver), globex (bronze) with 2 nodes each by count; storage granted to acme."""
    api_create_roce_fabric(client, inventory)
    for node in ROCE_STORAGE_NODES:
        ok(client.patch(f"/v1/fabrics/{ROCE_FABRIC}/nodes/{node}", json={"role": "storage"}))
    service = created(
        client.post(
            f"/v1/fabrics/{ROCE_FABRIC}/services",
            json={"name": SERVICE, "nodes": list(ROCE_STORAGE_NODES)},
        )
    )
    segments, allocation_ids = {}, {}
    for spec in ROCE_TENANTS:
        created(
            client.post(
                "/v1/tenants",
                json={"name": spec.name, "kind": spec.kind, "qos_class": spec.qos_class},
            )
        )
        allocation = created(
            client.post(
                f"/v1/tenants/{spec.name}/allocations",
                json={"fabric": ROCE_FABRIC, "count": len(spec.nodes)},
            )
        )
        segments[spec.name] = allocation["segment"]
        allocation_ids[spec.name] = allocation["id"]
    grant_ids = {
        name: created(
            client.post(
                f"/v1/tenants/{name}/grants", json={"fabric": ROCE_FABRIC, "service": SERVICE}
            )
        )["id"]
        for name in ROCE_GRANTED
    }
    return RoceOnboarded(ROCE_FABRIC, service["segment"], segments, allocation_ids, grant_ids)


def uow_create_roce_fabric(
    uow: UnitOfWork, inventory: dict[str, Any] | None = None, **settings: Any
) -> None:
    """Create roce-west (the contract's settings, overridable) and import its inventory, through
    the tenancy use cases."""
    spec = RoceFabricCreate.model_validate({**ROCE_FABRIC_SPEC, **settings})
    fabrics.create_fabric(uow, spec=spec)
    topology.import_roce_topology(
        uow,
        fabric_name=spec.name,
        inventory=RoceInventory.model_validate(
            roce_inventory() if inventory is None else inventory
        ),
    )


def uow_onboard_roce(uow: UnitOfWork, inventory: dict[str, Any] | None = None) -> RoceOnboarded:
    """The same onboarding as `api_onboard_roce`, through the tenancy use cases; segments are
    the views' JSON documents, as the API shows them."""
    uow_create_roce_fabric(uow, inventory)
    for node in ROCE_STORAGE_NODES:
        nodes.set_node_role(
            uow, fabric_name=ROCE_FABRIC, node_name=node, patch=NodePatch(role="storage")
        )
    service = shared_services.create_service(
        uow,
        fabric_name=ROCE_FABRIC,
        spec=ServiceCreate(name=SERVICE, nodes=list(ROCE_STORAGE_NODES)),
    )
    segments, allocation_ids = {}, {}
    for spec in ROCE_TENANTS:
        tenants.create_tenant(
            uow, spec=TenantCreate(name=spec.name, kind=spec.kind, qos_class=spec.qos_class)
        )
        view = allocations.allocate(
            uow,
            tenant_name=spec.name,
            spec=AllocationCreate(fabric=ROCE_FABRIC, count=len(spec.nodes)),
        )
        assert view.segment is not None  # a new allocation always has its segment
        segments[spec.name] = view.segment.model_dump(mode="json")
        allocation_ids[spec.name] = view.id
    grant_ids = {
        name: shared_services.grant_service(
            uow, tenant_name=name, spec=GrantCreate(fabric=ROCE_FABRIC, service=SERVICE)
        ).id
        for name in ROCE_GRANTED
    }
    return RoceOnboarded(
        ROCE_FABRIC, service.segment.model_dump(mode="json"), segments, allocation_ids, grant_ids
    )


def uow_artifact_text(uow: UnitOfWork, fabric: str, path: str) -> str:
    """One rendered artifact of the fabric's current state, as text."""
    artifact, _digest = verification.get_artifact(uow, fabric_name=fabric, path=path)
    return artifact.content.decode()


def uow_partitions_conf(uow: UnitOfWork, fabric: str = FABRIC) -> str:
    return uow_artifact_text(uow, fabric, "opensm/partitions.conf")


def partition_members(partitions_conf: str, name: str) -> str:
    """The member list of one partitions.conf statement (``tenant_acme``, ``service_storage``)."""
    return partitions_conf.split(f"{name}=")[1].split(";")[0]


def audit_trail(engine: Engine) -> list[tuple[str, str]]:
    """(action, target) of every audit log entry, oldest first."""
    return [
        (str(action), str(target))
        for action, target in rows(
            engine, 'SELECT action, target FROM audit_entry ORDER BY "index"'
        )
    ]
