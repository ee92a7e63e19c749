"""Numbers in bodies and documents are JSON integers within their standard's bounds (issue 10, 11).

FastAPI validates a parsed body in pydantic's Python mode, where a lax ``int`` takes ``true``,
``"2"`` and ``2.0``; every number is strict, and bounded by the standard it feeds (SONiC YANG,
RFC 7348/7432, IBA). Addresses and pools must be routable unicast. Every refusal is a 422
problem naming the member, on SQLite and PostgreSQL alike, and never a 500.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from tenancy.schemas import RoceInventory
from tests.builders import (
    APPLICATION_JSON,
    APPLICATION_YAML,
    ROCE_FABRIC_SPEC,
    assert_problem,
    created,
    ok,
    roce_inventory,
)

ROCE_TOPOLOGY = f"/v1/fabrics/{ROCE_FABRIC_SPEC['name']}/topology"
NOT_AN_INTEGER = "Input should be a valid integer"

# --- every number is strict -----------------------------------------------------------------


def _lax_scalars(schema: Any, path: str = "") -> Iterator[str]:
    """Paths in a pydantic-core schema of int, float and bool validators that coerce."""
    if isinstance(schema, dict):
        if schema.get("type") in {"int", "float", "bool"} and not schema.get("strict"):
            yield path or "/"
        for key, value in schema.items():
            if key not in {"cls", "metadata"}:
                yield from _lax_scalars(value, f"{path}/{key}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            yield from _lax_scalars(value, f"{path}/{index}")


def _routes(routes: list[Any]) -> Iterator[APIRoute]:
    """Every endpoint, looking into included routers (FastAPI keeps them whole)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _routes(included.routes)
        elif isinstance(route, APIRoute):
            yield route


def _request_shapes(client: TestClient) -> dict[str, Any]:
    app: Any = client.app
    shapes: dict[str, Any] = {
        f"{sorted(r.methods or ())[0]} {r.path}": r.body_field.field_info.annotation
        for r in _routes(app.router.routes)
        if r.body_field is not None
    }
    # PUT .../topology reads its body as text and validates RoCE inventories itself.
    return shapes | {"PUT /v1/fabrics/{fabric}/topology (inventory)": RoceInventory}


def test_every_number_and_flag_a_client_sends_is_strict(client):
    shapes = _request_shapes(client)

    lax = {
        name: found
        for name, shape in shapes.items()
        if (found := sorted(set(_lax_scalars(TypeAdapter(shape).core_schema))))
    }

    assert "POST /v1/tenants/{tenant}/allocations" in shapes
    assert lax == {}


Post = Callable[[TestClient, Any], Any]


def _allocate(client: TestClient, count: Any) -> Any:
    return client.post("/v1/tenants/acme/allocations", json={"fabric": "ib-east", "count": count})


def _qos(client: TestClient, ib_sl: Any) -> Any:
    return client.post("/v1/qos-classes", json={"name": "platinum", "ib_sl": ib_sl})


def _ib_fabric(client: TestClient, budget: Any) -> Any:
    body = {"name": "ib-west", "kind": "infiniband", "pkeys_per_port": budget}
    return client.post("/v1/fabrics", json=body)


def _host_mtu(client: TestClient, mtu: Any) -> Any:
    return client.post("/v1/fabrics", json={**ROCE_FABRIC_SPEC, "host_mtu": mtu})


def _vlan_first(client: TestClient, first: Any) -> Any:
    vlans = {"first": first, "last": 3999}
    return client.post("/v1/fabrics", json={**ROCE_FABRIC_SPEC, "vlan_range": vlans})


def _lossless(client: TestClient, value: Any) -> Any:
    return client.post("/v1/qos-classes", json={"name": "platinum", "ib_sl": 4, "lossless": value})


def _lid(client: TestClient, lid: Any) -> Any:
    port = {"guid": "0x0000000000100003", "lid": lid, "pkeys": []}
    body = {"kind": "infiniband", "ports": [port]}
    return client.post("/v1/fabrics/ib-east/observations", json=body)


# (request, the member's pointer, a valid value, what a valid request answers)
NUMBERS = {
    "allocation-count": (_allocate, "/body/count", 2, 201),
    "qos-ib-sl": (_qos, "/body/ib_sl", 4, 201),
    "ib-pkeys-per-port": (_ib_fabric, "/body/pkeys_per_port", 64, 201),
    "roce-host-mtu": (_host_mtu, "/body/host_mtu", 9000, 201),
    "roce-vlan-first": (_vlan_first, "/body/vlan_range/first", 100, 201),
    "observed-lid": (_lid, "/body/ports/0/lid", 5, 200),
}


