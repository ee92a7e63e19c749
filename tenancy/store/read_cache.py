"""The read cache: a fabric's verdict and rendered files, kept per committed state in process.

A verdict and the artifacts are pure functions of the fabric's snapshot, which its digest names,
and of what the code computing them does; the artifacts also of the render inputs (OpenSM keys,
tenancy/technology.py `RenderInputs`), which the digest does not cover. So an entry is keyed by
fabric, snapshot digest and a fingerprint of the code and those inputs (`ReadKey`), and it is
stored only under the digest of the very snapshot it was computed from
(tenancy/gate/cached_reads.py):
an entry can be missing or unused, never wrong for its key.

Entries are immutable bytes with their sha256 computed once, so a hit serves them as they are: no
re-serialisation, no re-hashing. The cache is bounded by the bytes it holds (least recently used
out first), safe across the worker threads of the API, and one per `UnitOfWork` (the app's).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path

import pydantic

import policies

# About forty 100k-port fabrics' verdicts and files (4.5 MB of partitions.conf each).
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
# The verdict's entry holds one file under this name; artifact paths always have a directory.
VERDICT_NAME = "verification.json"


@dataclass(frozen=True, slots=True)
class ReadKey:
    """Which entry: the fabric, its snapshot's digest, the fingerprint of code and inputs."""

    fabric_id: int
    digest: str
    inputs: str


@dataclass(frozen=True, slots=True)
class CachedFile:
    """One file as served: its path, its bytes and their hex sha256 (the ETag), hashed once."""

    path: str
    content: bytes
    sha256: str

    @classmethod
    def of(cls, path: str, content: bytes) -> CachedFile:
        """The file with its sha256 computed now."""
        return cls(path, content, hashlib.sha256(content).hexdigest())


@dataclass(frozen=True, slots=True)
class Entry:
    """What was computed for one key: the snapshot's digest and the files, sorted by path."""

    digest: str
    files: tuple[CachedFile, ...]

    @property
    def size(self) -> int:
        """Bytes held, as the cache's bound counts them."""
        return sum(len(f.content) for f in self.files)

    def file(self, path: str) -> CachedFile | None:
        """The file at `path`, if the entry has one."""
        return next((f for f in self.files if f.path == path), None)


@dataclass(slots=True)
class _Flight:
    lock: threading.Lock = field(default_factory=threading.Lock)
    waiting: int = 0


class ReadCache:
    """Entries by key, bounded by `max_bytes`; every method is safe across threads."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[ReadKey, Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._flights: dict[ReadKey, _Flight] = {}

    def get(self, key: ReadKey) -> Entry | None:
        """The entry of `key`, now the most recently used; None on a miss."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: ReadKey, entry: Entry) -> None:
        """Keep `entry` under `key`, dropping the least recently used beyond the bound.

        An entry larger than the whole bound is not kept (it would evict everything).
        """
        if entry.size > self.max_bytes:
            return
        with self._lock:
            replaced = self._entries.pop(key, None)
            self._bytes += entry.size - (replaced.size if replaced is not None else 0)
            self._entries[key] = entry
            while self._bytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= dropped.size

    def digests(self, fabric_id: int, inputs: str) -> list[str]:
        """The digests of the fabric's states held under fingerprint `inputs` (no order).

        A scan of the keys, not of the bytes: a few hundred entries at most under the bound.
        """
        with self._lock:
            return [
                k.digest for k in self._entries if k.fabric_id == fabric_id and k.inputs == inputs
            ]

    def clear(self) -> None:
        """Drop every entry (tests; an operator's restart does the same)."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    @property
    def bytes_held(self) -> int:
        """The bytes of all entries held now."""
        with self._lock:
            return self._bytes

    @contextmanager
    def single_flight(self, key: ReadKey) -> Iterator[None]:
        """Hold the lock of `key`: concurrent misses of one key compute it once, not N times.

        The holder computes and puts; the others wait here and then find the entry with `get`.
        """
        with self._lock:
            flight = self._flights.setdefault(key, _Flight())
            flight.waiting += 1
        try:
            with flight.lock:
                yield
        finally:
            with self._lock:
                flight.waiting -= 1
                if flight.waiting == 0:
                    del self._flights[key]


def fingerprint(purpose: str, material: bytes = b"") -> str:
    """Hex sha256 of `purpose`, the code's fingerprint and `material` (the render inputs).

    The purpose ("verdict", "artifacts") keeps the two kinds of entry apart; the material is
    hashed, so a fingerprint stored with a shared entry tells a database reader no key.
    """
    digest = hashlib.sha256(f"isofabric/read-cache/v1/{purpose}\0".encode())
    digest.update(code_fingerprint())
    digest.update(material)
    return digest.hexdigest()


@cache
def code_fingerprint() -> bytes:
    """sha256 over the source of the packages that compute entries, and the versions involved.

    Entries shared through the database outlive a process: after an upgrade (or during a
    rolling one) a replica must not serve what another version's verifier or renderer made.
    Hashing the source catches every change without a version constant someone must bump.
    """
    digest = hashlib.sha256()
    for version in (_own_version(), pydantic.VERSION):
        digest.update(version.encode() + b"\0")
    for root in (Path(policies.__file__).parent, Path(__file__).parents[1]):
        for path in sorted(root.rglob("*.py")):
            digest.update(path.relative_to(root.parent).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.digest()


def _own_version() -> str:
    try:
        return metadata.version("isofabric")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"
