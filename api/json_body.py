"""JSON bodies a route validates itself, as FastAPI validates a typed body, off the event loop.

FastAPI parses a typed body on the event loop: ``json.loads`` and pydantic's validation of the
whole document, each one C call that holds the GIL (a 32 MiB observation: seconds). A route
whose body may be that large reads it raw (`api.limits.RawBody`) and validates it with
`validated` in a heavy worker (api/heavy_processes.py). `json_body(kind)` marks such a handler:
the OpenAPI document shows its body as FastAPI shows a `kind` parameter named ``document``
(api/openapi_responses.py), and `require_json_body` (api/deps.py) refuses another media type
with 415 as it does for a typed body.

`validated` answers as FastAPI's own parse does, error for error (the problem handlers of
api/problems.py read only each error's type, location, message and pattern).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError

from tenancy.store.documents import unique_members

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
_JSON_BODY = "isofabric_json_body"
# ctx values of a pydantic error that cross to the serving process as they are; others (an
# exception a validator raised) are dropped: no handler reads them, and not all of them pickle.
_PLAIN = (str, int, float, bool, type(None))


def json_body(kind: Any) -> Callable[[F], F]:
    """Mark a handler whose raw body is a JSON document of type `kind` (see the module)."""

    def mark(handler: F) -> F:
        setattr(handler, _JSON_BODY, kind)
        return handler

    return mark


def declared_json_body(handler: Callable[..., Any]) -> Any | None:
    """The type `json_body` marked `handler` with; None for any other handler."""
    return getattr(handler, _JSON_BODY, None)


def validated(adapter: TypeAdapter[T], body: bytes) -> T:
    """`body` as a valid document of `adapter`'s type, or the error FastAPI's parse would raise.

    Raises:
        InputFormatError: an object names a member twice (422 invalid-document, as
            `require_json_body` finds it on a typed body).
        RequestValidationError: an empty body, JSON that does not decode (at the character
            where it fails) or a document that does not validate (422 validation-error).
        HTTPException: 400, the body cannot be read as JSON at all (not UTF-8, -16 or -32;
            nested too deep).
    """
    if not body:
        raise RequestValidationError(
            [{"type": "missing", "loc": ("body",), "msg": "Field required"}]
        )
    try:
        document = json.loads(body, object_pairs_hook=unique_members)
    except json.JSONDecodeError as error:
        raise RequestValidationError(
            [
                {
                    "type": "json_invalid",
                    "loc": ("body", error.pos),
                    "msg": "JSON decode error",
                    "ctx": {"error": error.msg},
                }
            ]
        ) from None
    except (ValueError, RecursionError):  # InputFormatError is no ValueError: it propagates
        raise HTTPException(400, "There was an error parsing the body") from None
    try:
        return adapter.validate_python(document, from_attributes=True)
    except ValidationError as error:
        errors = error.errors(include_url=False, include_input=False)
        raise RequestValidationError([_plain(item) for item in errors]) from None


def _plain(item: Any) -> dict[str, Any]:
    """A pydantic error under ``/body``, with plain context values only (it crosses processes)."""
    plain: dict[str, Any] = {
        "type": item["type"],
        "loc": ("body", *item["loc"]),
        "msg": item["msg"],
    }
    context = {k: v for k, v in item.get("ctx", {}).items() if isinstance(v, _PLAIN)}
    if context:
        plain["ctx"] = context
    return plain
