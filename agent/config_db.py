"""SONiC's CONFIG_DB in Redis, read and written the way SONiC's ConfigDBConnector does.

Layout (sonic-swss-common ``configdb.h``/``configdb.py``: ``typed_to_raw``, ``raw_to_typed``,
``serialize_key``): database 4 on a switch; one hash per entry under ``TABLE|key`` (a multi-part
key is already joined by ``|`` in config_db.json, and table names hold no ``|``); a list field is
stored as ``field@`` with the items joined by ``,`` and read back as a list; an entry without fields
is stored as ``NULL``=``NULL``, which readers drop. Keys without ``|`` (``CONFIG_DB_INITIALIZED``)
are not entries.

Redis transactions do not roll back, so `RedisConfigDb.write` guards with WATCH on the touched
keys (compare-and-swap against what the caller read: a concurrent change aborts before anything is
written), writes in MULTI/EXEC, reads the keys back, and on a mismatch or an error puts the previous
content back in a second transaction, verified by another read-back. Errors are `StoreError`s whose
`state` is the report they end in: ``failed`` (CONFIG_DB unchanged, or the restore itself failed:
the detail says which) or ``rolled_back`` (written, then restored and verified).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import redis

SEPARATOR = "|"
NULL = "NULL"
LIST_SUFFIX = "@"
SCAN_COUNT = 1000

Entry = dict[str, Any]
ConfigDb = dict[str, dict[str, Entry]]
RawEntry = dict[str, str]
# Redis key -> its hash (None: the key is absent)
RawKeys = dict[str, RawEntry | None]


@dataclass(frozen=True)
class Applied:
    """A verified change of CONFIG_DB: the touched keys before and after, and its checkpoint.

    `checkpoint` names the GCU checkpoint taken before it (None in Redis mode), kept until the
    leaf's deployment is finished or undone.
    """

    before: RawKeys
    after: RawKeys
    checkpoint: str | None = None


class StoreError(RuntimeError):
    """Writing CONFIG_DB did not succeed; `state` is ``failed`` or ``rolled_back``."""

    def __init__(self, message: str, state: str = "failed") -> None:
        super().__init__(message)
        self.state = state


def encode_entry(entry: Mapping[str, Any]) -> RawEntry:
    """An entry as ConfigDBConnector stores it (``typed_to_raw``): lists as ``field@``."""
    raw: RawEntry = {}
    for name, value in entry.items():
        if isinstance(value, list):
            raw[name + LIST_SUFFIX] = ",".join(str(item) for item in value)
        else:
            raw[name] = str(value)
    return raw or {NULL: NULL}


def decode_entry(raw: Mapping[str, str]) -> Entry:
    """An entry as ConfigDBConnector reads it (``raw_to_typed``): ``NULL`` dropped, lists split."""
    entry: Entry = {}
    for name, value in raw.items():
        if name == NULL:
            continue
        if name.endswith(LIST_SUFFIX):
            entry[name[: -len(LIST_SUFFIX)]] = value.split(",") if value else []
        else:
            entry[name] = value
    return entry


def redis_key(table: str, key: str) -> str:
    """``TABLE|key``."""
    return f"{table}{SEPARATOR}{key}"


def flatten(document: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, RawEntry]:
    """Every entry of `document` by Redis key, encoded as stored."""
    return {
        redis_key(table, key): encode_entry(entry)
        for table, entries in document.items()
        for key, entry in entries.items()
    }


def unflatten(raw: Mapping[str, Mapping[str, str]]) -> ConfigDb:
    """The document of stored entries (keys without ``|`` are not entries)."""
    document: ConfigDb = {}
    for name in sorted(raw):
        table, separator, key = name.partition(SEPARATOR)
        if separator and table and key:
            document.setdefault(table, {})[key] = decode_entry(raw[name])
    return document


def touched(before: ConfigDb, after: ConfigDb) -> tuple[RawKeys, RawKeys]:
    """The keys whose stored content differs between the documents: (before's, after's)."""
    old, new = flatten(before), flatten(after)
    keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    return {k: old.get(k) for k in keys}, {k: new.get(k) for k in keys}


def differing_keys(expected: RawKeys, found: RawKeys) -> list[str]:
    """The keys whose content in `found` is not `expected`'s."""
    return sorted(k for k in expected.keys() | found.keys() if expected.get(k) != found.get(k))


