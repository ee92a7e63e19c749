"""RoCE fabrics through the API: settings, JSON/YAML inventory bodies, VRF segments in the JSON,
verification, per-leaf artifact downloads, refusals as problems that change nothing.

What the segments, route leaks and per-leaf files contain is tested at the tenancy tier
(tests/tenancy/test_grant_use_cases.py, test_verification_use_cases.py, ...)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
import yaml
from fastapi.testclient import TestClient

from tests.builders import (
    APPLICATION_JSON,
    APPLICATION_YAML,
    ROCE_ARTIFACT_PATHS,
    ROCE_FABRIC_SPEC,
    TEXT_PLAIN,
    Dump,
    RoceOnboarded,
    api_create_roce_fabric,
    api_onboard_roce,
    assert_problem,
    created,
    example_topology,
    ok,
    roce_inventory,
    roce_inventory_text,
    rows,
    sha256_hex,
)

FABRIC = "/v1/fabrics/roce-west"
TOPOLOGY = f"{FABRIC}/topology"
STORAGE_GRANT = {"fabric": "roce-west", "service": "storage"}
# What the onboarding hands out, lowest identifiers first: the service before the tenants.
SERVICE_SEGMENT = {
    "kind": "roce_vrf",
    "vrf": "Vrf50000",
    "l3vni": 50000,
    "l3vni_vlan": 101,
    "vlan": 100,
    "l2vni": 10000,
    "subnet": "10.64.0.0/24",
}
TENANT_SEGMENTS = {
    "acme": {
        "kind": "roce_vrf",
        "vrf": "Vrf50001",
        "l3vni": 50001,
        "l3vni_vlan": 103,
        "vlan": 102,
        "l2vni": 10001,
        "subnet": "10.64.1.0/24",
    },
    "research": {
        "kind": "roce_vrf",
        "vrf": "Vrf50002",
        "l3vni": 50002,
        "l3vni_vlan": 105,
        "vlan": 104,
        "l2vni": 10002,
        "subnet": "10.64.2.0/24",
    },
    "globex": {
        "kind": "roce_vrf",
        "vrf": "Vrf50003",
        "l3vni": 50003,
        "l3vni_vlan": 107,
        "vlan": 106,
        "l2vni": 10003,
        "subnet": "10.64.3.0/24",
    },
}
DEMO_NODES = ("gpu0001", "gpu0002", "gpu0003", "gpu0004", "gpu0005", "gpu0006", "stor01", "stor02")
# The leaf ports of the demo's hosts (the same port number on both leaves).
HOST_PORTS = {
    "gpu0001": "Ethernet0",
    "gpu0002": "Ethernet8",
    "gpu0003": "Ethernet16",
    "gpu0004": "Ethernet24",
    "gpu0005": "Ethernet32",
    "gpu0006": "Ethernet40",
    "stor01": "Ethernet48",
    "stor02": "Ethernet56",
}
Mutation = Callable[[dict[str, Any]], None]


@pytest.fixture
def roce_fabric(client: TestClient) -> str:
    """roce-west created, no inventory yet."""
    created(client.post("/v1/fabrics", json=ROCE_FABRIC_SPEC))
    return "roce-west"


@pytest.fixture
def imported(client: TestClient) -> dict[str, Any]:
    """roce-west with the demo inventory; returns the fabric as created."""
    return api_create_roce_fabric(client)


@pytest.fixture
def roce(roce_onboarded: RoceOnboarded) -> RoceOnboarded:
    """roce-west onboarded: storage service, acme/research/globex, acme granted storage (the
    session's seed, built through the use cases; `api_onboard_roce` is tested once below)."""
    return roce_onboarded


def without_link_ids(dump: Dump) -> Dump:
    """The dump with roce_link rows as (fabric, a port, b port): links are replaced on every
    import (tenancy/usecases/roce_topology.py), so their ids change (on PostgreSQL) though nothing
    else does."""
    return {**dump, "roce_link": sorted(row[1:] for row in dump["roce_link"])}


def put_inventory(
    client: TestClient, document: dict[str, Any] | str, headers: dict[str, str] | None = None
) -> httpx2.Response:
    text = document if isinstance(document, str) else json.dumps(document)
    return client.put(TOPOLOGY, content=text, headers=headers or APPLICATION_JSON)


def mutated(*mutations: Mutation) -> dict[str, Any]:
    document = roce_inventory()
    for mutate in mutations:
        mutate(document)
    return document


def switch(document: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in document["switches"] if s["name"] == name)
    return found


def node(document: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(n for n in document["nodes"] if n["name"] == name)
    return found


def artifact(client: TestClient, path: str) -> httpx2.Response:
    response = client.get(f"{FABRIC}/artifacts/{path}")
    assert response.status_code == 200, response.text
    return response


# --- fabric ----------------------------------------------------------------------------------


def test_a_roce_fabric_is_created_with_its_pools_and_limits_and_no_pkey_fields(client):
    body = created(client.post("/v1/fabrics", json=ROCE_FABRIC_SPEC))

    expected = {**ROCE_FABRIC_SPEC, "created_at": "2026-03-01T12:00:00Z"}
    assert body == expected
    assert ok(client.get(FABRIC)) == expected


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        pytest.param({"vlan_range": {"first": 200, "last": 100}}, "first", id="vlan-first>last"),
        pytest.param(
            {"vlan_range": {"first": 100, "last": 4095}}, "/body/vlan_range/last", id="vlan-4095"
        ),
        pytest.param(
            {"l2vni_range": {"first": 10000, "last": 50000}}, "overlap", id="l2-l3-vni-overlap"
        ),
        pytest.param({"rt_asn": 70000}, "/body/rt_asn", id="rt-asn-4-byte"),
        pytest.param({"host_mtu": 9200}, "9250", id="host-mtu-without-vxlan-room"),
        pytest.param({"tenant_prefix_length": 8}, "/8", id="prefix-shorter-than-pool"),
    ],
)
def test_invalid_roce_fabric_settings_are_a_422_naming_the_setting_and_change_nothing(
    client, db_dump, overrides, named
):
    before = db_dump()

    response = client.post("/v1/fabrics", json={**ROCE_FABRIC_SPEC, **overrides})

    body = assert_problem(response, 422, "validation-error")
    assert named in body["detail"]
    assert db_dump() == before
    assert_problem(client.get(FABRIC), 404, "not-found")


