"""Every operation, parameter, schema and property of the OpenAPI document is described (issue 14).

An operator reading /docs (or a client generator reading /openapi.json) learns the unit, format
and range of a value, and what null means, from its description alone. Each test lists every
offender at once, so one run says everything that is left to write.

What counts as described:
- an operation: its ``description`` (the handler's docstring). FastAPI always makes a ``summary``
  from the function's name ("Get Fabric"), which says nothing, so a summary alone does not count;
- a parameter (path, query, header, cookie): its own ``description``;
- a schema of components/schemas, and every ``$defs`` entry of an inline schema: its own
  ``description`` (a model's docstring) and one on each of its properties;
- a property: a ``description`` on the property itself. A property that refers to another schema
  needs it there too (pydantic writes Field(description=...) beside the ``$ref``, or around it in
  an ``allOf``; the referred schema's own description says what the type is, not what this
  member means). Objects nested inline in a property are walked the same way;
- an inline request body (not a ``$ref``): a ``description`` on the body or its schema;
- an inline response schema: a ``description`` on the schema, or one on the response that is not
  FastAPI's default "Successful Response";
- every pydantic model of tenancy/schemas and each of its fields, also those the document does
  not show (the dry-run answer, the RoCE inventory).

Nothing is excluded. FastAPI's own HTTPValidationError and ValidationError are not in the document:
every 422 is a problem+json (api/problems.py), so the document drops the schemas of a body the
service never sends.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from fastapi import FastAPI
from pydantic import BaseModel, Field

import tenancy.schemas
from api.app import create_app
from tenancy.store.settings import Settings
from tests.keys import key_settings

Schema = Mapping[str, Any]
FASTAPI_DEFAULT_RESPONSE = "Successful Response"
METHODS = frozenset({"get", "put", "post", "delete", "patch", "head", "options", "trace"})
# Keywords whose values are subschemas (JSON Schema 2020-12 applicators).
SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
SUBSCHEMA_ONES = ("items", "additionalProperties", "not", "contains")


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return create_app(key_settings(Settings(database_url="sqlite://", admin_token="docs")))


@pytest.fixture(scope="module")
def document(app: FastAPI) -> dict[str, Any]:
    return app.openapi()


def described(item: Schema) -> bool:
    """Whether `item` carries a description that is more than white space."""
    text = item.get("description")
    return isinstance(text, str) and bool(text.strip())


def operations(document: Schema) -> Iterator[tuple[str, Schema]]:
    """Every operation as ("GET /v1/fabrics", operation)."""
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            if method in METHODS:
                yield f"{method.upper()} {path}", operation


def property_offenders(schema: Schema, where: str) -> Iterator[str]:
    """Each property of `schema`, and of objects nested inline in it, that has no description."""
    for name, member in schema.get("properties", {}).items():
        if not described(member):
            yield f"{where}.{name}"
        yield from property_offenders(member, f"{where}.{name}")
    for keyword in SUBSCHEMA_LISTS:
        for index, sub in enumerate(schema.get(keyword, ())):
            if isinstance(sub, Mapping):
                yield from property_offenders(sub, f"{where}.{keyword}[{index}]")
    for keyword in SUBSCHEMA_ONES:
        sub = schema.get(keyword)
        if isinstance(sub, Mapping):
            yield from property_offenders(sub, f"{where}.{keyword}")
    yield from defs_offenders(schema, where)


def defs_offenders(schema: Schema, where: str) -> Iterator[str]:
    """Each ``$defs`` schema embedded in `schema` that is, or has a property, undescribed."""
    for name, sub in schema.get("$defs", {}).items():
        yield from named_schema_offenders(sub, f"{where}.$defs.{name}")


def named_schema_offenders(schema: Schema, where: str) -> Iterator[str]:
    """A named schema with no description of its own, then its undescribed properties."""
    if not described(schema):
        yield f"{where} (the schema itself)"
    yield from property_offenders(schema, where)


def component_offenders(document: Schema) -> list[str]:
    """Offenders among components/schemas."""
    schemas = document.get("components", {}).get("schemas", {})
    return [
        offender
        for name, schema in schemas.items()
        for offender in named_schema_offenders(schema, name)
    ]


def body_offenders(document: Schema) -> list[str]:
    """Offenders among inline request bodies and inline response schemas."""
    found: list[str] = []
    for label, operation in operations(document):
        body = operation.get("requestBody", {})
        for media, content in body.get("content", {}).items():
            schema = content.get("schema", {})
            where = f"{label} request {media}"
            if "$ref" not in schema and not (described(body) or described(schema)):
                found.append(f"{where} (the body itself)")
            found.extend(property_offenders(schema, where))
        for status, response in operation.get("responses", {}).items():
            default = response.get("description") == FASTAPI_DEFAULT_RESPONSE
            for media, content in response.get("content", {}).items():
                schema = content.get("schema", {})
                where = f"{label} response {status} {media}"
                if "$ref" not in schema and not described(schema) and default:
                    found.append(f"{where} (the schema itself)")
                found.extend(property_offenders(schema, where))
    return found


def parameter_offenders(document: Schema) -> list[str]:
    """Parameters (path, query, header, cookie) with no description."""
    return [
        f"{label} {parameter.get('in')} parameter '{parameter.get('name')}'"
        for label, operation in operations(document)
        for parameter in operation.get("parameters", ())
        if not described(parameter)
    ]


def operation_offenders(document: Schema) -> list[str]:
    """Operations with no description (a summary made from the function name does not count)."""
    return [label for label, operation in operations(document) if not described(operation)]


def report(offenders: list[str], what: str) -> str:
    return f"{len(offenders)} {what} lack a description:\n  " + "\n  ".join(offenders)


def test_every_operation_is_described(document: dict[str, Any]) -> None:
    offenders = operation_offenders(document)
    assert not offenders, report(offenders, "operations")


def test_every_parameter_is_described(document: dict[str, Any]) -> None:
    offenders = parameter_offenders(document)
    assert not offenders, report(offenders, "parameters")


def test_every_schema_and_property_is_described(document: dict[str, Any]) -> None:
    offenders = component_offenders(document)
    assert not offenders, report(offenders, "schemas or properties")


def test_every_inline_body_and_response_is_described(document: dict[str, Any]) -> None:
    offenders = body_offenders(document)
    assert not offenders, report(offenders, "inline bodies, responses or their properties")


def schema_models() -> dict[str, type[BaseModel]]:
    """Every pydantic model defined in a module of tenancy/schemas, as "module.Name"."""
    models: dict[str, type[BaseModel]] = {}
    for module_info in pkgutil.iter_modules(tenancy.schemas.__path__):
        module = importlib.import_module(f"tenancy.schemas.{module_info.name}")
        for name, model in vars(module).items():
            defined_here = inspect.isclass(model) and model.__module__ == module.__name__
            if defined_here and issubclass(model, BaseModel):
                models[f"{module_info.name}.{name}"] = model
    return models


def schema_model_offenders(models: Mapping[str, type[BaseModel]]) -> list[str]:
    """Models with no docstring, and fields with no description."""
    found: list[str] = []
    for where, model in models.items():
        if not (model.__doc__ or "").strip():
            found.append(f"{where} (the model itself)")
        found.extend(
            f"{where}.{field}"
            for field, info in model.model_fields.items()
            if not (info.description or "").strip()
        )
    return found


def test_every_schema_model_and_field_is_described_in_or_out_of_the_document() -> None:
    """Also the models the document never shows: the dry-run answer (sent by an exception
    handler), the RoCE inventory (a PUT body read as text), views used inside the tier.
    """
    models = schema_models()
    assert {"what_if.DryRunView", "topology.RoceInventory"} <= models.keys()
    offenders = schema_model_offenders(models)
    assert not offenders, report(offenders, "models of tenancy/schemas or their fields")


def test_fastapis_validation_error_schemas_are_not_documented(document: dict[str, Any]) -> None:
    """Every 422 is problem+json: FastAPI's own error schemas describe a body never sent."""
    schemas = document["components"]["schemas"]
    assert "HTTPValidationError" not in schemas
    assert "ValidationError" not in schemas
    assert schemas["Problem"]["properties"]["status"]["type"] == "integer"


