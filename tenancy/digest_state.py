"""The fabric's v2 digest kept in step with its changes (tables fabric_digest, digest_group).

`rebuild` sets both from a whole snapshot (the first change after an upgrade, a topology import,
a full re-verification); `replace_groups` swaps the hashes of the groups one change touched and
adds the difference to the LtHash state, in time proportional to those groups. Both run in the
change's own transaction, under the fabric lock, so the stored digest is always the committed
state's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from sqlalchemy import delete, insert, select
from sqlmodel import Session, col

from policies.digest import Groups, digest_of_hashes, group_hash, hashes_of
from policies.digest.lthash import MultisetHash
from policies.infiniband.digest import ib_groups
from policies.infiniband.model import IbSnapshot
from policies.model import Owner
from policies.roce.digest import roce_groups
from tenancy import models as m
from tenancy.db import fetch_all
from tenancy.snapshot import Snapshot
from tenancy.uow import Tx


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


def rebuild(tx: Tx, fabric: m.Fabric, snapshot: Snapshot) -> m.FabricDigest:
    """Store every group hash of the whole `snapshot` and its digest; only changed rows move."""
    fabric_id = m.pk(fabric)
    hashes = hashes_of(groups_of(snapshot))
    stored = dict(_stored(tx.session, fabric_id, None))
    changed = {k: h for k, h in hashes.items() if stored.get(k) != h}
    gone = [k for k in stored if k not in hashes]
    _write(tx.session, fabric_id, changed, [*changed, *gone])
    total = MultisetHash()
    for element in hashes.values():
        total.add(element)
    return _save(tx, fabric_id, total, digest_of_hashes(hashes.values()))


def replace_groups(
    tx: Tx, row: m.FabricDigest, groups: Groups, keys: Collection[str]
) -> m.FabricDigest:
    """Replace the hashes of `keys` by those of `groups` (a key absent from it is dropped)."""
    stored = dict(_stored(tx.session, row.fabric_id, keys))
    total = MultisetHash(row.state)
    changed: dict[str, bytes] = {}
    for key in keys:
        old, new = stored.get(key), _hash_or_none(key, groups)
        if old == new:
            continue
        if old is not None:
            total.remove(old)
        if new is not None:
            total.add(new)
            changed[key] = new
    moved = [k for k in keys if stored.get(k) != _hash_or_none(k, groups)]
    _write(tx.session, row.fabric_id, changed, moved)
    return _save(tx, row.fabric_id, total, f"v2:{total.digest()}")


def _hash_or_none(key: str, groups: Mapping[str, bytes]) -> bytes | None:
    body = groups.get(key)
    return None if body is None else group_hash(key, body)


def _stored(
    session: Session, fabric_id: int, keys: Collection[str] | None
) -> list[tuple[str, bytes]]:
    query = select(col(m.DigestGroup.key), col(m.DigestGroup.hash)).where(
        col(m.DigestGroup.fabric_id) == fabric_id
    )
    if keys is not None:
        query = query.where(col(m.DigestGroup.key).in_(list(keys)))
    return [(key, bytes(value)) for key, value in fetch_all(session, query)]


def _write(session: Session, fabric_id: int, new: Mapping[str, bytes], moved: list[str]) -> None:
    """Delete the rows of `moved` keys, then insert the `new` hashes (a replace in two bulks)."""
    for start in range(0, len(moved), 5_000):  # stay far below SQLite's bound-parameter limit
        chunk = moved[start : start + 5_000]
        session.connection().execute(
            delete(m.DigestGroup).where(
                col(m.DigestGroup.fabric_id) == fabric_id, col(m.DigestGroup.key).in_(chunk)
            )
        )
    if new:
        session.connection().execute(
            insert(m.DigestGroup),
            [{"fabric_id": fabric_id, "key": k, "hash": h} for k, h in new.items()],
        )


def _save(tx: Tx, fabric_id: int, total: MultisetHash, digest: str) -> m.FabricDigest:
    row = tx.session.get(m.FabricDigest, fabric_id)
    if row is None:
        row = m.FabricDigest(fabric_id=fabric_id, digest=digest, state=b"", holds=True)
    row.digest, row.state, row.holds, row.updated_at = digest, total.state(), True, tx.now
    tx.session.add(row)
    tx.session.flush()
    return row
