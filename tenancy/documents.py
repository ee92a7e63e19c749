"""Parsing of uploaded inventory documents (JSON or YAML) into the RoCE inventory schema."""

from __future__ import annotations

import json
from typing import Any

import yaml
from pydantic import ValidationError as PydanticValidationError

from policies.errors import InputFormatError, ValidationError
from tenancy.schemas import RoceInventory

JSON = "application/json"
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml"})


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
        raise ValidationError(f"the inventory is not valid: {summary}", errors=errors) from error


def _load(text: str, media_type: str) -> Any:
    try:
        if media_type == JSON:
            return json.loads(text)
        return yaml.safe_load(text)
    except json.JSONDecodeError as error:
        raise InputFormatError(
            f"the JSON does not parse: {error.msg}", line=error.lineno
        ) from error
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputFormatError(f"the YAML does not parse: {error}", line=line) from error
