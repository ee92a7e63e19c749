"""Conformance: a consented peering (issue 13, item 4) on real OpenSM over ibsim.

Through the REST API: two internal tenants and an external one on the ibsim fat tree; research
requests a peering with labs, labs accepts it. OpenSM runs with the rendered files and every CA
port's P_Key table is read back (SMP): the peering's partition holds exactly both tenants' ports,
as full members, and a PathRecord between them exists in it. Ending the peering, reinstalling
the re-rendered partitions.conf and SIGHUP-ing OpenSM removes the key from every table.
"""

from __future__ import annotations

import pytest

from .conftest import FabricFactory, OpenSMFactory
from .harness import CaPort, OpenSM, base, full
from .test_opensm_end_to_end import (
    FABRIC,
    Api,
    _configs,
    api,
    fetch_artifacts,
    holders,
    ingest_fabric,
    ports_of,
    read_tables,
)

pytestmark = pytest.mark.conformance

__all__ = ["api"]  # the fixture, shared with test_opensm_end_to_end.py

TENANTS = {"research": "internal", "labs": "internal", "acme": "external"}


def onboard(api: Api) -> dict[str, int]:
    """Each tenant with two nodes; returns its own partition key (base form)."""
    keys = {}
    for name, kind in TENANTS.items():
        api.call("POST", "/v1/tenants", json={"name": name, "kind": kind})
        allocation = api.call(
            "POST", f"/v1/tenants/{name}/allocations", json={"fabric": FABRIC, "count": 2}
        )
        keys[name] = base(int(allocation["segment"]["pkey"], 16))
    return keys


def peer(api: Api) -> tuple[str, int]:
    """research requests, labs accepts; the peering's id and its partition's key."""
    request = api.call(
        "POST", "/v1/tenants/research/peerings", json={"fabric": FABRIC, "peer": "labs"}
    )
    accepted = api.call("POST", f"/v1/tenants/labs/peering-requests/{request['id']}/accept")
    assert accepted["state"] == "accepted", accepted
    return request["id"], base(int(accepted["segment"]["pkey"], 16))


def test_an_accepted_peering_shares_a_partition_until_it_ends(
    api: Api, sim_fabric_factory: FabricFactory, opensm_factory: OpenSMFactory
) -> None:
    fabric = sim_fabric_factory()
    ingest_fabric(api, fabric.ibnetdiscover())
    own_keys = onboard(api)
    tenant_ports = {name: ports_of(api, name) for name in TENANTS}
    peering_id, key = peer(api)

    sm = opensm_factory(fabric, **_configs(fetch_artifacts(api)))
    assert sm.config_errors() == []
    ports = fabric.ca_ports()
    tables = read_tables(sm.diag, ports)

    peers = tenant_ports["research"] | tenant_ports["labs"]
    assert holders(tables, key) == dict.fromkeys(peers, full(key))
    assert_own_partitions(tables, own_keys, tenant_ports)
    assert_path_between_peers(sm, ports, tenant_ports, key)

    api.call("DELETE", f"/v1/tenants/research/peerings/{peering_id}")
    sm.install(OpenSM.PARTITIONS, fetch_artifacts(api)[OpenSM.PARTITIONS])
    since = sm.reload()

    assert sm.config_errors(since) == []
    tables = read_tables(sm.diag, ports)
    assert holders(tables, key) == {}, f"0x{key:04x} still installed"
    assert_own_partitions(tables, own_keys, tenant_ports)


def assert_own_partitions(
    tables: dict[int, list[int]], keys: dict[str, int], tenant_ports: dict[str, set[int]]
) -> None:
    for name, key in keys.items():
        assert holders(tables, key) == dict.fromkeys(tenant_ports[name], full(key)), name


def assert_path_between_peers(
    sm: OpenSM, ports: list[CaPort], tenant_ports: dict[str, set[int]], key: int
) -> None:
    lid = {p.guid: p.lid for p in ports}
    research = min(lid[g] for g in tenant_ports["research"])
    labs = min(lid[g] for g in tenant_ports["labs"])
    acme = min(lid[g] for g in tenant_ports["acme"])

    record = sm.diag.path(research, labs, full(key))
    assert record is not None, "no path between the peers in their shared partition"
    assert base(record.pkey) == key
    assert sm.diag.path(research, acme, full(key)) is None, "acme reached through the peering"
