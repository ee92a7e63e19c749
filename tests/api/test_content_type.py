"""A JSON body sent as another media type is a 415 naming the accepted types (issue 10, item 20).

``curl -d '{...}'`` without ``-H 'Content-Type: application/json'`` sends form encoding; the
answer must say so instead of a pydantic 422 about missing fields.
"""

from __future__ import annotations

import json
import re

import pytest
from fastapi.routing import APIRoute

from api.app import V1_ROUTERS
from api.json_body import declared_json_body
from tenancy.schemas import TokenCreate
from tenancy.usecases import tokens
from tests.builders import TEXT_PLAIN, assert_problem, created

FORM = {"content-type": "application/x-www-form-urlencoded"}  # what curl -d sends
ACME = {"name": "acme", "kind": "external", "qos_class": "gold"}
JSON_BODY_ROUTES = sorted(
    (method, route.path)
    for router in V1_ROUTERS
    for route in router.routes
    # A typed body, or one the route validates itself (api/json_body.py).
    if isinstance(route, APIRoute)
    and (route.body_field is not None or declared_json_body(route.endpoint) is not None)
    for method in route.methods or ()
)


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x1", path)


def assert_unsupported_media_type(response, sent: str) -> None:
    body = assert_problem(response, 415, "unsupported-media-type")
    assert "application/json" in body["detail"]
    assert sent in body["detail"]
    assert "application/json" in body["accepted"]


def test_the_json_body_routes_are_all_covered():
    assert {
        ("POST", "/v1/fabrics"),
        ("POST", "/v1/tenants"),
        ("POST", "/v1/tokens"),
        ("PATCH", "/v1/fabrics/{fabric}/nodes/{node}"),
        ("POST", "/v1/tenants/{tenant}/allocations"),
        ("POST", "/v1/fabrics/{fabric}/observations"),
        ("POST", "/v1/tenants/{tenant}/isolation-proofs"),
    } <= set(JSON_BODY_ROUTES)


@pytest.mark.parametrize(("method", "path"), JSON_BODY_ROUTES)
def test_every_json_body_route_answers_a_form_encoded_body_with_415(client, method, path):
    response = client.request(
        method, concrete(path), content=json.dumps({"name": "x1"}).encode(), headers=FORM
    )

    assert_unsupported_media_type(response, "application/x-www-form-urlencoded")


def test_curl_d_without_a_content_type_header_gets_415_not_a_validation_error(client, db_dump):
    before = db_dump()

    response = client.post("/v1/tenants", content=json.dumps(ACME).encode(), headers=FORM)

    assert_unsupported_media_type(response, "application/x-www-form-urlencoded")
    assert db_dump() == before


@pytest.mark.parametrize(
    ("headers", "sent"),
    [({}, "no Content-Type"), (TEXT_PLAIN, "text/plain"), ({"content-type": "json"}, "json")],
    ids=["absent", "text-plain", "bare-json"],
)
def test_a_json_body_under_another_or_no_media_type_is_a_415(client, headers, sent):
    response = client.post("/v1/tenants", content=json.dumps(ACME).encode(), headers=headers)

    assert_unsupported_media_type(response, sent)


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/x+json",
    ],
)
def test_json_media_types_are_accepted(client, content_type):
    response = client.post(
        "/v1/tenants", content=json.dumps(ACME).encode(), headers={"content-type": content_type}
    )

    assert created(response)["name"] == "acme"


def test_an_empty_body_is_still_reported_as_missing_fields(client):
    assert_problem(client.post("/v1/tenants", headers=FORM), 422, "validation-error")


def test_routes_that_read_text_keep_their_own_media_types(client):
    topology = client.put("/v1/fabrics/nope/topology", content=b"# nothing", headers=TEXT_PLAIN)
    audit = client.post(
        "/v1/fabrics/nope/audits",
        params={"format": "partitions"},
        content=b"Default=0x7fff : ALL=full ;",
        headers=TEXT_PLAIN,
    )

    assert_problem(topology, 404, "not-found")
    assert_problem(audit, 404, "not-found")


def test_authorization_is_decided_before_the_media_type(make_client):
    client = make_client()
    uow = client.app.state.uow
    secret = tokens.create_token(uow, spec=TokenCreate(name="audit", role="auditor")).token

    response = client.post(
        "/v1/tenants",
        content=json.dumps(ACME).encode(),
        headers={**FORM, "Authorization": f"Bearer {secret}"},
    )

    assert_problem(response, 403, "forbidden")
