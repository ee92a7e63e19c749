"""Hostile inventory and config documents are refused with 422, never expanded or recursed into.

Hardening issue 10, items 9 and 12: a 20 KB YAML of nested aliases reached 2.1 GB of memory, and
'[' * 100000 as a RoCE topology or config audit was a 500 with thousands of traceback lines.
"""

import pytest

from policies.errors import InputFormatError
from policies.roce.parse_config_db import parse_config_db
from tenancy.store.documents import parse_inventory

YAML = "application/yaml"
JSON = "application/json"


def billion_laughs(levels: int = 9) -> str:
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        refs = ", ".join([f"*l{level - 1}"] * 9)
        lines.append(f"l{level}: &l{level} [{refs}]")
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_before_it_expands():
    with pytest.raises(InputFormatError, match="anchors and aliases"):
        parse_inventory(billion_laughs(), YAML)


def test_a_single_anchor_is_refused_too():
    with pytest.raises(InputFormatError, match="anchors and aliases") as caught:
        parse_inventory("switches: &s []\nlinks: []\n", YAML)
    assert caught.value.line == 1


@pytest.mark.parametrize(
    ("text", "media_type"),
    [
        ("[" * 100_000, JSON),
        ("[" * 100_000 + "]" * 100_000, JSON),
        ("[" * 20_000 + "]" * 20_000, YAML),
    ],
)
def test_deeply_nested_inventories_are_a_422(text, media_type):
    with pytest.raises(InputFormatError):
        parse_inventory(text, media_type)


@pytest.mark.parametrize("text", ["[" * 100_000, "[" * 100_000 + "]" * 100_000])
def test_a_deeply_nested_config_db_is_a_422(text):
    with pytest.raises(InputFormatError, match=r"nested too deeply|not valid JSON"):
        parse_config_db(text)
