"""Large JSON responses, serialized by the (threaded) handler in pieces instead of on the loop.

FastAPI serializes a returned model on the event loop in one pydantic call, and a call into
pydantic's Rust core holds the GIL until it returns: for a 100k-port topology import result
(10 MB of JSON) that stopped every request for 120-200 ms. `json_response`
serializes in the handler's worker thread instead, long lists a thousand items at a time, so the
event loop gets the GIL between pieces. The bytes are what FastAPI would send: the model's own
serializer, field by field, by alias.
"""

from __future__ import annotations

from functools import cache
from typing import Any, get_args

from fastapi.responses import Response
from pydantic import BaseModel, TypeAdapter

# Items per piece of a long list: about a millisecond of serialization.
CHUNK_ITEMS = 1_000


def json_response(model: BaseModel, status_code: int = 200) -> Response:
    """`model` as an application/json response, serialized now (call it from a plain handler).

    Declare the model as the route's `response_model` so that OpenAPI still documents it.
    """
    return Response(json_bytes(model), status_code=status_code, media_type="application/json")


def json_bytes(model: BaseModel) -> bytes:
    """`model.model_dump_json(by_alias=True)`, with each long list dumped in pieces."""
    if type(model).model_computed_fields:
        return model.model_dump_json(by_alias=True).encode()
    members = (_member(model, name) for name in type(model).model_fields)
    return b"{" + b",".join(member for member in members if member) + b"}"


def _member(model: BaseModel, name: str) -> bytes:
    """``"key":value`` of one field (empty for an excluded field)."""
    value = getattr(model, name)
    kind = _uniform_model(value, type(model).model_fields[name].annotation)
    if kind is None:
        return model.model_dump_json(include={name}, by_alias=True).encode()[1:-1]
    empty = model.model_copy(update={name: []})
    key = empty.model_dump_json(include={name}, by_alias=True).encode()[1:-3]  # '"key":'
    adapter = _list_adapter(kind)
    pieces = (
        adapter.dump_json(value[start : start + CHUNK_ITEMS], by_alias=True)[1:-1]
        for start in range(0, len(value), CHUNK_ITEMS)
    )
    return key + b"[" + b",".join(pieces) + b"]"


def _uniform_model(value: object, annotation: object) -> type[BaseModel] | None:
    """The model of a list worth splitting that serializes piecewise exactly as whole, if any.

    That is: longer than a piece, declared ``list[Model]`` (or a union of such lists) and
    holding only instances of that very model.
    """
    if not isinstance(value, list) or len(value) <= CHUNK_ITEMS:
        return None
    kind = type(value[0])
    if not issubclass(kind, BaseModel) or any(type(item) is not kind for item in value):
        return None
    declared = list[kind]  # type: ignore[valid-type]
    return kind if annotation == declared or declared in get_args(annotation) else None


@cache
def _list_adapter(kind: type[BaseModel]) -> TypeAdapter[list[Any]]:
    return TypeAdapter(list[kind])  # type: ignore[valid-type]
