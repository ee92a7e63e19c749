"""Parsing of uploaded documents (JSON or YAML): the RoCE inventory, the policy document."""

from __future__ import annotations

import json
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from policies.errors import InputFormatError, InvalidValueError, UnsupportedMediaTypeError
from tenancy.schemas import RoceInventory
from tenancy.schemas.policy import PolicyDocument

JSON = "application/json"
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml"})
# An inventory is four levels deep (document, table, item, list of ports), a policy four
# (document, kinds, kind, list); 32 is generous.
MAX_DEPTH = 32
_TOO_DEEP = "the document is nested too deeply (an inventory or a policy is a few levels deep)"


def parse_inventory(text: str, media_type: str) -> RoceInventory:
    """A RoCE inventory from JSON or YAML text; a document that does not parse or fit is a 422."""
    return _validated(RoceInventory, _load(text, media_type), "inventory")


def parse_policy(text: str, media_type: str) -> PolicyDocument:
    """A policy document (issue 13) from JSON or YAML text.

    Raises:
        UnsupportedMediaTypeError: the body is neither JSON nor YAML (415).
        InputFormatError: it does not parse (422).
        InvalidValueError: it does not fit the policy document's schema (422).
    """
    if media_type != JSON and media_type not in YAML_TYPES:
        sent = f"'{media_type[:80]}'" if media_type else "no Content-Type"
        raise UnsupportedMediaTypeError(
            f"a policy document is JSON or YAML; the request has {sent}",
            accepted=[JSON, *sorted(YAML_TYPES)],
        )
    return _validated(PolicyDocument, _load(text, media_type), "policy document")


M = TypeVar("M", bound=BaseModel)


def _validated(model: type[M], document: Any, what: str) -> M:
    try:
        return model.model_validate(document)
    except PydanticValidationError as error:
        errors = [
            {"pointer": "/" + "/".join(str(p) for p in e["loc"]), "detail": e["msg"]}
            for e in error.errors(include_url=False)
        ]
        summary = "; ".join(f"{e['pointer']}: {e['detail']}" for e in errors[:5])
        raise InvalidValueError(f"the {what} is not valid: {summary}", errors=errors) from error


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