def _errors(body: dict[str, Any]) -> dict[str, str]:
    return {error["pointer"]: error["detail"] for error in body["errors"]}


@pytest.mark.parametrize("name", NUMBERS)
@pytest.mark.parametrize("spelling", ["true", "string", "float"])
def test_a_number_that_is_not_a_json_integer_is_a_422_naming_it(
    client, onboarded, db_dump, name, spelling
):
    send, pointer, valid, _status = NUMBERS[name]
    value = {"true": True, "string": str(valid), "float": float(valid)}[spelling]
    before = db_dump()

    body = assert_problem(send(client, value), 422, "validation-error")

    assert _errors(body)[pointer] == NOT_AN_INTEGER
    assert db_dump() == before


@pytest.mark.parametrize("name", NUMBERS)
def test_the_same_number_as_a_json_integer_is_accepted(client, onboarded, name):
    send, _pointer, valid, status = NUMBERS[name]

    response = send(client, valid)

    assert response.status_code == status, response.text


@pytest.mark.parametrize("value", [1, "true", "yes"])
def test_a_flag_that_is_not_a_json_boolean_is_a_422_naming_it(client, value):
    body = assert_problem(_lossless(client, value), 422, "validation-error")

    assert "/body/lossless" in _errors(body)


# --- documents ------------------------------------------------------------------------------


def _put_inventory(client: TestClient, document: dict[str, Any], as_yaml: bool) -> Any:
    if as_yaml:
        text = yaml.safe_dump(document)
        return client.put(ROCE_TOPOLOGY, content=text, headers=APPLICATION_YAML)
    return client.put(ROCE_TOPOLOGY, json=document, headers=APPLICATION_JSON)


def _inventory_with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    document = copy.deepcopy(roce_inventory())
    target = document
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return document


SPEED = ("switches", 0, "ports", 0, "speed")
ASN = ("switches", 0, "asn")


@pytest.mark.parametrize("as_yaml", [False, True], ids=["json", "yaml"])
@pytest.mark.parametrize(
    ("path", "value"),
    [(SPEED, "400000"), (SPEED, 400000.0), (ASN, True), (ASN, "65101")],
    ids=["speed-string", "speed-float", "asn-true", "asn-string"],
)
def test_an_inventory_number_that_is_not_an_integer_is_a_422_naming_it(
    client, db_dump, as_yaml, path, value
):
    created(client.post("/v1/fabrics", json=ROCE_FABRIC_SPEC))
    before = db_dump()

    response = _put_inventory(client, _inventory_with(path, value), as_yaml)

    body = assert_problem(response, 422, "validation-error")
    assert _errors(body)["/" + "/".join(map(str, path))] == NOT_AN_INTEGER
    assert db_dump() == before


# --- bounds ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("member", "value"),
    [
        ("host_mtu", -1),  # the example: it rendered as "mtu": "-1"
        ("host_mtu", 67),
        ("underlay_mtu", 9217),
        ("underlay_mtu", -(2**40)),
        ("rt_asn", 0),
        ("tenant_prefix_length", 31),
        ("max_lossless_priorities", 0),
        ("max_lossless_priorities", 9),
        ("vlan_range", {"first": 1, "last": 100}),
        ("vlan_range", {"first": 100, "last": 4095}),
        ("l2vni_range", {"first": 0, "last": 100}),
        ("l3vni_range", {"first": 50000, "last": 2**24}),
        ("tenant_prefix_pool", "0.0.0.0/0"),  # the example: it handed out 0.0.0.0/8
        ("tenant_prefix_pool", "0.0.0.0/8"),
        ("tenant_prefix_pool", "127.0.0.0/8"),
        ("tenant_prefix_pool", "169.254.0.0/16"),
        ("tenant_prefix_pool", "169.0.0.0/8"),
        ("tenant_prefix_pool", "224.0.0.0/8"),
        ("tenant_prefix_pool", "240.0.0.0/8"),
        ("tenant_prefix_pool", "255.255.255.255/32"),
        ("tenant_prefix_pool", "10.0.0.0/7"),
    ],
)
def test_a_roce_setting_outside_its_bounds_is_a_422_naming_it(client, db_dump, member, value):
    before = db_dump()

    response = client.post("/v1/fabrics", json={**ROCE_FABRIC_SPEC, member: value})

    body = assert_problem(response, 422, "validation-error")
    assert any(p.startswith(f"/body/{member}") for p in _errors(body)), body
    assert db_dump() == before