# --- inventory -------------------------------------------------------------------------------


def test_importing_the_demo_inventory_counts_switches_nodes_and_nics(client, roce_fabric):
    body = ok(put_inventory(client, roce_inventory_text()))

    assert (body["switches"], body["nodes"], body["ports"]) == (4, 8, 16)
    assert body["missing"] == []
    assert body["added"][0] == {
        "node": "gpu0001",
        "nic": "eth0",
        "switch": "leaf01",
        "port": "Ethernet0",
        "allocated": False,
        "action": "added",
    }
    assert [(c["node"], c["nic"], c["switch"], c["port"]) for c in body["added"]] == [
        (name, nic, leaf, HOST_PORTS[name])
        for name in DEMO_NODES
        for nic, leaf in (("eth0", "leaf01"), ("eth1", "leaf02"))
    ]


@pytest.mark.parametrize(
    "content_type",
    ["application/yaml", "application/x-yaml", "text/yaml", "application/yaml; charset=utf-8"],
)
def test_the_demo_inventory_as_yaml_imports_the_same_fabric_as_json(
    client, roce_fabric, content_type
):
    yaml_text = yaml.safe_dump(roce_inventory(), sort_keys=False)

    body = ok(put_inventory(client, yaml_text, {"content-type": content_type}))

    assert (body["switches"], body["nodes"], body["ports"]) == (4, 8, 16)
    assert len(body["added"]) == 16
    assert ok(client.get(f"{FABRIC}/nodes/stor02"))["nics"] == [
        {"name": "eth0", "switch": "leaf01", "port": "Ethernet56"},
        {"name": "eth1", "switch": "leaf02", "port": "Ethernet56"},
    ]


