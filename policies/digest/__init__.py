"""The v2 snapshot digest: a multiset hash over groups of facts that a change updates in place.

Version 1 (``sha256:<hex>``) hashed one canonical serialisation of the whole snapshot, so every
change paid for the whole fabric. Version 2 (``v2:<hex>``) splits a snapshot into *groups*, each
a canonical JSON document under a key: ``fabric`` (settings and what belongs to no one),
``node:<name>`` (a host and its ports or NICs) and ``owner:<owner>`` (what a tenant or service
holds: its nodes, its segment, its grants). The digest is the SHA-256 of the LtHash16 sum of the
groups' SHA-256s (policies/digest/lthash.py), so replacing one group's hash updates it in
time proportional to that group.

Groups hold the inputs of the system of record. What the planner derives from them (InfiniBand
memberships, RoCE grant imports) is named by a planner version in the ``fabric`` group, and any
deviation of a snapshot's derived data from the plan (possible only for snapshots read from
deployed configuration) is part of the group of the port's or segment's owner, so the digest
still tells every two different snapshots apart.

Version boundary: entries of the audit log, proofs and snapshot history written before keep
their ``sha256:`` digests and verify as before (a digest is an opaque name that signatures and
hash chains cover); the first change of a fabric after the upgrade is audited with the v1 digest
as `digest_before` and the v2 digest as `digest_after`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from policies.digest.lthash import MultisetHash, element_hash

DIGEST_PREFIX = "v2:"
# A snapshot digest of either version, as stored and exchanged (audit log, manifests, reports).
SNAPSHOT_DIGEST_PATTERN = r"(sha256|v2):[0-9a-f]{64}"
FABRIC_GROUP = "fabric"

Groups = dict[str, bytes]


def canonical(document: Any) -> bytes:
    """Deterministic JSON: sorted keys, no whitespace (values must already be sorted lists)."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), default=str).encode()


def node_key(node: str) -> str:
    """The group key of a host."""
    return f"node:{node}"


def owner_key(owner: object) -> str:
    """The group key of an owner (``owner:tenant:acme``)."""
    return f"owner:{owner}"


def group_hash(key: str, body: bytes) -> bytes:
    """The element hash of one group: its key and canonical body."""
    return element_hash(key.encode() + b"\x00" + body)


def hashes_of(groups: Mapping[str, bytes]) -> dict[str, bytes]:
    """Each group's element hash, by key."""
    return {key: group_hash(key, body) for key, body in groups.items()}


def digest_of_hashes(hashes: Iterable[bytes]) -> str:
    """The v2 digest of a set of group hashes."""
    total = MultisetHash()
    for element in hashes:
        total.add(element)
    return DIGEST_PREFIX + total.digest()


def digest_of(groups: Mapping[str, bytes]) -> str:
    """The v2 digest of a snapshot's groups (see the module docstring)."""
    return digest_of_hashes(hashes_of(groups).values())


def is_v2(digest: str) -> bool:
    """Whether a digest string is a version 2 snapshot digest."""
    return digest.startswith(DIGEST_PREFIX)
