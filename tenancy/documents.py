"""Parsing of uploaded inventory documents (JSON or YAML) into the RoCE inventory schema."""

from __future__ import annotations

import json
from typing import Any

import yaml
from pydantic import ValidationError as PydanticValidationError

from policies.errors import InputFormatError, InvalidValueError
from tenancy.schemas import RoceInventory

JSON = "application/json"
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml"})
# An inventory is four levels deep (document, table, item, list of ports); 32 is generous.
MAX_DEPTH = 32
_TOO_DEEP = "the document is nested too deeply to be an inventory"


def parse_inventory(text: str, media_type: str) -> RoceInventory:
    """A RoCE inventory from JSON or YAML text; a document that does not parse or fit is a 422."""
    document = _load(text, media_type)
    try:
        return RoceInventory.model_validate(document)
    except PydanticValidationError as error:
        errors = [
            {"pointer": "/" + "/".join(str(p) for p in e["loc"]), "detail": e["msg"]}
            for e in error.errors(include_url=False)
        ]
        summary = "; ".join(f"{e['pointer']}: {e['detail']}" for e in errors[:5])
        raise InvalidValueError(f"the inventory is not valid: {summary}", errors=errors) from error


def _load(text: str, media_type: str) -> Any:
    try:
        if media_type == JSON:
            return json.loads(text)
        _refuse_aliases(text)
        return yaml.safe_load(text)
    except RecursionError as error:
        # '[' * 100000: the parsers recurse per level; a real inventory is a few levels deep.
        raise InputFormatError(_TOO_DEEP) from error
    except json.JSONDecodeError as error:
        raise InputFormatError(
            f"the JSON does not parse: {error.msg}", line=error.lineno
        ) from error
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputFormatError(f"the YAML does not parse: {error}", line=line) from error


def _refuse_aliases(text: str) -> None:
    """Refuse YAML anchors, aliases and deep nesting before anything is built.

    A 20 KB document of nested aliases expands to gigabytes (the "billion laughs"), and every
    nesting level costs PyYAML a recursion; an inventory needs neither. The event stream is read
    first, so nothing is expanded and a deep document stops at the first level too many.
    """
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        line = event.start_mark.line + 1 if event.start_mark else None
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise InputFormatError("YAML anchors and aliases are not accepted", line=line)
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise InputFormatError(_TOO_DEEP, line=line)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