def test_reimporting_the_same_inventory_as_json_or_yaml_adds_nothing_and_changes_nothing(
    client, imported, db_dump
):
    before = without_link_ids(db_dump())

    again = ok(put_inventory(client, roce_inventory()))
    as_yaml = ok(put_inventory(client, yaml.safe_dump(roce_inventory()), APPLICATION_YAML))

    expected = {
        "switches": 4,
        "nodes": 8,
        "ports": 16,
        "added": [],
        "missing": [],
        "moved": [],
        "absent_nodes": [],
        "absent_switches": [],
    }
    assert again == expected
    assert as_yaml == expected
    after = without_link_ids(db_dump())
    new_entries = set(after.pop("audit_entry")) - set(before.pop("audit_entry"))
    assert [row[4] for row in new_entries] == ["topology.import", "topology.import"]
    assert after == before


def test_the_node_listing_shows_each_hosts_nics_and_no_hca_ports(client, imported):
    page = ok(client.get(f"{FABRIC}/nodes", params={"limit": 100}))

    assert page["count"] == 8
    assert [n["name"] for n in page["data"]] == list(DEMO_NODES)
    for listed in page["data"]:
        port = HOST_PORTS[listed["name"]]
        assert listed == {
            "name": listed["name"],
            "role": "compute",
            "state": "free",
            "tenant": None,
            "service": None,
            "ports": [],
            "nics": [
                {"name": "eth0", "switch": "leaf01", "port": port},
                {"name": "eth1", "switch": "leaf02", "port": port},
            ],
        }


def _add_link(a: str, b: str) -> Mutation:
    return lambda d: d["links"].append({"a": a, "b": b})


def _set_nic(name: str, index: int, **fields: str) -> Mutation:
    return lambda d: node(d, name)["nics"][index].update(fields)


def _set_switch(name: str, **fields: Any) -> Mutation:
    return lambda d: switch(d, name).update(fields)


def _drop_vtep(name: str) -> Mutation:
    return lambda d: switch(d, name).pop("vtep")


INVALID_INVENTORIES = [
    pytest.param(
        mutated(_add_link("leaf09:Ethernet0", "spine01:Ethernet0")), "leaf09", id="unknown-switch"
    ),
    pytest.param(
        mutated(lambda d: d["links"][0].update(b="spine01:Ethernet99")),
        "Ethernet99",
        id="unknown-port",
    ),
    pytest.param(
        mutated(_set_nic("gpu0002", 0, port="Ethernet0")),
        "leaf01:Ethernet0",
        id="port-cabled-twice",
    ),
    pytest.param(mutated(_set_nic("gpu0001", 0, switch="spine01")), "spine01", id="nic-on-a-spine"),
    pytest.param(mutated(_drop_vtep("leaf02")), "leaf02", id="leaf-without-vtep"),
    pytest.param(
        mutated(_set_switch("leaf01", loopback="10.0.0.300")), "loopback", id="bad-ip-address"
    ),
    pytest.param(mutated(_set_switch("spine02", asn=0)), "/switches/3/asn", id="asn-0"),
]


@pytest.mark.parametrize(("document", "named"), INVALID_INVENTORIES)
def test_an_inventory_that_does_not_fit_together_is_a_422_naming_the_item_and_changes_nothing(
    client, imported, db_dump, document, named
):
    before = db_dump()

    body = assert_problem(put_inventory(client, document), 422, "validation-error")

    assert named in body["detail"], body["detail"]
    assert db_dump() == before