# The checker itself: it finds what it is meant to find, in each form pydantic and FastAPI write.

REF = "#/components/schemas/Thing"
CHECKER_DOCUMENT: dict[str, Any] = {
    "paths": {
        "/things/{thing}": {
            "parameters": [{"name": "ignored", "in": "query"}],  # path-level: not an operation
            "get": {
                "summary": "Get Thing",
                "parameters": [
                    {"name": "thing", "in": "path", "description": "The thing's name"},
                    {"name": "If-None-Match", "in": "header", "description": "  "},
                ],
                "responses": {
                    "200": {
                        "description": FASTAPI_DEFAULT_RESPONSE,
                        "content": {"text/plain": {"schema": {}}},
                    },
                    "201": {
                        "description": "The thing's file, as stored",
                        "content": {"text/plain": {"schema": {}}},
                    },
                },
            },
            "put": {
                "description": "Replace a thing.",
                "requestBody": {"content": {"text/plain": {"schema": {"type": "string"}}}},
                "responses": {"200": {"content": {"application/json": {"schema": {"$ref": REF}}}}},
            },
            "post": {
                "description": "Add a thing.",
                "requestBody": {
                    "content": {
                        "application/json": {
                            "schema": {
                                "description": "An embedded document",
                                "$defs": {"Inner": {"properties": {"x": {"type": "integer"}}}},
                            }
                        }
                    }
                },
            },
        }
    },
    "components": {
        "schemas": {
            "Thing": {
                "description": "A thing.",
                "properties": {
                    "sibling": {"$ref": REF, "description": "Beside the $ref"},
                    "wrapped": {"allOf": [{"$ref": REF}], "description": "Around the $ref"},
                    "bare": {"$ref": REF},
                    "nullable": {"anyOf": [{"$ref": REF}, {"type": "null"}]},
                    "nested": {
                        "description": "An inline object",
                        "properties": {"deep": {"type": "string"}},
                    },
                    "listed": {
                        "description": "Inline objects in a list",
                        "items": {"properties": {"deeper": {"type": "string"}}},
                    },
                },
            },
            "Undocumented": {"properties": {"ok": {"type": "string", "description": "Yes"}}},
        }
    },
}


