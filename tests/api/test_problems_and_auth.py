"""Cross-cutting HTTP behaviour: bearer token, problem+json for every error, body limits, docs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.builders import TEXT_PLAIN, assert_problem, created, example_topology, ok

TOKEN = "s3cret-operator-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ACME = {"name": "acme", "kind": "external", "qos_class": "gold"}


@pytest.fixture
def guarded(make_client):
    """A client of an app that requires the admin token."""
    return make_client(admin_token=TOKEN)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
        {"Authorization": "Bearer"},
    ],
    ids=["none", "wrong", "longer", "basic-scheme", "no-scheme", "empty-bearer"],
)
def test_a_request_without_the_right_bearer_token_is_a_401_problem(guarded, headers):
    response = guarded.get("/v1/tenants", headers=headers)

    assert_problem(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "path",
    [
        "/v1/fabrics",
        "/v1/qos-classes",
        "/v1/tenants/acme",
        "/v1/tenants/acme/allocations",
        "/v1/fabrics/ib-east/nodes",
        "/v1/fabrics/ib-east/artifacts/opensm/partitions.conf",
    ],
)
def test_every_v1_read_needs_the_token(guarded, path):
    assert_problem(guarded.get(path), 401, "unauthorized")


def test_an_unauthenticated_mutation_is_a_401_and_changes_nothing(guarded, db_dump):
    before = db_dump()

    assert_problem(guarded.post("/v1/tenants", json=ACME), 401, "unauthorized")
    assert_problem(
        guarded.put("/v1/fabrics/ib-east/topology", content=example_topology(), headers=TEXT_PLAIN),
        401,
        "unauthorized",
    )
    assert_problem(guarded.delete("/v1/tenants/acme"), 401, "unauthorized")
    assert db_dump() == before


def test_an_unauthenticated_request_with_a_malformed_body_is_a_401_not_a_422(guarded, db_dump):
    before = db_dump()

    response = guarded.post(
        "/v1/tenants", content=b"{not json", headers={"content-type": "application/json"}
    )

    assert_problem(response, 401, "unauthorized")
    assert db_dump() == before


def test_with_the_admin_token_requests_succeed(guarded):
    assert created(guarded.post("/v1/tenants", json=ACME, headers=AUTH))["name"] == "acme"
    assert ok(guarded.get("/v1/tenants", headers=AUTH))["count"] == 1


def test_without_a_configured_token_no_authorization_is_needed(client):
    assert ok(client.get("/v1/tenants")) == {"data": [], "count": 0, "next": None}


def test_the_openapi_document_and_the_docs_are_served(guarded):
    schema = guarded.get("/openapi.json")
    docs = guarded.get("/docs")

    assert schema.status_code == 200
    assert {"/v1/fabrics", "/v1/tenants", "/v1/fabrics/{fabric}/topology"} <= schema.json()[
        "paths"
    ].keys()
    assert docs.status_code == 200
    assert docs.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize("path", ["/v2/fabrics", "/v1/fabric", "/v1/tenants/acme/nodes", "/"])
def test_an_unknown_route_is_a_404_problem(client, path):
    body = assert_problem(client.get(path), 404)

    assert path in body["detail"]


@pytest.mark.parametrize(
    ("method", "path", "supported"),
    [
        ("DELETE", "/v1/fabrics", {"GET", "POST"}),
        ("PUT", "/v1/tenants", {"GET", "POST"}),
        ("POST", "/v1/fabrics/ib-east/topology", {"PUT"}),
        ("PATCH", "/v1/qos-classes", {"GET", "POST"}),
        ("DELETE", "/v1/fabrics/ib-east/verification", {"GET"}),
    ],
)
def test_a_wrong_method_is_a_405_problem_with_an_allow_header(
    client, db_dump, method, path, supported
):
    before = db_dump()

    response = client.request(method, path)

    assert_problem(response, 405)
    allowed = {m.strip() for m in response.headers["allow"].split(",")}
    assert allowed and allowed <= supported
    assert db_dump() == before


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/fabrics/ib-nowhere", None),
        ("GET", "/v1/tenants/initech", None),
        ("DELETE", "/v1/tenants/initech", None),
        ("GET", "/v1/fabrics/ib-east/nodes/gpu0999", None),
        ("PATCH", "/v1/fabrics/ib-nowhere/nodes/gpu0001", {"role": "storage"}),
        ("GET", "/v1/fabrics/ib-east/services/backup", None),
        ("GET", "/v1/tenants/initech/allocations", None),
        ("GET", "/v1/tenants/acme/allocations/00000000-0000-0000-0000-000000000000", None),
        ("DELETE", "/v1/tenants/acme/allocations/00000000-0000-0000-0000-000000000000", None),
        ("GET", "/v1/tenants/acme/grants/00000000-0000-0000-0000-000000000000", None),
        ("DELETE", "/v1/tenants/acme/grants/00000000-0000-0000-0000-000000000000", None),
        ("GET", "/v1/tenants/initech/grants", None),
    ],
)
def test_an_unknown_resource_is_a_404_problem_and_changes_nothing(
    client, onboarded, db_dump, method, path, body
):
    before = db_dump()

    assert_problem(client.request(method, path, json=body), 404, "not-found")
    assert db_dump() == before


def test_a_body_over_the_limit_is_a_413_problem_and_changes_nothing(make_client, db_dump):
    small = make_client(max_body_bytes=1024)
    created(small.post("/v1/fabrics", json={"name": "ib-east", "kind": "infiniband"}))
    before = db_dump()

    response = small.put(
        "/v1/fabrics/ib-east/topology", content=example_topology(), headers=TEXT_PLAIN
    )

    body = assert_problem(response, 413)
    assert "1024" in body["detail"]
    assert db_dump() == before


def test_a_chunked_body_over_the_limit_is_a_413_problem_and_changes_nothing(make_client, db_dump):
    small = make_client(max_body_bytes=1024)
    created(small.post("/v1/fabrics", json={"name": "ib-east", "kind": "infiniband"}))
    before = db_dump()

    def chunks() -> Iterator[bytes]:
        text = example_topology().encode()
        yield from (text[i : i + 512] for i in range(0, len(text), 512))

    response = small.put("/v1/fabrics/ib-east/topology", content=chunks(), headers=TEXT_PLAIN)

    assert "content-length" not in response.request.headers
    assert_problem(response, 413)
    assert db_dump() == before


def test_a_json_body_over_the_limit_is_a_413_problem_and_changes_nothing(make_client, db_dump):
    small = make_client(max_body_bytes=64)
    before = db_dump()

    response = small.post("/v1/tenants", json={**ACME, "padding": "x" * 100})

    assert_problem(response, 413)
    assert db_dump() == before


def test_a_body_within_the_limit_is_accepted(make_client):
    roomy = make_client(max_body_bytes=len(example_topology().encode()))
    created(roomy.post("/v1/fabrics", json={"name": "ib-east", "kind": "infiniband"}))

    response = roomy.put(
        "/v1/fabrics/ib-east/topology", content=example_topology(), headers=TEXT_PLAIN
    )

    assert ok(response)["ports"] == 19


def test_an_unexpected_failure_is_a_500_problem_without_internals(make_client, monkeypatch, caplog):
    from tenancy.usecases import tenants

    def broken(*args, **kwargs):
        raise RuntimeError("secret internal state")

    monkeypatch.setattr(tenants, "list_tenants", broken)
    client = make_client(raise_server_exceptions=False)

    response = client.get("/v1/tenants")

    body = assert_problem(response, 500, "internal-error")
    assert "secret" not in response.text
    assert "Traceback" not in response.text
    assert "nothing was changed" in body["detail"]
    assert "secret internal state" in caplog.text  # logged for operators