def test_malformed_json_is_a_422_naming_the_line_and_changes_nothing(client, imported, db_dump):
    before = db_dump()
    text = '{\n  "switches": [\n    {"name": "leaf01",,}\n  ]\n}\n'

    body = assert_problem(put_inventory(client, text), 422, "invalid-document")

    assert body["line"] == 3
    assert body["detail"].startswith("line 3: "), body["detail"]
    assert db_dump() == before


def test_malformed_yaml_is_a_422_naming_the_line_and_changes_nothing(client, imported, db_dump):
    before = db_dump()
    text = "switches:\n  - name: leaf01\n    role: [leaf\nlinks: []\n"

    body = assert_problem(put_inventory(client, text, APPLICATION_YAML), 422, "invalid-document")

    assert isinstance(body["line"], int) and body["line"] >= 3
    assert "YAML" in body["detail"]
    assert db_dump() == before


def test_text_plain_to_a_roce_fabric_is_a_415_and_changes_nothing(client, imported, db_dump):
    before = db_dump()

    body = assert_problem(put_inventory(client, example_topology(), TEXT_PLAIN), 415)

    assert body["type"].endswith("unsupported-media-type")
    assert "application/json" in body["detail"]
    assert db_dump() == before


def test_a_json_inventory_to_an_infiniband_fabric_is_a_415_and_changes_nothing(client, db_dump):
    created(client.post("/v1/fabrics", json={"name": "ib-east", "kind": "infiniband"}))
    before = db_dump()

    response = client.put(
        "/v1/fabrics/ib-east/topology", content=roce_inventory_text(), headers=APPLICATION_JSON
    )

    body = assert_problem(response, 415, "unsupported-media-type")
    assert "text/plain" in body["detail"]
    assert db_dump() == before


def test_a_new_nic_on_the_port_of_a_kept_nic_is_a_409_port_moved_naming_the_port(
    client, roce, db_dump
):
    # gpu0001 (held by acme) vanishes, so its NICs are kept on leaf01/02:Ethernet0; the same
    # document cables a new host to leaf01:Ethernet0: the port would change host (issue 10).
    def replace_gpu0001(document: dict[str, Any]) -> None:
        node(document, "gpu0001").update(name="gpu0009")
        node(document, "gpu0009")["nics"].pop(1)

    before = db_dump()

    body = assert_problem(put_inventory(client, mutated(replace_gpu0001)), 409, "port-moved")

    assert body["moved"] == [{"port": "leaf01:Ethernet0", "from": "gpu0001", "to": "gpu0009"}]
    assert db_dump() == before


# --- segments, grants, verification ----------------------------------------------------------


def test_onboarding_over_http_hands_out_one_vrf_segment_per_owner_with_integer_identifiers(
    client,
):
    onboarded = api_onboard_roce(client)

    assert onboarded.service_segment == SERVICE_SEGMENT
    assert onboarded.segments == TENANT_SEGMENTS


def test_an_allocation_reads_back_with_its_roce_segment(client, roce):
    body = ok(client.get(f"/v1/tenants/research/allocations/{roce.allocation_ids['research']}"))

    assert body["segment"] == TENANT_SEGMENTS["research"]
    assert body["nodes"] == ["gpu0003", "gpu0004"]
    assert ok(client.get(f"{FABRIC}/services/storage"))["segment"] == SERVICE_SEGMENT


def test_a_roce_grant_shows_the_services_segment(client, roce):
    body = ok(client.get(f"/v1/tenants/acme/grants/{roce.grant_ids['acme']}"))

    assert body["segment"] == SERVICE_SEGMENT
    assert (body["tenant"], body["fabric"], body["service"]) == ("acme", "roce-west", "storage")


def test_the_onboarded_fabric_verifies_with_exactly_the_granted_storage_edge(client, roce):
    body = ok(client.get(f"{FABRIC}/verification"))

    assert body["holds"] is True
    assert body["counterexamples"] == []
    assert body["reachability"] == [
        {"from": "tenant:acme", "to": "service:storage", "segment": "50000", "allowed": True}
    ]
    assert {"route-leak", "qos-lossless-limit", "vni-duplicate"} <= set(body["rules"])


