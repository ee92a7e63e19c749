"""The OpenAPI document says what every operation really answers, errors included.

FastAPI documents its own validation errors as application/json 422 and nothing else; the
handlers of api/problems.py answer every error, 4xx and 5xx, as application/problem+json, so
the document says that instead, so every response is typed. The problem types
themselves are listed at /problems and in the document's description.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from api.json_body import declared_json_body
from api.problems import PROBLEM_RESPONSE, PROBLEM_SCHEMA

SERVER_ERROR_RESPONSE: dict[str, Any] = {
    **PROBLEM_RESPONSE,
    "description": "Problem (RFC 9457): internal-error, artifact-hazard or a 503 (see /problems)",
}
# FastAPI's schemas of its 422 body, which no operation answers (see `_typed_errors`).
FASTAPI_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError")
TEXT_SCHEMA: dict[str, Any] = {"type": "string"}
# Paths of the stand-in routes that document a self-validated JSON body (never served).
STAND_IN_PREFIX = "/_json_body/"


def document_responses(app: FastAPI) -> None:
    """Build `app`'s OpenAPI document once, with every error response and body typed.

    Every operation answers 4XX and 5XX as problem+json (the ``Problem`` schema); a text body
    (an artifact, CSV) is a string.
    """

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            stand_ins = _json_body_stand_ins(app.routes)
            routes = [*app.routes, *stand_ins.values()]
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=routes
            )
            _move_json_bodies(schema, stand_ins)
            _typed_errors(schema)
            _typed_text_bodies(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _json_body_stand_ins(routes: Sequence[BaseRoute]) -> dict[tuple[str, str], APIRoute]:
    """Stand-ins documenting the JSON body of each route that validates its own.

    Such a handler (api/json_body.py) has no body parameter for FastAPI to document. Its
    stand-in takes that body as FastAPI's typed parameter ``document``, on a path of its own,
    for OpenAPI alone. Keyed by the real route's path and (lower-case) method.
    """
    stand_ins: dict[tuple[str, str], APIRoute] = {}
    for route in routes:
        if not isinstance(route, APIRoute) or (kind := declared_json_body(route.endpoint)) is None:
            continue
        for method in sorted(route.methods or ()):
            path = f"{STAND_IN_PREFIX}{len(stand_ins)}"
            stand_ins[route.path, method.lower()] = APIRoute(path, _taking(kind), methods=[method])
    return stand_ins


def _taking(kind: Any) -> Callable[..., None]:
    """An endpoint whose one parameter is a body ``document: kind``."""

    def stand_in(document: Any) -> None:
        """Never served: its body is documented in place of the real route's."""

    parameter = inspect.Parameter("document", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    signature = inspect.Signature([parameter.replace(annotation=kind)], return_annotation=None)
    setattr(stand_in, "__signature__", signature)  # noqa: B010 - mypy knows no __signature__
    return stand_in


def _move_json_bodies(schema: dict[str, Any], stand_ins: dict[tuple[str, str], APIRoute]) -> None:
    """Each stand-in's request body onto its real route; the stand-ins' paths dropped."""
    paths = schema["paths"]
    for (path, method), stand_in in stand_ins.items():
        documented = paths.pop(stand_in.path)[method]
        paths[path][method]["requestBody"] = documented["requestBody"]


def _operations(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [op for item in schema.get("paths", {}).values() for op in item.values()]


def _typed_errors(schema: dict[str, Any]) -> None:
    """Errors are problem+json: 4XX and 5XX on every operation, FastAPI's 422 shape dropped."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Problem"] = PROBLEM_SCHEMA
    for operation in _operations(schema):
        responses = operation.setdefault("responses", {})
        responses.pop("422", None)
        for code, response in responses.items():
            if code[0] in "45" and "content" not in response:  # e.g. 410 declared by a route
                response["content"] = PROBLEM_RESPONSE["content"]
        responses["4XX"] = PROBLEM_RESPONSE
        responses["5XX"] = SERVER_ERROR_RESPONSE
    for name in FASTAPI_VALIDATION_SCHEMAS:
        components.pop(name, None)


def _typed_text_bodies(schema: dict[str, Any]) -> None:
    """A text/* body declared without a schema (``{"text/plain": {}}``) is a string."""
    for operation in _operations(schema):
        for response in operation.get("responses", {}).values():
            for media_type, content in response.get("content", {}).items():
                if media_type.startswith("text/") and not content.get("schema"):
                    content["schema"] = TEXT_SCHEMA
