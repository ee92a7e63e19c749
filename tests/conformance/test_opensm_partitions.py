"""Conformance: a tenant's several partitions on real OpenSM over ibsim.

Through the REST API on the ibsim fat tree: acme and research hold two nodes each (four HCA
ports), the storage service two storage nodes. acme keeps its default partition and creates two
more: ``jobs`` (one port full, one limited) and ``mpi`` (the first port again, limited this
time, and a third port full). OpenSM runs with the rendered files and every CA port's P_Key
table is read back (SMP): each port holds exactly the keys expected (the full bit 0x8000 for full
members), research's ports none of acme's and acme's none of research's. Deleting ``jobs``,
reinstalling partitions.conf and qos-policy.conf and SIGHUP-ing OpenSM removes its key from
every table.

A port holds a partition's key with bit 0x8000 set when it is a full member, clear when limited
(OpenSM's partitions.conf ``=full`` / ``=limited``, opensm/osm_prtn_config.c; FULL_BIT in
tests/conformance/harness.py). The expected tables do not depend on the partitions' names.
"""

from __future__ import annotations

import pytest

from .conftest import SM_HOST, FabricFactory, OpenSMFactory
from .harness import DEFAULT_PKEY, CaPort, OpenSM, base, full
from .test_opensm_end_to_end import (
    FABRIC,
    Api,
    _configs,
    api,
    fetch_artifacts,
    infer_service_key,
    ingest_fabric,
    ports_of,
    read_tables,
)

pytestmark = pytest.mark.conformance

__all__ = ["api"]  # the fixture, shared with test_opensm_end_to_end.py

TENANTS = {"acme": "external", "research": "internal"}
STORAGE = ("stor01", "stor02")
PARTITIONS = "/v1/tenants/acme/partitions"


def onboard(api: Api) -> dict[str, int]:
    """Each tenant with two nodes; returns its default partition's key (base form)."""
    keys = {}
    for name, kind in TENANTS.items():
        api.call("POST", "/v1/tenants", json={"name": name, "kind": kind})
        allocation = api.call(
            "POST", f"/v1/tenants/{name}/allocations", json={"fabric": FABRIC, "count": 2}
        )
        keys[name] = base(int(allocation["segment"]["pkey"], 16))
    return keys


def create(api: Api, name: str, members: list[tuple[int, str]]) -> int:
    """An additional partition of acme with exactly `members` (GUID, membership); its key."""
    created = api.call("POST", PARTITIONS, json={"fabric": FABRIC, "name": name})
    body = {"members": [{"guid": f"0x{g:016x}", "membership": m} for g, m in members]}
    filled = api.call("PUT", f"{PARTITIONS}/{name}/members", json=body)
    assert [(int(m["guid"], 16), m["membership"]) for m in filled["members"]] == sorted(members)
    return base(int(created["pkey"], 16))


def test_a_port_in_two_additional_partitions_holds_both_keys_full_and_limited(
    api: Api, sim_fabric_factory: FabricFactory, opensm_factory: OpenSMFactory
) -> None:
    fabric = sim_fabric_factory()
    storage_key = ingest_fabric(api, fabric.ibnetdiscover())
    defaults = onboard(api)
    tenant_ports = {name: ports_of(api, name) for name in TENANTS}
    first, second, third, _ = sorted(tenant_ports["acme"])
    jobs = create(api, "jobs", [(first, "full"), (second, "limited")])
    mpi = create(api, "mpi", [(first, "limited"), (third, "full")])
    listed = api.call("GET", PARTITIONS)["data"]
    assert [p["name"] for p in listed] == ["default", "jobs", "mpi"]
    assert len({defaults["acme"], jobs, mpi, defaults["research"]}) == 4

    sm = opensm_factory(fabric, **_configs(fetch_artifacts(api)))
    assert sm.config_errors() == []
    ports = fabric.ca_ports()
    tables = read_tables(sm.diag, ports)
    storage = {p.guid for p in ports if p.host in STORAGE}
    if storage_key is None:
        storage_key = infer_service_key(tables, storage, set(defaults.values()))

    expected = _base_keys(ports, storage, storage_key)
    for tenant, key in defaults.items():
        for guid in tenant_ports[tenant]:
            expected[guid].add(full(key))
    expected[first] |= {full(jobs), mpi}  # full in jobs, limited in mpi
    expected[second].add(jobs)
    expected[third].add(full(mpi))
    assert {guid: set(keys) for guid, keys in tables.items()} == expected
    acme_keys = {defaults["acme"], jobs, mpi}
    for guid in tenant_ports["research"]:
        assert not {base(k) for k in tables[guid]} & acme_keys, hex(guid)

    api.call("DELETE", f"{PARTITIONS}/jobs")
    files = fetch_artifacts(api)
    sm.install(OpenSM.PARTITIONS, files[OpenSM.PARTITIONS])
    # The same heavy sweep re-reads the policy: a rule for the gone key would log ERR AC14.
    sm.install(OpenSM.QOS_POLICY, files[OpenSM.QOS_POLICY])
    since = sm.reload()

    assert sm.config_errors(since) == []
    tables = read_tables(sm.diag, ports)
    expected[first].discard(full(jobs))
    expected[second].discard(jobs)
    assert {guid: set(keys) for guid, keys in tables.items()} == expected


def _base_keys(ports: list[CaPort], storage: set[int], storage_key: int) -> dict[int, set[int]]:
    """Every CA port's keys before tenants: 0x7fff (full on the SM's port), storage's on its
    nodes' ports (full)."""
    expected = {
        p.guid: {full(DEFAULT_PKEY) if p.description == SM_HOST else DEFAULT_PKEY} for p in ports
    }
    for guid in storage:
        expected[guid].add(full(storage_key))
    return expected
