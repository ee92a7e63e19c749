"""Every response of the OpenAPI document is typed (issue 14, item 5: "type every response").

A client generator or a reader of /docs learns each member of every answer: no response body is
an untyped object (``{}``, or ``"type": "object"`` with no properties), and every error, 4xx and
5xx, is documented as what the service sends: application/problem+json.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI

from api.app import create_app
from tenancy.store.settings import Settings
from tests.builders import PROBLEM_JSON
from tests.keys import key_settings

METHODS = frozenset({"get", "put", "post", "delete", "patch"})
PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    app: FastAPI = create_app(key_settings(Settings(database_url="sqlite://", admin_token="t")))
    return app.openapi()


def operations(document: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield f"{method.upper()} {path}", operation


MEMBERS = ("properties", "patternProperties", "$ref", "anyOf", "oneOf", "allOf")


def free_form(schema: dict[str, Any]) -> bool:
    """No schema at all, or an object whose members nothing names or types."""
    if schema == {}:
        return True
    extra = schema.get("additionalProperties")
    typed_extra = isinstance(extra, dict) and extra != {}
    return (
        schema.get("type") == "object" and not any(k in schema for k in MEMBERS) and not typed_extra
    )


def children(schema: dict[str, Any], where: str) -> Iterator[tuple[Any, str]]:
    for key, value in schema.items():
        if key in ("properties", "patternProperties", "$defs"):
            yield from ((sub, f"{where}.{name}") for name, sub in value.items())
        elif key in ("items", "additionalProperties"):
            yield value, f"{where}[]"
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            yield from ((sub, f"{where}|{index}") for index, sub in enumerate(value))


def untyped(schema: Any, where: str) -> Iterator[str]:
    """Every place under `schema` that is an object of unknown members, or no schema at all."""
    if not isinstance(schema, dict):
        return
    if free_form(schema):
        yield where
    for sub, place in children(schema, where):
        yield from untyped(sub, place)


def test_no_response_body_is_an_untyped_object(document):
    offenders = [
        place
        for name, operation in operations(document)
        for status, response in operation["responses"].items()
        for media_type, content in response.get("content", {}).items()
        for place in untyped(content.get("schema", {}), f"{name} {status} {media_type}")
    ]

    assert offenders == []


def test_no_schema_of_the_document_has_untyped_members(document):
    offenders = [
        place
        for name, schema in document["components"]["schemas"].items()
        if name != "Problem"  # extension members vary by problem type (RFC 9457 §3.2)
        for place in untyped(schema, name)
    ]

    assert offenders == []


def test_every_operation_documents_its_errors_as_problems(document):
    for name, operation in operations(document):
        for status, response in operation["responses"].items():
            if status.startswith(("4", "5")):
                assert response["content"] == {PROBLEM_JSON: {"schema": PROBLEM_REF}}, (
                    name,
                    status,
                )
        assert {"4XX", "5XX"} <= operation["responses"].keys(), name
        assert "422" not in operation["responses"], name  # FastAPI's own 422 body is not sent


def test_every_reference_resolves(document):
    schemas = document["components"]["schemas"]
    text = str(document)
    for ref in set(re.findall(r"#/components/schemas/([A-Za-z0-9_.-]+)", text)):
        assert ref in schemas, ref


def test_the_views_that_leave_out_the_other_technology_are_typed(document):
    schemas = document["components"]["schemas"]

    assert {"pkey_range", "vlan_range", "l3vni_range", "created_at"} <= schemas["FabricView"][
        "properties"
    ].keys()
    assert "nics" in schemas["NodeView"]["properties"]
    result = schemas["OperationResult"]["properties"]["result"]
    assert {item.get("$ref", "").rsplit("/", 1)[-1] for item in result["anyOf"]} == {
        "TenantView",
        "AllocationView",
        "GrantView",
        "PartitionView",
        "",
    }