# --- artifacts -------------------------------------------------------------------------------


def test_the_artifacts_are_a_config_db_an_ownership_and_an_frr_conf_per_leaf(client, roce):
    manifest = ok(client.get(f"{FABRIC}/artifacts"))

    assert manifest["fabric"] == "roce-west"
    assert [f["path"] for f in manifest["files"]] == list(ROCE_ARTIFACT_PATHS)
    verdict = ok(client.get(f"{FABRIC}/verification"))
    assert manifest["snapshot_digest"] == verdict["snapshot_digest"]


def test_each_artifact_downloads_with_its_etag_and_the_snapshot_digest(client, roce):
    manifest = ok(client.get(f"{FABRIC}/artifacts"))

    for listed in manifest["files"]:
        response = artifact(client, listed["path"])
        assert response.headers["etag"] == f'"{listed["sha256"]}"'
        assert sha256_hex(response.content) == listed["sha256"]
        assert len(response.content) == listed["bytes"]
        assert response.headers["x-snapshot-digest"] == manifest["snapshot_digest"]


def test_an_unchanged_artifact_is_a_304_for_its_etag(client, roce):
    etag = artifact(client, "frr/leaf01/frr.conf").headers["etag"]

    response = client.get(
        f"{FABRIC}/artifacts/frr/leaf01/frr.conf", headers={"if-none-match": etag}
    )

    assert response.status_code == 304
    assert response.content == b""


# --- refusals --------------------------------------------------------------------------------


def test_an_exhausted_l3vni_pool_is_a_409_and_claims_nothing(client, db_dump, engine):
    api_create_roce_fabric(client, l3vni_range={"first": 50000, "last": 50001})
    for name in ("acme", "research", "globex"):
        created(client.post("/v1/tenants", json={"name": name, "kind": "external"}))
    for name in ("acme", "research"):
        created(
            client.post(f"/v1/tenants/{name}/allocations", json={"fabric": "roce-west", "count": 1})
        )
    before = db_dump()

    response = client.post(
        "/v1/tenants/globex/allocations", json={"fabric": "roce-west", "count": 1}
    )

    body = assert_problem(response, 409, "pool-exhausted")
    assert "L3VNI" in body["detail"]
    assert db_dump() == before
    assert rows(engine, "SELECT count(*) FROM segment") == [(12,)]


def test_a_third_lossless_class_in_use_is_a_409_naming_qos_lossless_limit(client, roce, db_dump):
    created(
        client.post(
            "/v1/qos-classes",
            json={
                "name": "platinum",
                "ib_sl": 4,
                "roce_dscp": 34,
                "roce_tc": 5,
                "lossless": True,
                "ets_weight": 1,
            },
        )
    )
    # gpu0001..6 are held; a platinum tenant needs a free node: release globex's first.
    ok(client.delete("/v1/tenants/globex"))
    created(
        client.post(
            "/v1/tenants", json={"name": "initech", "kind": "external", "qos_class": "platinum"}
        )
    )
    before = db_dump()

    response = client.post(
        "/v1/tenants/initech/allocations", json={"fabric": "roce-west", "count": 1}
    )

    body = assert_problem(response, 409, "isolation-violation")
    assert {c["rule"] for c in body["counterexamples"]} == {"qos-lossless-limit"}
    assert db_dump() == before


def test_a_grant_of_an_unknown_service_on_roce_is_a_404_and_changes_nothing(client, roce, db_dump):
    before = db_dump()

    response = client.post(
        "/v1/tenants/research/grants", json={"fabric": "roce-west", "service": "scratch"}
    )

    assert_problem(response, 404, "not-found")
    assert db_dump() == before


# --- offboarding -----------------------------------------------------------------------------
