"""End to end: REST API -> rendered OpenSM files -> real OpenSM on ibsim -> tables and paths.

Flow: discover an ibsim fat tree, ingest it through the API, onboard three tenants and a storage
service, render ``partitions.conf`` / ``qos-policy.conf`` / ``opensm.conf``, run OpenSM with
them and read back every CA port's P_Key table (SMP) and PathRecords (SA). Then offboard one
tenant, reinstall the re-rendered files, SIGHUP OpenSM and check that tenant's key is gone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.builders import LOCAL_URL
from tests.keys import keys_create

from .conftest import DEMO_TREE, SM_HOST, FabricFactory, OpenSMFactory
from .harness import DEFAULT_PKEY, CaPort, Diag, OpenSM, base, full, is_full

pytestmark = pytest.mark.conformance


FABRIC = "ib-east"
MGMT_HOST = DEMO_TREE.mgmt_host
ARTIFACTS = {
    OpenSM.OPTIONS: f"/v1/fabrics/{FABRIC}/artifacts/opensm/opensm.conf",
    OpenSM.PARTITIONS: f"/v1/fabrics/{FABRIC}/artifacts/opensm/partitions.conf",
    OpenSM.QOS_POLICY: f"/v1/fabrics/{FABRIC}/artifacts/opensm/qos-policy.conf",
}
TENANTS = {  # name -> (kind, qos class)
    "acme": ("external", "gold"),
    "research": ("internal", "silver"),
    "globex": ("external", "bronze"),
}
STORAGE = ("stor01", "stor02")
GRANTED = ("acme",)
OFFBOARDED = "globex"


# ----------------------------------------------------------------------------------- the API


class Api:
    """TestClient calls that fail with the response body on an unexpected status."""

    def __init__(self, client: TestClient) -> None:
        self.client = client

    def call(self, method: str, url: str, **kwargs: Any) -> Any:
        response = self.client.request(method, url, **kwargs)
        assert response.is_success, f"{method} {url} -> {response.status_code}: {response.text}"
        if response.status_code == 204 or not response.content:
            return None
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text

    def pages(self, url: str, params: dict[str, str]) -> Iterator[dict[str, Any]]:
        """Follow ``next`` (a URL or an opaque cursor) through a paginated list."""
        body = self.call("GET", url, params=params)
        yield from body["data"]
        while body.get("next"):
            nxt = str(body["next"])
            if nxt.startswith(("/", "http")):
                body = self.call("GET", nxt)
            else:
                body = self.call("GET", url, params={**params, "cursor": nxt})
            yield from body["data"]


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    monkeypatch.setenv("ISOFABRIC_DATABASE_URL", f"sqlite:///{tmp_path / 'isofabric.db'}")
    keys_create(f"sqlite:///{tmp_path / 'isofabric.db'}")  # the OpenSM secret opensm.conf needs
    from api.app import create_app

    with TestClient(
        create_app(), client=("127.0.0.1", 50000), base_url=LOCAL_URL
    ) as client:  # open mode: loopback
        yield Api(client)


@dataclass
class Tenancy:
    """What the API allocated: P_Keys (base form) and port GUIDs per tenant."""

    tenant_keys: dict[str, int] = field(default_factory=dict)
    tenant_ports: dict[str, set[int]] = field(default_factory=dict)
    storage_key: int | None = None


def _pkey(segment: dict[str, Any] | None) -> int | None:
    if not segment or "pkey" not in segment:
        return None
    return base(int(str(segment["pkey"]), 16))


def ingest_fabric(api: Api, topology: str) -> int | None:
    """Create the fabric, load its topology, set roles, define storage; return its key if known."""
    api.call(
        "POST",
        "/v1/fabrics",
        json={
            "name": FABRIC,
            "kind": "infiniband",
            "pkey_range": {"first": "0x0100", "last": "0x7ffe"},
        },
    )
    api.call(
        "PUT",
        f"/v1/fabrics/{FABRIC}/topology",
        content=topology,
        headers={"Content-Type": "text/plain"},
    )
    api.call("PATCH", f"/v1/fabrics/{FABRIC}/nodes/{MGMT_HOST}", json={"role": "management"})
    for node in STORAGE:
        api.call("PATCH", f"/v1/fabrics/{FABRIC}/nodes/{node}", json={"role": "storage"})
    service = api.call(
        "POST", f"/v1/fabrics/{FABRIC}/services", json={"name": "storage", "nodes": list(STORAGE)}
    )
    return _pkey(service.get("segment")) if isinstance(service, dict) else None


def onboard_tenants(api: Api) -> dict[str, int]:
    keys = {}
    for name, (kind, qos_class) in TENANTS.items():
        api.call("POST", "/v1/tenants", json={"name": name, "kind": kind, "qos_class": qos_class})
        allocation = api.call(
            "POST", f"/v1/tenants/{name}/allocations", json={"fabric": FABRIC, "count": 2}
        )
        assert allocation["segment"]["kind"] == "ib_partition", allocation
        assert len(allocation["nodes"]) == 2, allocation
        key = _pkey(allocation["segment"])
        assert key is not None, allocation
        keys[name] = key
    for name in GRANTED:
        api.call(
            "POST", f"/v1/tenants/{name}/grants", json={"fabric": FABRIC, "service": "storage"}
        )
    return keys


def ports_of(api: Api, tenant: str) -> set[int]:
    nodes = list(api.pages(f"/v1/fabrics/{FABRIC}/nodes", {"tenant": tenant}))
    assert nodes and all(node["tenant"] == tenant for node in nodes), nodes
    return {int(port["guid"], 16) for node in nodes for port in node["ports"]}


def fetch_artifacts(api: Api) -> dict[str, str]:
    return {name: api.call("GET", url) for name, url in ARTIFACTS.items()}


def qos_class_sl(api: Api, name: str) -> int:
    classes = {c["name"]: c for c in api.call("GET", "/v1/qos-classes")["data"]}
    return int(classes[name]["ib_sl"])


# -------------------------------------------------------------------------------- the fabric


def read_tables(diag: Diag, ports: list[CaPort]) -> dict[int, list[int]]:
    """P_Key table (non-zero entries) of every CA port, by port GUID."""
    return {port.guid: diag.pkeys(port.lid) for port in ports}


def infer_service_key(tables: dict[int, list[int]], storage: set[int], tenants: set[int]) -> int:
    """The one full key all storage ports share besides the default (if the API did not say)."""
    shared = set.intersection(*(set(tables[guid]) for guid in storage))
    candidates = {base(k) for k in shared if is_full(k)} - {DEFAULT_PKEY} - tenants
    assert len(candidates) == 1, f"cannot tell the storage key from {shared}"
    return candidates.pop()


def holders(tables: dict[int, list[int]], key: int) -> dict[int, int]:
    """GUID -> the entry (full or limited) of partition ``key`` on ports that hold it."""
    return {guid: k for guid, keys in tables.items() for k in keys if base(k) == base(key)}


def assert_default_partition(tables: dict[int, list[int]], sm_guid: int) -> None:
    for guid, keys in tables.items():
        expected = full(DEFAULT_PKEY) if guid == sm_guid else DEFAULT_PKEY
        assert holders({guid: keys}, DEFAULT_PKEY) == {guid: expected}, hex(guid)


def assert_tenant_isolation(tables: dict[int, list[int]], tenancy: Tenancy) -> None:
    for tenant, key in tenancy.tenant_keys.items():
        members = tenancy.tenant_ports[tenant]
        expected = dict.fromkeys(members, full(key))
        assert holders(tables, key) == expected, f"{tenant} 0x{key:04x}"


def assert_storage_grants(
    tables: dict[int, list[int]], tenancy: Tenancy, storage: set[int]
) -> None:
    assert tenancy.storage_key is not None
    expected = dict.fromkeys(storage, full(tenancy.storage_key))
    for tenant in GRANTED:
        expected.update(dict.fromkeys(tenancy.tenant_ports[tenant], tenancy.storage_key))
    assert holders(tables, tenancy.storage_key) == expected


# -------------------------------------------------------------------------------------- test


def test_rendered_files_isolate_tenants_on_opensm(
    api: Api, sim_fabric_factory: FabricFactory, opensm_factory: OpenSMFactory
) -> None:
    fabric = sim_fabric_factory()
    by_desc = {p.description: p for p in fabric.ca_ports()}
    storage_guids = {p.guid for p in by_desc.values() if p.host in STORAGE}
    sm_guid = by_desc[SM_HOST].guid

    tenancy = Tenancy(storage_key=ingest_fabric(api, fabric.ibnetdiscover()))
    tenancy.tenant_keys = onboard_tenants(api)
    tenancy.tenant_ports = {t: ports_of(api, t) for t in TENANTS}
    assert {p.guid for p in by_desc.values()} >= set().union(*tenancy.tenant_ports.values())

    sm = opensm_factory(fabric, **_configs(fetch_artifacts(api)))
    assert sm.config_errors() == []
    assert sm.option_errors() == []
    ports = fabric.ca_ports()  # LIDs as OpenSM assigned them
    tables = read_tables(sm.diag, ports)
    if tenancy.storage_key is None:
        tenancy.storage_key = infer_service_key(
            tables, storage_guids, set(tenancy.tenant_keys.values())
        )

    assert_default_partition(tables, sm_guid)
    assert_tenant_isolation(tables, tenancy)
    assert_storage_grants(tables, tenancy, storage_guids)
    assert_paths(sm.diag, ports, tenancy, gold_sl=qos_class_sl(api, TENANTS["acme"][1]))

    offboard_and_reload(api, sm, ports, tenancy)


def _configs(files: dict[str, str]) -> dict[str, str]:
    return {
        "opensm_conf": files[OpenSM.OPTIONS],
        "partitions_conf": files[OpenSM.PARTITIONS],
        "qos_policy_conf": files[OpenSM.QOS_POLICY],
    }


def assert_paths(diag: Diag, ports: list[CaPort], tenancy: Tenancy, gold_sl: int) -> None:
    lid = {p.guid: p.lid for p in ports}
    acme = sorted(lid[g] for g in tenancy.tenant_ports["acme"])
    research = sorted(lid[g] for g in tenancy.tenant_ports["research"])
    acme_key = full(tenancy.tenant_keys["acme"])

    record = diag.path(acme[0], acme[1], acme_key)
    assert record is not None, "no path inside tenant acme"
    assert (record.pkey, record.sl) == (acme_key, gold_sl)

    for key in (acme_key, full(tenancy.tenant_keys["research"]), None):
        assert diag.path(acme[0], research[0], key) is None, f"acme->research via {key}"

    storage_lid = next(p.lid for p in ports if p.host in STORAGE)
    assert tenancy.storage_key is not None
    granted = diag.path(acme[0], storage_lid, full(tenancy.storage_key))
    assert granted is not None and base(granted.pkey) == tenancy.storage_key


def offboard_and_reload(api: Api, sm: OpenSM, ports: list[CaPort], tenancy: Tenancy) -> None:
    gone_key = tenancy.tenant_keys[OFFBOARDED]
    former = [p for p in ports if p.guid in tenancy.tenant_ports[OFFBOARDED]]
    api.call("DELETE", f"/v1/tenants/{OFFBOARDED}")

    files = fetch_artifacts(api)
    sm.install(OpenSM.PARTITIONS, files[OpenSM.PARTITIONS])
    # Same heavy sweep re-reads the policy: a rule for a vanished key would log ERR AC14.
    sm.install(OpenSM.QOS_POLICY, files[OpenSM.QOS_POLICY])
    since = sm.reload()

    assert sm.config_errors(since) == []
    tables = read_tables(sm.diag, ports)
    assert holders(tables, gone_key) == {}, f"0x{gone_key:04x} still installed"
    assert all(DEFAULT_PKEY in tables[p.guid] for p in former)
    del tenancy.tenant_keys[OFFBOARDED], tenancy.tenant_ports[OFFBOARDED]
    assert_tenant_isolation(tables, tenancy)  # the remaining tenants are untouched
