"""The fabric's v2 digest kept in step with its changes (tables fabric_digest, digest_group).

`rebuild` sets both from a whole snapshot (the first change after an upgrade, a topology import,
a full re-verification); `replace_groups` swaps the hashes of the groups one change touched and
adds the difference to the LtHash state, in time proportional to those groups. Both run in the
change's own transaction, under the fabric lock, so the stored digest is always the committed
state's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, col

from policies.digest import DIGEST_PREFIX, Groups, digest_of_hashes, group_hash, hashes_of
from policies.digest.lthash import MultisetHash
from policies.infiniband.digest import ib_groups
from policies.infiniband.model import IbSnapshot
from policies.model import Owner
from policies.roce.digest import roce_groups
from tenancy import models as m
from tenancy.record.snapshot import Snapshot
from tenancy.store.bulk import insert_rows
from tenancy.store.db import fetch_all
from tenancy.store.uow import Tx


def current(session: Session, fabric_id: int) -> m.FabricDigest | None:
    """The fabric's stored digest state, or None before its first verified change since 0014."""
    return session.get(m.FabricDigest, fabric_id)


def groups_of(
    snapshot: Snapshot,
    owners: Collection[Owner] | None = None,
    nodes: Collection[str] | None = None,
) -> Groups:
    """The snapshot's digest groups (all, or those of `owners` and `nodes`)."""
    if isinstance(snapshot, IbSnapshot):
        return ib_groups(snapshot, owners=owners, nodes=nodes)
    return roce_groups(snapshot, owners=owners, nodes=nodes)


def whole_hashes(snapshot: Snapshot) -> dict[str, bytes]:
    """Every group hash of the whole `snapshot`, by key (`rebuild` stores them)."""
    return hashes_of(groups_of(snapshot))


def digest_of_whole(hashes: Mapping[str, bytes]) -> str:
    """The v2 digest of a whole snapshot from its `whole_hashes` (no group hashed again)."""
    return digest_of_hashes(hashes.values())


def rebuild(
    tx: Tx, fabric: m.Fabric, snapshot: Snapshot, hashes: Mapping[str, bytes] | None = None
) -> m.FabricDigest:
    """Store every group hash of the whole `snapshot` and its digest; only changed rows move.

    `hashes` are the snapshot's `whole_hashes` when the caller computed them already.
    """
    fabric_id = m.pk(fabric)
    hashes = whole_hashes(snapshot) if hashes is None else hashes
    stored = dict(_stored(tx.session, fabric_id))
    changed = {k: h for k, h in hashes.items() if stored.get(k) != h}
    gone = [k for k in stored if k not in hashes]
    _write(tx.session, fabric_id, changed, [*changed, *gone])
    total = MultisetHash()
    for element in hashes.values():
        total.add(element)
    return _save(tx, fabric_id, total, DIGEST_PREFIX + total.digest())


def replace_groups(
    tx: Tx, row: m.FabricDigest, groups: Groups, keys: Collection[str]
) -> m.FabricDigest:
    """Replace the hashes of `keys` by those of `groups` (a key absent from it is dropped)."""
    fresh = {key: hashed for key in keys if (hashed := _hash_or_none(key, groups)) is not None}
    stored = _take(tx.session, row.fabric_id, list(keys))
    total = MultisetHash(row.state)
    for key in keys:
        old, new = stored.get(key), fresh.get(key)
        if old == new:
            continue
        if old is not None:
            total.remove(old)
        if new is not None:
            total.add(new)
    _write(tx.session, row.fabric_id, fresh, [])
    return _save(tx, row.fabric_id, total, f"v2:{total.digest()}")


def _hash_or_none(key: str, groups: Mapping[str, bytes]) -> bytes | None:
    body = groups.get(key)
    return None if body is None else group_hash(key, body)


def _stored(session: Session, fabric_id: int) -> list[tuple[str, bytes]]:
    query = select(col(m.DigestGroup.key), col(m.DigestGroup.hash)).where(
        col(m.DigestGroup.fabric_id) == fabric_id
    )
    return [(key, bytes(value)) for key, value in fetch_all(session, query)]


def _take(session: Session, fabric_id: int, keys: list[str]) -> dict[str, bytes]:
    """Delete the stored hashes of `keys` and return them (``DELETE ... RETURNING``)."""
    taken: dict[str, bytes] = {}
    for start in range(0, len(keys), _CHUNK):
        values = {"fabric": fabric_id, "keys": keys[start : start + _CHUNK]}
        for key, value in session.connection().execute(_TAKE, values):
            taken[key] = bytes(value)
    return taken


def _write(session: Session, fabric_id: int, new: Mapping[str, bytes], moved: list[str]) -> None:
    """Delete the rows of `moved` keys, then insert the `new` hashes (a replace in two bulks)."""
    for start in range(0, len(moved), _CHUNK):
        chunk = moved[start : start + _CHUNK]
        session.connection().execute(_DELETE, {"fabric": fabric_id, "keys": chunk})
    # A first import writes a group per host (12,500 on the benchmark fabric): bulk rows.
    rows = [(fabric_id, key, hashed) for key, hashed in new.items()]
    insert_rows(session, m.DigestGroup, ("fabric_id", "key", "hash"), rows)


def _save(tx: Tx, fabric_id: int, total: MultisetHash, digest: str) -> m.FabricDigest:
    state = total.state()
    row = tx.session.get(m.FabricDigest, fabric_id)
    if row is None:
        row = m.FabricDigest(
            fabric_id=fabric_id, digest=digest, state=state, holds=True, updated_at=tx.now
        )
        tx.session.add(row)
        tx.session.flush()
        return row
    values = {"digest": digest, "state": state, "holds": True, "updated_at": tx.now}
    # One prepared UPDATE; the session's row takes the values as if loaded (it stays clean).
    tx.session.connection().execute(_UPDATE, {"fabric": fabric_id} | values)
    for name, value in values.items():
        set_committed_value(row, name, value)
    return row


_CHUNK = 5_000  # keys per statement: far below SQLite's bound-parameter limit
# Built once: a change's digest update is a handful of prepared statements.
_KEYS = (
    col(m.DigestGroup.fabric_id) == bindparam("fabric"),
    col(m.DigestGroup.key).in_(bindparam("keys", expanding=True)),
)
_TAKE = (
    delete(m.DigestGroup).where(*_KEYS).returning(col(m.DigestGroup.key), col(m.DigestGroup.hash))
)
_DELETE = delete(m.DigestGroup).where(*_KEYS)
_UPDATE = update(m.FabricDigest).where(col(m.FabricDigest.fabric_id) == bindparam("fabric"))