@pytest.mark.parametrize(
    "changes",
    [
        {"host_mtu": 68, "underlay_mtu": 118},
        {"host_mtu": 9166, "underlay_mtu": 9216},
        {"vlan_range": {"first": 2, "last": 4094}},
        {
            "l2vni_range": {"first": 1, "last": 49999},
            "l3vni_range": {"first": 50000, "last": 2**24 - 1},
        },
        {"tenant_prefix_pool": "10.0.0.0/8", "tenant_prefix_length": 8},
        {"tenant_prefix_pool": "100.64.0.0/10"},
        {"tenant_prefix_pool": "192.168.0.0/16", "tenant_prefix_length": 30},
        {"rt_asn": 65535, "max_lossless_priorities": 8},
    ],
)
def test_roce_settings_at_their_bounds_are_accepted(client, changes):
    created(client.post("/v1/fabrics", json={**ROCE_FABRIC_SPEC, **changes}))


@pytest.mark.parametrize(
    ("member", "value"),
    [
        ("ib_sl", 16),
        ("ib_mtu", 6),
        ("vlarb_weight", 256),
        ("roce_dscp", 64),
        ("roce_tc", 8),
        ("ets_weight", 101),
        ("ecn_min_bytes", 2**31),  # a 500 on PostgreSQL (integer out of range) before
        ("ecn_max_bytes", 2**40),
        ("ecn_probability", 0),
        ("ecn_probability", 101),
    ],
)
def test_a_qos_value_outside_its_bounds_is_a_422_naming_it(client, db_dump, member, value):
    before = db_dump()

    response = client.post("/v1/qos-classes", json={"name": "platinum", "ib_sl": 4, member: value})

    body = assert_problem(response, 422, "validation-error")
    assert f"/body/{member}" in _errors(body)
    assert db_dump() == before


def test_the_largest_queue_thresholds_are_stored_on_every_backend(client):
    spec = {"name": "platinum", "ib_sl": 4, "ecn_min_bytes": 2**31 - 1, "ecn_max_bytes": 2**31 - 1}

    assert created(client.post("/v1/qos-classes", json=spec))["ecn_max_bytes"] == 2**31 - 1


@pytest.mark.parametrize("count", [0, 100_001])
def test_an_allocation_count_outside_1_to_100000_is_a_422(client, onboarded, count):
    body = assert_problem(_allocate(client, count), 422, "validation-error")

    assert "/body/count" in _errors(body)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("switches", 0, "asn"), 0),
        (("switches", 0, "asn"), 2**32 - 1),  # RFC 7300: reserved
        (("switches", 0, "loopback"), "127.0.0.1"),
        (("switches", 0, "loopback"), "0.0.0.0"),
        (("switches", 0, "loopback"), "169.254.0.1"),
        (("switches", 0, "vtep"), "224.0.0.5"),
        (("switches", 0, "vtep"), "255.255.255.255"),
        (("switches", 0, "ports", 0, "speed"), 1_600_001),
    ],
)
def test_an_inventory_value_outside_its_bounds_is_a_422_naming_it(client, db_dump, path, value):
    created(client.post("/v1/fabrics", json=ROCE_FABRIC_SPEC))
    before = db_dump()

    response = _put_inventory(client, _inventory_with(path, value), as_yaml=False)

    body = assert_problem(response, 422, "validation-error")
    assert "/" + "/".join(map(str, path)) in _errors(body)
    assert db_dump() == before


def test_a_private_four_byte_asn_is_stored_on_every_backend(client):
    # RFC 6996: 4200000000-4294967294 are private; PostgreSQL's INTEGER stopped at 2147483647.
    created(client.post("/v1/fabrics", json=ROCE_FABRIC_SPEC))
    document = _inventory_with(("switches", 0, "asn"), 4_294_967_294)

    ok(_put_inventory(client, document, as_yaml=False))
    frr = client.get(f"/v1/fabrics/{ROCE_FABRIC_SPEC['name']}/artifacts/frr/leaf01/frr.conf")

    assert "router bgp 4294967294" in frr.text