def test_the_checker_finds_each_kind_of_offender() -> None:
    assert operation_offenders(CHECKER_DOCUMENT) == ["GET /things/{thing}"]
    assert parameter_offenders(CHECKER_DOCUMENT) == [
        "GET /things/{thing} header parameter 'If-None-Match'"
    ]
    assert component_offenders(CHECKER_DOCUMENT) == [
        "Thing.bare",
        "Thing.nullable",
        "Thing.nested.deep",
        "Thing.listed.items.deeper",
        "Undocumented (the schema itself)",
    ]
    assert body_offenders(CHECKER_DOCUMENT) == [
        "GET /things/{thing} response 200 text/plain (the schema itself)",
        "PUT /things/{thing} request text/plain (the body itself)",
        "POST /things/{thing} request application/json.$defs.Inner (the schema itself)",
        "POST /things/{thing} request application/json.$defs.Inner.x",
    ]


class Described(BaseModel):
    """A model with a docstring."""

    ok: int = 0
    """An attribute docstring is not a description (pydantic reads it only when told to)."""


class Undescribed(BaseModel):
    said: int = Field(default=0, description="Said")
    unsaid: int = 0


def test_the_model_checker_finds_each_kind_of_offender() -> None:
    models: dict[str, type[BaseModel]] = {"m.Described": Described, "m.Undescribed": Undescribed}
    assert schema_model_offenders(models) == [
        "m.Described.ok",
        "m.Undescribed (the model itself)",
        "m.Undescribed.unsaid",
    ]


def test_the_report_names_every_offender() -> None:
    message = report(["GET /a query parameter 'b'", "Thing.c"], "parameters")
    assert message == "2 parameters lack a description:\n  GET /a query parameter 'b'\n  Thing.c"
