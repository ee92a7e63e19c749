"""Validate a SONiC ``config_db`` document against the pinned sonic-yang-models with yanglint.

Two parts (docs/facts/roce.md §3.2, §3.3):

* A small YANG reader (tokenizer + statement tree, no external library) that learns, from the
  modules in the models directory, which module holds each config_db table, the table's lists
  and their keys, and the JSON encoding of every leaf (typedefs, unions and leafrefs resolved).
* A translator config_db -> YANG instance JSON following sonic_yang_ext.py's rules, emitting
  RFC 7951 values as libyang 2 wants them: 8/16/32-bit integers as JSON numbers, booleans as
  true/false, everything else (64-bit integers, decimal64, enums, strings) as JSON strings.
  upstream leaves non-uint values as strings and relies on libyang 3's
  ``json_string_datatypes``; Debian's libyang 2.1 rejects that (`Invalid non-number-encoded`).

`validate_config_db` then runs ``yanglint -t config -p MODELS MODELS/*.yang
MODELS/rendered/*.yang instance.json`` and returns ``(ok, message)``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

MODELS_ENV = "ISOFABRIC_SONIC_YANG_DIR"
DEFAULT_MODELS = Path(__file__).resolve().parents[3] / "shared" / "yang" / "sonic"

_NUMBER_TYPES = frozenset({"int8", "int16", "int32", "uint8", "uint16", "uint32"})
# Typedefs of the IETF modules libyang has built in (not in the models directory).
_IETF_NUMBER_TYPEDEFS = frozenset(
    {"as-number", "port-number", "dscp", "ipv6-flow-label", "counter32", "zero-based-counter32"}
    | {"gauge32", "timeticks", "timestamp"}
)
NUMBER, BOOLEAN, STRING, MIXED = "number", "boolean", "string", "mixed"

_TOKEN = re.compile(
    r"""\s+|//[^\n]*|/\*.*?\*/
    |"(?P<dq>(?:[^"\\]|\\.)*)"
    |'(?P<sq>[^']*)'
    |(?P<punct>[{};+])
    |(?P<word>[^\s{};"']+)""",
    re.S | re.X,
)


class TranslationError(ValueError):
    """The config_db document has a table, key or field that the YANG models do not have."""


@dataclass(frozen=True)
class Stmt:
    """One YANG statement: keyword, argument, sub-statements."""

    keyword: str
    arg: str
    children: tuple[Stmt, ...]

    def find(self, keyword: str) -> Stmt | None:
        return next((c for c in self.children if c.keyword == keyword), None)


def parse_yang(text: str) -> Stmt:
    """Parse one module's text into its statement tree (enough YANG for sonic-yang-models)."""
    tokens: list[tuple[bool, str]] = []
    for match in _TOKEN.finditer(text):
        if match.group("punct"):
            tokens.append((True, match.group("punct")))
        elif match.lastgroup in ("dq", "sq", "word"):
            tokens.append((False, match.group(match.lastgroup)))
    statements, _ = _parse_block(tokens, 0)
    return statements[0]


def _parse_block(tokens: list[tuple[bool, str]], i: int) -> tuple[tuple[Stmt, ...], int]:
    out: list[Stmt] = []
    while i < len(tokens) and tokens[i] != (True, "}"):
        keyword, arg = tokens[i][1], ""
        i += 1
        if not tokens[i][0]:
            arg, i = tokens[i][1], i + 1
            while tokens[i] == (True, "+"):
                arg, i = arg + tokens[i + 1][1], i + 2
        children: tuple[Stmt, ...] = ()
        if tokens[i] == (True, "{"):
            children, i = _parse_block(tokens, i + 1)
        out.append(Stmt(keyword, arg, children))
        i += 1  # the ';' or the '}'
    return tuple(out), i


@dataclass
class ListSchema:
    """A YANG list that holds config_db entries: keys in order, leaf kinds, Type-1 inner list."""

    name: str
    keys: tuple[str, ...]
    leaves: dict[str, str] = field(default_factory=dict)
    leaf_lists: dict[str, str] = field(default_factory=dict)
    inner: ListSchema | None = None


@dataclass
class TableSchema:
    """A config_db table: its module and either lists or (DEVICE_METADATA-style) containers."""

    module: str
    lists: list[ListSchema] = field(default_factory=list)
    containers: dict[str, dict[str, str]] = field(default_factory=dict)


Chain = tuple[tuple[Stmt, str], ...]  # data-node ancestry, each with its defining module


class YangSet:
    """All modules of a models directory, with the config_db tables they define."""

    def __init__(self, modules: Mapping[str, Stmt]) -> None:
        self.modules = dict(modules)
        self.prefixes = {name: _prefix_map(stmt) for name, stmt in self.modules.items()}
        self.tables: dict[str, TableSchema] = {}
        for name, module in self.modules.items():
            top = next((c for c in module.children if c.keyword == "container"), None)
            if top is None or top.arg != name:
                continue  # sonic-types, sonic-extension: no tables (roce.md §3.2 rule 1)
            for table, table_module in self._data_children(top, name):
                if table.keyword == "container":
                    self.tables[table.arg] = self._table(table, ((top, name),), table_module)

    @classmethod
    def load(cls, models: Path) -> YangSet:
        files = sorted(models.glob("*.yang")) + sorted((models / "rendered").glob("*.yang"))
        trees = [parse_yang(f.read_text()) for f in files]
        return cls({t.arg: t for t in trees})

    def _table(self, table: Stmt, chain: Chain, module: str) -> TableSchema:
        schema = TableSchema(module)
        here = (*chain, (table, module))
        for child, child_module in self._data_children(table, module):
            if child.keyword == "list":
                schema.lists.append(self._list(child, here, child_module))
            elif child.keyword == "container":
                inner = (*here, (child, child_module))
                schema.containers[child.arg] = {
                    leaf.arg: self._leaf_kind(leaf, (*inner, (leaf, m)), m)
                    for leaf, m in self._data_children(child, child_module)
                    if leaf.keyword in ("leaf", "leaf-list")
                }
        return schema

    def _list(self, stmt: Stmt, chain: Chain, module: str) -> ListSchema:
        key = stmt.find("key")
        schema = ListSchema(stmt.arg, tuple(key.arg.split()) if key else ())
        here = (*chain, (stmt, module))
        for child, child_module in self._data_children(stmt, module):
            if child.keyword == "list":
                schema.inner = self._list(child, here, child_module)
                continue
            kind = self._leaf_kind(child, (*here, (child, child_module)), child_module)
            if child.keyword == "leaf":
                schema.leaves[child.arg] = kind
            elif child.keyword == "leaf-list":
                schema.leaf_lists[child.arg] = kind
        return schema

    def _data_children(self, stmt: Stmt, module: str) -> Iterator[tuple[Stmt, str]]:
        """Data-node children, with `uses` expanded and `choice`/`case` flattened."""
        for child in stmt.children:
            if child.keyword in ("leaf", "leaf-list", "list", "container"):
                yield child, module
            elif child.keyword in ("choice", "case"):
                yield from self._data_children(child, module)
            elif child.keyword == "uses":
                grouping, grouping_module = self._lookup("grouping", child.arg, module)
                if grouping is not None:
                    yield from self._data_children(grouping, grouping_module)

    def _lookup(self, keyword: str, name: str, module: str) -> tuple[Stmt | None, str]:
        """A top-level typedef/grouping by (possibly prefixed) name, and its module."""
        prefix, _, local = name.rpartition(":")
        target = self.prefixes[module].get(prefix, module) if prefix else module
        found = self.modules.get(target)
        hit = found and next(
            (c for c in found.children if c.keyword == keyword and c.arg == local), None
        )
        return hit or None, target

    def _leaf_kind(self, leaf: Stmt, chain: Chain, module: str) -> str:
        type_stmt = leaf.find("type")
        return STRING if type_stmt is None else self._type_kind(type_stmt, chain, module, 0)

    def _type_kind(self, type_stmt: Stmt, chain: Chain, module: str, depth: int) -> str:
        name = type_stmt.arg
        if depth > 20:
            return STRING
        if name in _NUMBER_TYPES:
            return NUMBER
        if name == "boolean":
            return BOOLEAN
        if name == "union":
            kinds = {self._type_kind(t, chain, module, depth + 1) for t in type_stmt.children}
            return kinds.pop() if len(kinds) == 1 else MIXED
        if name == "leafref":
            path = type_stmt.find("path")
            return self._leafref_kind(path.arg if path else "", chain, module, depth)
        if ":" in name and name.partition(":")[0] not in self.prefixes[module]:
            return STRING
        typedef, typedef_module = self._lookup("typedef", name, module)
        if typedef is None:
            is_ietf = typedef_module.startswith("ietf-")
            local = name.rpartition(":")[2]
            return NUMBER if is_ietf and local in _IETF_NUMBER_TYPEDEFS else STRING
        inner = typedef.find("type")
        return STRING if inner is None else self._type_kind(inner, chain, typedef_module, depth + 1)

    def _leafref_kind(self, path: str, chain: Chain, module: str, depth: int) -> str:
        """The kind of the leaf a leafref path points at (STRING if it cannot be followed)."""
        steps = [s for s in re.sub(r"\[[^\]]*\]", "", path).strip().split("/") if s]
        here = self._path_start(path, steps, chain, module)
        while here and steps and steps[0] == "..":
            here, steps = here[:-1], steps[1:]
        for step in steps if here else ():
            local = step.rpartition(":")[2]
            parent, parent_module = here[-1]
            children = self._data_children(parent, parent_module)
            found = next((c for c in children if c[0].arg == local), None)
            if found is None:
                return STRING
            here = (*here, found)
        type_stmt = here[-1][0].find("type") if here else None
        if type_stmt is None:
            return STRING
        return self._type_kind(type_stmt, here, here[-1][1], depth + 1)

    def _path_start(self, path: str, steps: list[str], chain: Chain, module: str) -> Chain:
        """Absolute paths start at the module named by the first step's prefix, others here."""
        if not path.strip().startswith("/"):
            return chain
        prefix = steps[0].partition(":")[0] if ":" in steps[0] else ""
        root_module = self.prefixes[module].get(prefix, module)
        root = self.modules.get(root_module)
        return () if root is None else ((root, root_module),)


def _prefix_map(module: Stmt) -> dict[str, str]:
    """prefix -> module name, for the module's own prefix and its imports."""
    own = module.find("prefix")
    prefixes = {own.arg: module.arg} if own else {}
    for imp in module.children:
        if imp.keyword == "import":
            prefix = imp.find("prefix")
            if prefix:
                prefixes[prefix.arg] = imp.arg
    return prefixes


def _typed(kind: str, value: Any) -> Any:
    """A config_db string as RFC 7951 JSON for libyang 2; odd values pass through for yanglint."""
    if not isinstance(value, str):
        return value
    if kind in (NUMBER, MIXED) and re.fullmatch(r"-?[0-9]+", value):
        return int(value)
    if kind == BOOLEAN and value in ("true", "false"):
        return value == "true"
    return value


def _entry(schema: ListSchema, key: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    entry = {
        name: _typed(schema.leaves.get(name, STRING), part)
        for name, part in zip(schema.keys, key.split("|"), strict=True)
    }
    if schema.inner is not None:  # Type-1 map: {"26": "3"} -> [{"dscp": "26", "tc": 3}]
        inner = schema.inner
        value_leaf = next(n for n in inner.leaves if n not in inner.keys)
        entry[inner.name] = [
            {
                inner.keys[0]: _typed(inner.leaves[inner.keys[0]], k),
                value_leaf: _typed(inner.leaves[value_leaf], v),
            }
            for k, v in fields.items()
        ]
        return entry
    for name, value in fields.items():
        if name in schema.leaves:
            entry[name] = _typed(schema.leaves[name], value)
        elif name in schema.leaf_lists:
            values = value if isinstance(value, list) else [value]
            entry[name] = [_typed(schema.leaf_lists[name], v) for v in values if v != ""]
        else:
            raise TranslationError(f"{schema.name}[{key}]: field {name!r} is not in the YANG")
    return entry


def _translate_table(table: str, schema: TableSchema, entries: Mapping[str, Any]) -> Any:
    if schema.containers and not schema.lists:
        out: dict[str, Any] = {}
        for key, fields in entries.items():
            leaves = schema.containers.get(key)
            if leaves is None:
                raise TranslationError(f"{table}: no container {key!r}")
            unknown = set(fields) - set(leaves)
            if unknown:
                raise TranslationError(f"{table}|{key}: fields {sorted(unknown)} not in the YANG")
            out[key] = {n: _typed(leaves[n], v) for n, v in fields.items()}
        return out
    lists: dict[str, list[dict[str, Any]]] = {}
    for key, fields in entries.items():
        parts = len(key.split("|"))
        target = next((x for x in schema.lists if len(x.keys) == parts), None)
        if target is None:
            raise TranslationError(f"{table}: key {key!r} matches no list of the table")
        lists.setdefault(target.name, []).append(_entry(target, key, fields))
    return lists


def to_instance(config: Mapping[str, Mapping[str, Any]], yang: YangSet) -> dict[str, Any]:
    """Translate config_db tables to a YANG instance document (roce.md §3.2).

    Raises:
        TranslationError: a table without YANG model, or a key/field the model lacks.
    """
    out: dict[str, dict[str, Any]] = {}
    for table, entries in config.items():
        schema = yang.tables.get(table)
        if schema is None:
            raise TranslationError(f"table {table} has no YANG model (would not be validated)")
        top = out.setdefault(f"{schema.module}:{schema.module}", {})
        top[table] = _translate_table(table, schema, entries)
    return out


def models_dir() -> Path:
    """The sonic-yang-models directory: $ISOFABRIC_SONIC_YANG_DIR or ../shared/yang/sonic."""
    configured = os.environ.get(MODELS_ENV)
    return Path(configured) if configured else DEFAULT_MODELS


def missing_models(path: Path) -> str | None:
    """Why `path` is no sonic-yang-models directory (a skip reason saying where to get one)."""
    if (path / "sonic-vlan.yang").is_file():
        return None
    return (
        f"SONiC's YANG models are not in {path}: set {MODELS_ENV} to a directory of "
        "sonic-yang-models' .yang files (sonic-buildimage, src/sonic-yang-models/yang, "
        "https://github.com/sonic-net/sonic-buildimage)"
    )


@lru_cache(maxsize=4)
def yang_set(models: Path) -> YangSet:
    return YangSet.load(models)


def yanglint_command(models: Path, instance: Path) -> list[str]:
    """roce.md §3.3: all modules are passed so cross-module must/when/leafref are checked."""
    files = sorted(models.glob("*.yang")) + sorted((models / "rendered").glob("*.yang"))
    return ["yanglint", "-t", "config", "-p", str(models), *map(str, files), str(instance)]


def validate_config_db(
    config: Mapping[str, Mapping[str, Any]], models: Path | None = None
) -> tuple[bool, str]:
    """Translate `config` and validate it with yanglint; ``(True, "")`` when it is valid.

    A translation failure (roce.md §3.3: "rc 2") is reported as ``(False, "translation: ...")``.
    """
    models = models or models_dir()
    try:
        instance = to_instance(config, yang_set(models))
    except TranslationError as exc:
        return False, f"translation: {exc}"
    with tempfile.TemporaryDirectory(prefix="sonic-yang-") as tmp:
        path = Path(tmp) / "instance.json"
        path.write_text(json.dumps(instance, indent=2))
        result = subprocess.run(
            yanglint_command(models, path), capture_output=True, text=True, timeout=120, check=False
        )
    # Compile-time "check skipped because referenced module ... is not implemented" warnings
    # come from loading the files in order; yanglint recompiles once all are implemented and
    # the cross-module musts do run (a buffer-pool `percentage` must is rejected, see tests).
    messages = re.split(r"^(?=libyang |YANGLINT)", result.stdout + result.stderr, flags=re.M)
    kept = [m.strip() for m in messages if m.strip() and not m.startswith("libyang warn")]
    return result.returncode == 0, "\n".join(kept)


def yanglint_path() -> str | None:
    return shutil.which("yanglint")
