"""Validation errors in words: what a field allows, never the regular expression that checks it.

Pydantic says ``String should match pattern '^[a-z][a-z0-9-]{0,62}$'``; an operator needs "lower
case letters, digits and '-', starting with a letter, at most 63 characters". The API's
problem documents, the console and the command line all word an error item with `in_words`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tenancy.schemas.changesets import ALLOCATION_ID_PATTERN
from tenancy.schemas.common import (
    BILLING_ACCOUNT_PATTERN,
    HEX_GUID_PATTERN,
    HEX_PKEY_PATTERN,
    MAC_PATTERN,
    NODE_NAME_PATTERN,
    PORT_NAME_PATTERN,
    SLUG_PATTERN,
    TIME_TEXT_PATTERN,
)
from tenancy.schemas.deploy import GUID_TEXT_PATTERN, PKEY_TEXT_PATTERN, SNAPSHOT_DIGEST_PATTERN

PATTERN_WORDS = {
    SLUG_PATTERN: (
        "lower case letters, digits and '-', starting with a letter, at most 63 characters"
    ),
    NODE_NAME_PATTERN: (
        "lower case letters, digits, '.', '_' and '-', starting with a letter or digit, at most "
        "63 characters"
    ),
    BILLING_ACCOUNT_PATTERN: (
        "letters, digits, '.', '_', ':' and '-', starting with a letter or digit, at most 64 "
        "characters"
    ),
    HEX_PKEY_PATTERN: "a P_Key in hex: 0x and 1 to 4 hex digits, such as 0x0101",
    PKEY_TEXT_PATTERN: "a P_Key as 0x and 4 lower case hex digits, such as 0x0101",
    HEX_GUID_PATTERN: "a GUID in hex: 0x and 1 to 16 hex digits, such as 0x0002c90300000001",
    GUID_TEXT_PATTERN: "a GUID as 0x and 16 lower case hex digits, such as 0x0002c90300000001",
    PORT_NAME_PATTERN: "a SONiC port name: Ethernet and a number, such as Ethernet0",
    MAC_PATTERN: "a MAC address in lower case hex, such as 0c:42:a1:00:00:01",
    SNAPSHOT_DIGEST_PATTERN: "a snapshot digest: v2: (or sha256:) and 64 lower case hex digits",
    ALLOCATION_ID_PATTERN: "an allocation id (a UUID such as 0b6e…-…)",
}
TIME_WORDS = "an ISO 8601 time such as 2026-12-06T10:00:00Z"
PATTERN_WORDS[TIME_TEXT_PATTERN] = TIME_WORDS
# A closed set of words, such as ``^(hour|day)$``: said as the list of them.
_ONE_OF = re.compile(r"\^\(([A-Za-z0-9_-]+(?:\|[A-Za-z0-9_-]+)+)\)\$")


def in_words(item: Mapping[str, Any]) -> str:
    """The message of one pydantic error item, with patterns and time formats said in words."""
    kind = str(item.get("type", ""))
    if kind == "string_pattern_mismatch":
        words = _pattern_words(str(item.get("ctx", {}).get("pattern", "")))
        if words is not None:
            return f"must be {words}"
    if kind.startswith(("datetime_", "date_from_datetime")):
        return f"must be {TIME_WORDS}"
    message = str(item.get("msg", "invalid"))
    # A validator's own sentence, without pydantic's "Value error, " in front of it.
    return message.removeprefix("Value error, ") if kind == "value_error" else message


def _pattern_words(pattern: str) -> str | None:
    if (choices := _ONE_OF.fullmatch(pattern)) is not None:
        return "one of " + ", ".join(choices.group(1).split("|"))
    return PATTERN_WORDS.get(pattern)
