"""Parsing of uploaded documents (JSON or YAML): the RoCE inventory, the policy document."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Hashable
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from policies.errors import InputFormatError, InvalidValueError, UnsupportedMediaTypeError
from tenancy.schemas import RoceInventory
from tenancy.schemas.messages import in_words
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
    """A policy document from JSON or YAML text.

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
            {"pointer": "/" + "/".join(str(p) for p in e["loc"]), "detail": in_words(e)}
            for e in error.errors(include_url=False)
        ]
        summary = "; ".join(f"{e['pointer']}: {e['detail']}" for e in errors[:5])
        raise InvalidValueError(f"the {what} is not valid: {summary}", errors=errors) from error


def _load(text: str, media_type: str) -> Any:
    try:
        if media_type == JSON:
            return json.loads(text, object_pairs_hook=unique_members)
        _refuse_aliases(text)
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader: builds no objects
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


def unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads`'s object_pairs_hook: an object whose member names are unique.

    RFC 8259 §4: with a name twice, parsers disagree on the value (Python keeps the last).

    Raises:
        InputFormatError: a name is given twice (422).
    """
    document = dict(pairs)
    if len(document) != len(pairs):
        twice = sorted(name for name, n in Counter(name for name, _ in pairs).items() if n > 1)
        raise InputFormatError(f"the JSON names member(s) {', '.join(map(repr, twice))} twice")
    return document


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader refusing a key given twice in one mapping (it keeps the last one).

    YAML 1.2 §3.2.1.1 requires keys to be unique; a document stating a rule twice is ambiguous,
    and a policy that silently kept the second statement would not be the one its author read.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                # '<<' merges a mapping in, where a key already given silently wins.
                line = key_node.start_mark.line + 1
                raise InputFormatError("YAML merge keys ('<<') are not accepted", line=line)
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # SafeLoader refuses it: "found unhashable key"
            if key in seen:
                line = key_node.start_mark.line + 1
                raise InputFormatError(f"the YAML names key {key!r} twice", line=line)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _refuse_aliases(text: str) -> None:
    """Refuse YAML anchors, aliases, explicit tags and deep nesting before anything is built.

    A 20 KB document of nested aliases expands to gigabytes (the "billion laughs"), and every
    nesting level costs PyYAML a recursion; an inventory needs neither. An explicit tag makes a
    value another type than it reads as (``!!binary Z29sZA==`` is the name ``gold``), which no
    document here needs. The event stream is read first, so nothing is expanded and a deep
    document stops at the first level too many.
    """
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        line = event.start_mark.line + 1 if event.start_mark else None
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise InputFormatError("YAML anchors and aliases are not accepted", line=line)
        if getattr(event, "tag", None) is not None:
            raise InputFormatError("YAML tags (such as !!binary) are not accepted", line=line)
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise InputFormatError(_TOO_DEEP, line=line)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