class RedisConfigDb:
    """CONFIG_DB through one Redis connection (``redis://HOST:PORT/4``, ``unix:///…?db=4``)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    @classmethod
    def from_url(cls, url: str) -> RedisConfigDb:
        """Connect lazily to `url` (redis-py ``Redis.from_url``; replies decoded as UTF-8)."""
        return cls(redis.Redis.from_url(url, decode_responses=True))

    def read(self) -> ConfigDb:
        """The whole CONFIG_DB as a config_db.json document (`StoreError` if unreadable)."""
        try:
            names = sorted(self.client.scan_iter(match=f"*{SEPARATOR}*", count=SCAN_COUNT))
            return unflatten({k: v for k, v in self.read_keys(names).items() if v is not None})
        except redis.RedisError as error:
            raise StoreError(f"reading CONFIG_DB: {_said(error)}") from error

    def read_keys(self, names: Iterable[str]) -> RawKeys:
        """The hashes under `names` (None: absent, or not a hash), in one round trip."""
        names = list(names)
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.hgetall(name)
        values = pipe.execute(raise_on_error=False)
        return {name: _hash_or_none(value) for name, value in zip(names, values, strict=True)}

    def apply(
        self, running: ConfigDb, operations: Sequence[Mapping[str, Any]], intended: ConfigDb
    ) -> Applied:
        """Make CONFIG_DB `intended` where it differs from `running` (what was read), verified.

        `operations` (the patch from `running` to `intended`) are GCU's input; Redis mode
        writes the keys whose content differs. Raises `StoreError` as `write` does.
        """
        before, after = touched(running, intended)
        self.write(before, after)
        return Applied(before, after)

    def undo(self, applied: Applied, why: str) -> None:
        """Put back what `applied` changed (the leaf rolls back as a whole); raises `StoreError`."""
        if not applied.after:
            raise StoreError(f"{why}; CONFIG_DB was not changed", "rolled_back")
        self.restore(applied.after, applied.before, why)

    def finish(self, applied: Applied) -> None:
        """Nothing to persist: SONiC's daemons read CONFIG_DB in Redis."""

    def write(self, before: RawKeys, after: RawKeys) -> None:
        """Change the keys from `before` (what the caller read) to `after`, verified.

        Raises:
            StoreError: ``failed`` with CONFIG_DB unchanged (a concurrent change, a refused
                write such as NOPERM or EXECABORT) or a restore that did not verify;
                ``rolled_back`` when the read-back differed and `before` is back, verified.
        """
        if not after:
            return
        self._swap(before, after, "the write")
        found = self._read_back(after)
        wrong = differing_keys(after, found)
        if wrong:
            self.restore(found, before, f"read back differs at {', '.join(wrong[:10])}")

    def restore(self, written: RawKeys, previous: RawKeys, why: str) -> None:
        """Put `previous` back where `written` is now (compare-and-swap); always a `StoreError`.

        Used after a mismatched read-back, and after a verified write when the leaf rolls back as
        a whole (FRR failed): a key someone changed since `written` is not overwritten.
        """
        try:
            self._swap(written, previous, "the restore")
        except StoreError as error:
            raise StoreError(f"{why}; {error}; CONFIG_DB is left changed") from error
        wrong = differing_keys(previous, self._read_back(previous))
        if wrong:
            raise StoreError(f"{why}; the restore did not verify at {', '.join(wrong[:10])}")
        raise StoreError(f"{why}; the previous content is back (verified)", "rolled_back")

    def _swap(self, expected: RawKeys, wanted: RawKeys, what: str) -> None:
        """One WATCH/MULTI/EXEC from `expected` to `wanted`; `StoreError` (unchanged) if not."""
        try:
            with self.client.pipeline(transaction=True) as pipe:
                cast(Any, pipe).watch(*wanted)  # redis-py leaves Pipeline.watch untyped
                current = {name: _hash_or_none(pipe.hgetall(name)) for name in wanted}
                wrong = differing_keys(expected, current)
                if wrong:
                    raise StoreError(f"{what}: changed since read: {', '.join(wrong[:10])}")
                pipe.multi()
                _queue_writes(pipe, current, wanted)
                pipe.execute()
        except redis.WatchError as error:
            raise StoreError(f"{what}: a concurrent change to the keys; nothing written") from error
        except redis.RedisError as error:
            raise StoreError(f"{what} was refused, nothing written: {_said(error)}") from error

    def _read_back(self, expected: RawKeys) -> RawKeys:
        try:
            return self.read_keys(expected)
        except redis.RedisError as error:
            raise StoreError(f"written, but the read-back failed: {_said(error)}") from error


def _queue_writes(pipe: Any, current: RawKeys, wanted: RawKeys) -> None:
    """Queue the writes as ConfigDBConnector.set_entry does: a changed entry is never deleted.

    SONiC's daemons act on keyspace notifications: a DEL would make them remove the object
    (a VLAN, a VRF) before the HSET re-creates it. set_entry writes the new fields (HMSET) and
    deletes only the fields the entry loses (HDEL); DEL only for a removed entry.
    """
    for name, content in wanted.items():
        if content is None:
            pipe.delete(name)
            continue
        pipe.hset(name, mapping=content)
        stale = sorted(set(current.get(name) or {}) - set(content))
        if stale:
            pipe.hdel(name, *stale)


def _hash_or_none(value: Any) -> RawEntry | None:
    if isinstance(value, Exception) or not value:
        return None
    return {str(k): str(v) for k, v in value.items()}


def _said(error: redis.RedisError) -> str:
    return f"{type(error).__name__}: {error}"
