"""Every limited text column is guarded by validation: the same 422 on every backend (issue 10, 13).

PostgreSQL enforces VARCHAR lengths and SQLite does not, so a value longer than its column used to
be a 500 on one backend and stored on the other. Every column with a length is listed here: either
a client can send its value (then a longer one is a 422 problem naming the member or the line, run
on SQLite and PostgreSQL), or the service derives it (then its longest value fits). A new limited
column fails `test_every_limited_column_is_classified` until it is added to one of the tables.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network
from typing import Any, get_args

import pytest
from fastapi.testclient import TestClient
from sqlmodel import SQLModel

import tenancy.models  # noqa: F401  (registers the tables)
from policies.infiniband.model import format_guid
from policies.infiniband.parse_ibnetdiscover import MAX_NODE_DESCRIPTION
from tenancy.schemas import TokenRole
from tenancy.schemas.deploy import LeafPart, ReportState, SmRole, TargetKind
from tenancy.schemas.partitions import MAX_GUID_RANGES
from tenancy.usecases.ufm_nodes import ORIGIN
from tests.builders import (
    ROCE_FABRIC_SPEC,
    TEXT_PLAIN,
    assert_problem,
    created,
    generated_topology,
    ok,
    roce_inventory,
)

LIMITS: dict[str, int] = {
    f"{table.name}.{column.name}": length
    for table in SQLModel.metadata.sorted_tables
    for column in table.columns
    if (length := getattr(column.type, "length", None))
}
UUID = str(uuid.uuid4())
IB = "/v1/fabrics/ib-west"
ROCE = f"/v1/fabrics/{ROCE_FABRIC_SPEC['name']}"


# --- values the service derives -------------------------------------------------------------

# column -> (where its value comes from, the longest value it can take, when that is computable)
# The longest virtual GUID setting a fabric stores (tenancy/record/virtual_guids.py).
_WIDEST = f"{format_guid(2**64 - 2)}-{format_guid(2**64 - 2)}"
_LONGEST_SETTING = len(
    json.dumps(
        {"enabled": False, "ranges": [_WIDEST] * MAX_GUID_RANGES, "sm": "nvidia"},
        sort_keys=True,
        separators=(",", ":"),
    )
)
DERIVED: dict[str, tuple[str, int | None]] = {
    "api_token.id": ("uuid4", len(UUID)),
    "api_token.parent_id": ("another token's id", len(UUID)),
    "api_token.role": ("TokenRole", max(map(len, get_args(TokenRole)))),
    "api_token.secret_sha256": ("hex SHA-256", len(hashlib.sha256().hexdigest())),
    "allocation.id": ("uuid4", len(UUID)),
    "allocation.origin": ("None or 'orchestrator' (tenancy/usecases/ufm_nodes.py)", len(ORIGIN)),
    "partition.origin": ("None or 'orchestrator' (tenancy/usecases/ufm_targets.py)", len(ORIGIN)),
    "facade_session.id": ("hex SHA-256 of the cookie's secret", len(hashlib.sha256().hexdigest())),
    "facade_session.credential_sha256": (
        "hex SHA-256 of the token",
        len(hashlib.sha256().hexdigest()),
    ),
    "grant.id": ("uuid4", len(UUID)),
    "proof.id": ("uuid4", len(UUID)),
    "proof.view": ("'full' or 'tenant'", len("tenant")),
    "proof.snapshot_digest": ("the v2 snapshot digest, v2:<hex>", len("v2:" + "0" * 64)),
    "audit_checkpoint.root_hash": ("base64 SHA-256", len(base64.b64encode(bytes(32)))),
    "audit_entry.principal": ("token:<name>:<id>", len(f"token:{'n' * 63}:{UUID}")),
    "audit_entry.role": ("TokenRole", max(map(len, get_args(TokenRole)))),
    "audit_entry.action": ("the use cases' action names, e.g. 'allocation.create'", None),
    "audit_entry.target": ("paths of slugs and uuids, e.g. 'tenants/acme/grants/<id>'", None),
    "audit_entry.fabric": ("fabric.name", 63),
    "audit_entry.digest_before": ("sha256:<hex>", len("sha256:" + "0" * 64)),
    "audit_entry.digest_after": ("sha256:<hex>", len("sha256:" + "0" * 64)),
    "audit_entry.leaf_hash": ("hex SHA-256", len(hashlib.sha256().hexdigest())),
    "idempotency_record.principal": ("token:<id> or a principal's name", len(f"token:{UUID}")),
    "idempotency_record.method": ("POST, PUT, PATCH or DELETE", len("DELETE")),
    "idempotency_record.path": ("api/idempotency.py skips a path longer than 512", 512),
    "idempotency_record.key": ("api/idempotency.py: 1 to 255 printable characters", 255),
    "idempotency_record.fingerprint": ("hex SHA-256", len(hashlib.sha256().hexdigest())),
    "signing_key.name": ("ISOFABRIC_AUDIT_ORIGIN (+ '.rN'): operator configuration", None),
    "signing_key.status": ("'active' or 'retired'", len("retired")),
    "fabric.kind": ("'infiniband' or 'roce'", len("infiniband")),
    "node.role": ("compute, storage or management", len("management")),
    "node.state": ("policies.node_state", len("allocated")),
    "switch.guid": ("format_guid", len(format_guid(2**64 - 1))),
    "port.guid": ("format_guid", len(format_guid(2**64 - 1))),
    "partition_member.guid": ("format_guid", len(format_guid(2**64 - 1))),
    "virtual_guid.guid": ("format_guid", len(format_guid(2**64 - 1))),
    "virtual_guid.state": ("'bound' or 'draining'", len("draining")),
    "fabric.virtual_guids": ("compact JSON of at most 64 ranges", _LONGEST_SETTING),
    "port.switch_guid": ("format_guid", len(format_guid(2**64 - 1))),
    "roce_fabric_settings.tenant_prefix_pool": (
        "an IPv4 network",
        len(str(IPv4Network("255.255.255.255/32"))),
    ),
    "roce_switch.role": ("'leaf' or 'spine'", len("spine")),
    "roce_switch.loopback": ("an IPv4 address", len(str(IPv4Address("255.255.255.255")))),
    "roce_switch.vtep": ("an IPv4 address", len(str(IPv4Address("255.255.255.255")))),
    "roce_switch.platform": ("'sonic'", len("sonic")),
    "segment.kind": ("pool names: pkey, vlan, vni, subnet, rd", len("subnet")),
    "segment.purpose": ("pkey, vlan, l3vni_vlan, l2vni, l3vni, subnet, rd", len("l3vni_vlan")),
    "segment.state": ("'active' or 'quarantined'", len("quarantined")),
    "segment.peering_id": ("peering.id", len(UUID)),
    "peering.id": ("uuid4", len(UUID)),
    "scheduled_run.job": ("tenancy/usecases/scheduler.py's job names", len("full-verification")),
    "scheduled_run.replica": ("host:pid, cut to 128 (scheduler.replica_name)", 128),
    "scheduled_run.outcome": ("'running', 'ok' or 'failed'", len("running")),
    "scheduled_run.detail": ("a run's summary or error, cut to 1024 (scheduler.py)", 1024),
    "peering.state": ("'requested', 'accepted' or 'ended'", len("requested")),
    "peering.requested_by": ("token:<name>:<id>", len(f"token:{'n' * 63}:{UUID}")),
    "peering.accepted_by": ("token:<name>:<id>", len(f"token:{'n' * 63}:{UUID}")),
    "peering.ended_by": ("token:<name>:<id>", len(f"token:{'n' * 63}:{UUID}")),
    "tenant.kind": ("'internal' or 'external'", len("internal")),
    "policy_version.fingerprint": ("Policy.fingerprint, sha256:<hex>", len("sha256:" + "0" * 64)),
    "policy_version.created_by": ("token:<name>:<id>", len(f"token:{'n' * 63}:{UUID}")),
    "tenant.status": ("'active' or 'offboarded'", len("offboarded")),
    "usage_interval.billing_account": ("tenant.billing_account or tenant.name", 64),
    "usage_interval.qos_class": ("qos_class.name", 63),
    "usage_interval.resource_type": ("'node' or 'service'", len("service")),
    "usage_interval.resource": ("node.name or service.name", 63),
    "snapshot_record.digest": ("sha256:<hex>", len("sha256:" + "0" * 64)),
    "snapshot_file.digest": ("sha256:<hex>", len("sha256:" + "0" * 64)),
    "snapshot_file.sha256": ("hex SHA-256", len(hashlib.sha256().hexdigest())),
    "snapshot_file.path": ("the renderers' bundle paths, e.g. 'leaf01/config_db.json'", None),
    "artifact_blob.sha256": ("hex SHA-256", len(hashlib.sha256().hexdigest())),
    "cached_read.digest": ("the snapshot log's digest, v2:<hex>", len("v2:" + "0" * 64)),
    "cached_read.inputs": (
        "hex SHA-256 (read_cache.fingerprint)",
        len(hashlib.sha256().hexdigest()),
    ),
    "cached_read.name": ("'verification.json' or a renderer's bundle path", None),
    "cached_read.sha256": ("hex SHA-256", len(hashlib.sha256().hexdigest())),
    "fabric_digest.digest": ("the v2 snapshot digest, v2:<hex>", len("v2:" + "0" * 64)),
    "fabric_digest.checked_digest": ("the v2 snapshot digest, v2:<hex>", len("v2:" + "0" * 64)),
    "fabric_digest.alarm": ("full_check's message: two digests and fixed words", None),
    "digest_group.key": ("'fabric', 'node:<node name>' or 'owner:<kind>:<slug>'", None),
    "deploy_target.kind": ("TargetKind", max(map(len, get_args(TargetKind)))),
    "deploy_target.state": ("ReportState", max(map(len, get_args(ReportState)))),
    "deploy_target.role": ("SmRole", max(map(len, get_args(SmRole)))),
    "deploy_target.digest": ("sha256:<hex>", len("sha256:" + "0" * 64)),
    "deploy_target.deployed": ("sha256:<hex>", len("sha256:" + "0" * 64)),
    "deploy_target.observed_digest": ("sha256:<hex>", len("sha256:" + "0" * 64)),
    "deploy_target.phase_digest": ("sha256:<hex>", len("sha256:" + "0" * 64)),
    "deploy_target.frr_digest": ("sha256:<hex>", len("sha256:" + "0" * 64)),
    "deploy_target.covers": ("LeafPart values joined by commas", len(",".join(get_args(LeafPart)))),
    "deployment_report.state": ("ReportState", max(map(len, get_args(ReportState)))),
    "deployment_report.role": ("SmRole", max(map(len, get_args(SmRole)))),
    "deployment_report.digest": ("sha256:<hex>", len("sha256:" + "0" * 64)),
    "deployment_report.observed_digest": ("sha256:<hex>", len("sha256:" + "0" * 64)),
    "deployment_report.target": ("deploy_target.name (a Slug path parameter)", 63),
    "deployment_report.principal": ("token:<name>:<id>", len(f"token:{'n' * 63}:{UUID}")),
}


# --- values a client sends ------------------------------------------------------------------


@dataclass(frozen=True)
class Input:
    """A request that sends a value of `length` characters to a column."""

    send: Callable[[TestClient, int], Any]
    pointer: str | None = None  # the 422's errors[].pointer
    line: int | None = None  # the 422's line (ibnetdiscover)
    status: int = 422


def _ib_fabric(client: TestClient, text: str) -> Any:
    created(client.post("/v1/fabrics", json={"name": "ib-west", "kind": "infiniband"}))
    return client.put(f"{IB}/topology", content=text, headers=TEXT_PLAIN)


def _ca_only(hostname: str = "gpu0001", hca: str = "mlx5_0", switch: str = "leaf01") -> str:
    """One HCA cabled to a switch that has no record in the file (its name is the port's)."""
    return "\n".join(
        [
            "vendid=0x0",
            "devid=0x0",
            "sysimgguid=0x100002",
            "caguid=0x100002",
            f'Ca\t1 "H-0000000000100002"\t\t# "{hostname} {hca}"',
            f'[1](100003) \t"S-0000000000200000"[1]\t\t# lid 2 lmc 0 "{switch}" lid 1 4xSDR',
            "",
        ]
    )


def _switch_named(name: str) -> str:
    return generated_topology(["gpu0001"]).replace('# "leaf01" base', f'# "{name}" base')


def _roce(client: TestClient, path: tuple[Any, ...], value: Any) -> Any:
    created(client.post("/v1/fabrics", json=ROCE_FABRIC_SPEC))
    document = roce_inventory()
    target = document
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return client.put(f"{ROCE}/topology", json=document)


def _facade_label(field: str) -> Callable[[TestClient, int], Any]:
    """``pkeys/add`` on the UFM-compatible API with a label of n characters in `field`."""

    def send(client: TestClient, length: int) -> Any:
        path = "/fabrics/ib-east/ufmRest/resources/pkeys/add"
        return client.post(path, json={"pkey": "0x200", field: "l" * length})

    return send


def _lanes(length: int) -> str:
    lanes = ",".join(["1000"] * 16)  # 79 characters: the pattern's longest
    return lanes[:length].rstrip(",")


INPUTS: dict[str, list[Input]] = {
    "fabric.name": [
        Input(
            lambda c, n: c.post("/v1/fabrics", json={"name": "f" * n, "kind": "infiniband"}),
            "/body/name",
        )
    ],
    "qos_class.name": [
        Input(
            lambda c, n: c.post("/v1/qos-classes", json={"name": "q" * n, "ib_sl": 1}), "/body/name"
        )
    ],
    "tenant.name": [
        Input(
            lambda c, n: c.post("/v1/tenants", json={"name": "t" * n, "kind": "internal"}),
            "/body/name",
        )
    ],
    "tenant.billing_account": [
        Input(
            lambda c, n: c.post(
                "/v1/tenants", json={"name": "zeta", "kind": "internal", "billing_account": "b" * n}
            ),
            "/body/billing_account",
        )
    ],
    "service.name": [
        Input(
            lambda c, n: c.post(f"{IB}/services", json={"name": "s" * n, "nodes": ["gpu0001"]}),
            "/body/name",
        )
    ],
    "api_token.name": [
        Input(
            lambda c, n: c.post("/v1/tokens", json={"name": "k" * n, "role": "operator"}),
            "/body/name",
        )
    ],
    "api_token.tenant": [
        Input(
            lambda c, n: c.post(
                "/v1/tokens", json={"name": "k", "role": "tenant-viewer", "tenant": "t" * n}
            ),
            "/body/tenant",
        )
    ],
    "api_token.fabric": [
        Input(
            lambda c, n: c.post(
                "/v1/tokens",
                json={"name": "k", "role": "agent", "fabric": "f" * n, "target": "sm-a"},
            ),
            "/body/fabric",
        )
    ],
    "api_token.target": [
        Input(
            lambda c, n: c.post(
                "/v1/tokens",
                json={"name": "k", "role": "agent", "fabric": "ib-east", "target": "t" * n},
            ),
            "/body/target",
        )
    ],
    "deploy_target.name": [
        Input(lambda c, n: c.put(f"{IB}/targets/{'t' * n}", json={"kind": "opensm"}))
    ],
    "partition.name": [
        Input(
            lambda c, n: c.post(
                "/v1/tenants/acme/partitions", json={"fabric": "ib-east", "name": "p" * n}
            ),
            "/body/name",
        )
    ],
    # A UFM client's partition_name (6.22) or pkey_name_prefix (6.21): the facade's 400.
    "partition.label": [
        Input(_facade_label("partition_name"), status=400),
        Input(_facade_label("pkey_name_prefix"), status=400),
    ],
    "proof.fabric": [
        Input(
            lambda c, n: c.post("/v1/tenants/acme/isolation-proofs", json={"fabric": "f" * n}),
            "/body/fabric",
        )
    ],
    # The tenant comes from the path: one nobody created is not found, whatever its length.
    "proof.tenant": [
        Input(
            lambda c, n: c.post(f"/v1/tenants/{'t' * n}/isolation-proofs", json={"fabric": "f"}),
            status=404,
        )
    ],
    # A well-formed X-Request-ID has at most 64 characters; a longer one is replaced by a UUID.
    "audit_entry.request_id": [
        Input(
            lambda c, n: c.post(
                "/v1/tenants",
                json={"name": "zeta", "kind": "internal"},
                headers={"X-Request-ID": "r" * n},
            ),
            status=201,
        )
    ],
    "roce_fabric_settings.anycast_gateway_mac": [
        Input(
            lambda c, n: c.post(
                "/v1/fabrics", json={**ROCE_FABRIC_SPEC, "anycast_gateway_mac": "0" * n}
            ),
            "/body/anycast_gateway_mac",
        )
    ],
    "switch.name": [Input(lambda c, n: _ib_fabric(c, _switch_named("s" * n)), line=5)],
    "port.switch_name": [Input(lambda c, n: _ib_fabric(c, _ca_only(switch="s" * n)), line=6)],
    "port.hca": [Input(lambda c, n: _ib_fabric(c, _ca_only(hca="m" * n)), line=5)],
    "node.name": [
        Input(lambda c, n: _ib_fabric(c, _ca_only(hostname="h" * n)), line=5),
        Input(lambda c, n: _roce(c, ("nodes", 0, "name"), "h" * n), "/nodes/0/name"),
    ],
    "nic.name": [
        Input(
            lambda c, n: _roce(c, ("nodes", 0, "nics", 0, "name"), "e" * n), "/nodes/0/nics/0/name"
        )
    ],
    "roce_switch.name": [
        Input(lambda c, n: _roce(c, ("switches", 0, "name"), "l" * n), "/switches/0/name")
    ],
    "roce_switch_port.name": [
        Input(
            lambda c, n: _roce(c, ("switches", 0, "ports", 0, "name"), "Ethernet" + "0" * n),
            "/switches/0/ports/0/name",
        )
    ],
    # The realistic overflow: 16 lanes of four digits (79 characters) was a 500 on PostgreSQL.
    "roce_switch_port.lanes": [
        Input(
            lambda c, n: _roce(c, ("switches", 0, "ports", 0, "lanes"), _lanes(79)),
            "/switches/0/ports/0/lanes",
        )
    ],
    "roce_switch_port.cable_length": [
        Input(
            lambda c, n: _roce(c, ("switches", 0, "ports", 0, "cable_length"), "1" * n + "m"),
            "/switches/0/ports/0/cable_length",
        )
    ],
}


def test_every_limited_column_is_classified():
    assert set(LIMITS) == set(DERIVED) | set(INPUTS)
    assert not set(DERIVED) & set(INPUTS)


@pytest.mark.parametrize("column", sorted(c for c, (_, longest) in DERIVED.items() if longest))
def test_a_derived_value_fits_its_column(column):
    _reason, longest = DERIVED[column]

    assert longest is not None and longest <= LIMITS[column]


CASES = [
    pytest.param(column, index, id=f"{column}-{index}")
    for column, inputs in sorted(INPUTS.items())
    for index in range(len(inputs))
]


@pytest.mark.parametrize(("column", "index"), CASES)
def test_a_value_longer_than_its_column_is_refused_by_validation(client, db_dump, column, index):
    case = INPUTS[column][index]

    response = case.send(client, LIMITS[column] + 1)

    if case.status != 422:
        assert response.status_code == case.status, response.text
        return
    body = assert_problem(response, 422)
    if case.pointer is not None:
        assert case.pointer in {error["pointer"] for error in body["errors"]}, body
    if case.line is not None:
        assert (body["type"], body["line"]) == ("/problems/invalid-document", case.line), body


# --- values at the limit are stored on every backend ------------------------------------------


def test_a_switch_name_of_64_characters_is_stored(client):
    name = "MF0;" + "s" * (MAX_NODE_DESCRIPTION - 4)

    ok(_ib_fabric(client, _switch_named(name)))

    port = ok(client.get(f"{IB}/nodes/gpu0001"))["ports"][0]
    assert (len(name), port["switch"]) == (LIMITS["switch.name"], name)


def test_names_at_their_limit_from_a_port_line_are_stored(client):
    hostname, hca, switch = "h" * 63, "m" * 32, "s" * 64

    ok(_ib_fabric(client, _ca_only(hostname, hca, switch)))

    port = ok(client.get(f"{IB}/nodes/{hostname}"))["ports"][0]
    assert (port["hca"], port["switch"]) == (hca, switch)


def test_an_inventory_at_its_limits_is_stored(client):
    lanes = _lanes(64)

    ok(_roce(client, ("switches", 0, "ports", 0, "lanes"), lanes))

    assert len(lanes) == LIMITS["roce_switch_port.lanes"]


def test_a_billing_account_of_64_characters_is_stored(client):
    account = "b" * LIMITS["tenant.billing_account"]

    body = created(
        client.post(
            "/v1/tenants", json={"name": "zeta", "kind": "internal", "billing_account": account}
        )
    )

    assert body["billing_account"] == account
