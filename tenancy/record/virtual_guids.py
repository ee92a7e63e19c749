"""The virtual GUID ledger: a GUID of the fabric's ranges belongs to one tenant at a time.

A virtual GUID is bound to the tenant of the first partition it joins and may then join only
that tenant's partitions. Once it has left every partition it is ``draining`` until every deploy
target has read back the snapshot without it (`drain_snapshot_id`), the rule released P_Keys and
drained nodes follow (tenancy/record/quarantine.py); then its row goes and it is free. Where
no target can have received it (the fabric has none, or no snapshot holding it was fetched) it
is free at once.
"""

from __future__ import annotations

import json
from collections.abc import Collection

from pydantic import BaseModel
from sqlalchemy import bindparam, delete, exists, or_, update
from sqlmodel import Session, col, select

from policies.authz import TENANT_ROLES
from policies.errors import ConflictError, InvalidValueError
from policies.infiniband.model import format_guid
from tenancy import models as m
from tenancy.store.db import forget_loaded
from tenancy.store.tx_memo import pending
from tenancy.store.uow import Tx

BOUND = "bound"
DRAINING = "draining"


def setting_of(fabric: m.Fabric) -> dict[str, object]:
    """The fabric's virtual GUID setting as stored (disabled when never set)."""
    if not fabric.virtual_guids:
        return {"enabled": False, "ranges": [], "sm": "nvidia"}
    return dict(json.loads(fabric.virtual_guids))


def stored_setting(setting: BaseModel) -> str | None:
    """The setting as the fabric row stores it: JSON, or None when it is the default (off)."""
    document = setting.model_dump(mode="json")
    if not document["enabled"] and not document["ranges"]:
        return None
    return json.dumps(document, sort_keys=True, separators=(",", ":"))


def in_ranges(fabric: m.Fabric, guid: int) -> bool:
    """Whether `guid` lies in one of the fabric's enabled virtual GUID ranges."""
    return any(first <= guid <= last for first, last in _ranges(fabric))


def _ranges(fabric: m.Fabric) -> list[tuple[int, int]]:
    """The fabric's virtual GUID ranges as numbers; none while the setting is off."""
    setting = setting_of(fabric)
    if not setting["enabled"]:
        return []
    ends = (str(text).partition("-") for text in setting["ranges"])  # type: ignore[attr-defined]
    return [(int(first, 16), int(last, 16)) for first, _, last in ends]


def bind(tx: Tx, fabric: m.Fabric, tenant: m.Tenant, guids: Collection[int]) -> None:
    """Bind every GUID of `guids` to `tenant` unless one is bound (or draining) for another.

    The ledger is read once (in chunks), not once per GUID: a partition may list thousands.

    Raises:
        ConflictError: another tenant holds one, or one is still draining from another tenant.
        InvalidValueError: one is not in the fabric's ranges.
    """
    if not guids:
        return
    ranges = _ranges(fabric)
    for guid in guids:
        if not any(first <= guid <= last for first, last in ranges):
            text = f"{format_guid(guid)} is not in the fabric's virtual GUID ranges"
            raise InvalidValueError(text)
    found = _rows(tx.session, m.pk(fabric), [format_guid(g) for g in guids])
    for guid in guids:
        row = found.get(format_guid(guid))
        if row is None:
            tx.session.add(
                m.VirtualGuid(
                    fabric_id=m.pk(fabric),
                    guid=format_guid(guid),
                    tenant_id=m.pk(tenant),
                    bound_at=tx.now,
                )
            )
        elif row.tenant_id != tenant.id:
            raise _taken(tx, row, guid)
        else:
            row.state, row.released_at, row.drain_snapshot_id = BOUND, None, None
            tx.session.add(row)
    pending(tx.session, "virtual_guids").add(m.pk(fabric))


def _taken(tx: Tx, row: m.VirtualGuid, guid: int) -> ConflictError:
    """The refusal of a GUID another tenant holds; a tenant role is not told which tenant.

    Nor is a caller acting for one tenant in another role (an orchestrator bound to a tenant,
    on the UFM-compatible API): only a caller that sees every tenant learns the holder.
    """
    state = "bound to" if row.state == BOUND else "still draining from"
    holder = "another tenant"
    if tx.principal.role not in TENANT_ROLES and tx.principal.tenant is None:
        owner = tx.session.get(m.Tenant, row.tenant_id)
        holder = f"tenant '{owner.name if owner else '?'}'"
    text = f"virtual GUID {format_guid(guid)} is {state} {holder}"
    return ConflictError(text, guid=format_guid(guid))


def settle(tx: Tx, fabric_id: int, guids: Collection[str], pkey: int | None = None) -> None:
    """Virtual GUIDs among `guids` that are in no partition any more start draining (or go).

    `pkey` is the P_Key of the partition they left: the fabric may enforce it until the drain
    ends, and the UFM-compatible API lists them there meanwhile.
    """
    if not guids:
        return
    tx.session.flush()  # Core statements: pending member changes first
    connection = tx.session.connection()
    values = {"fabric": fabric_id, "guids": list(guids), "now": tx.now, "pkey": pkey}
    left = [row[0] for row in connection.execute(_START_DRAINING, values)]
    if not left:
        return
    freed = [
        row[0] for row in connection.execute(_FREE_UNDEPLOYED, {"ids": left, "fabric": fabric_id})
    ]
    forget_loaded(tx.session, m.VirtualGuid, freed)
    pending(tx.session, "virtual_guids").add(fabric_id)


def stamp_virtual_guids(session: Session, fabric_id: int, snapshot_id: int) -> None:
    """GUIDs bound or left in this transaction learn their first and their draining snapshot."""
    owed = pending(session, "virtual_guids")
    if fabric_id not in owed:
        return
    values = {"fabric": fabric_id, "snapshot": snapshot_id}
    session.execute(_STAMP_BOUND, values)
    session.execute(_STAMP_DRAINING, values)
    owed.discard(fabric_id)


def end_read_back(session: Session, fabric_id: int, read_back: int | None) -> int:
    """Free the draining GUIDs whose release every deploy target has read back; how many."""
    if read_back is None:
        return 0
    session.flush()
    values = {"fabric": fabric_id, "read_back": read_back}
    freed = [row[0] for row in session.connection().execute(_END_READ_BACK, values)]
    forget_loaded(session, m.VirtualGuid, freed)
    return len(freed)


def _rows(session: Session, fabric_id: int, guids: list[str]) -> dict[str, m.VirtualGuid]:
    """The ledger's rows of `guids` on the fabric, by GUID text (chunks within bind limits)."""
    session.flush()
    found: dict[str, m.VirtualGuid] = {}
    for start in range(0, len(guids), _CHUNK):
        query = select(m.VirtualGuid).where(
            m.VirtualGuid.fabric_id == fabric_id,
            col(m.VirtualGuid.guid).in_(guids[start : start + _CHUNK]),
        )
        found.update((row.guid, row) for row in session.exec(query))
    return found


# GUIDs per ledger query: far below SQLite's and PostgreSQL's limits on bound parameters.
_CHUNK = 1000


_VG = m.VirtualGuid
_IN_A_PARTITION = exists().where(
    col(m.PartitionMember.guid) == col(_VG.guid),
    col(m.PartitionMember.partition_id) == col(m.Partition.id),
    col(m.Partition.fabric_id) == col(_VG.fabric_id),
)
_START_DRAINING = (
    update(_VG)
    .where(
        col(_VG.fabric_id) == bindparam("fabric"),
        col(_VG.guid).in_(bindparam("guids", expanding=True)),
        col(_VG.state) == BOUND,
        ~_IN_A_PARTITION,
    )
    .values(state=DRAINING, released_at=bindparam("now"), pkey=bindparam("pkey"))
    .returning(col(_VG.id))
)
_FETCHED_SINCE = exists().where(
    col(m.SnapshotRecord.fabric_id) == col(_VG.fabric_id),
    col(m.SnapshotRecord.id) >= col(_VG.snapshot_id),
    col(m.SnapshotRecord.fetched_at).is_not(None),
)
_HAS_TARGETS = exists().where(col(m.DeployTarget.fabric_id) == bindparam("fabric"))
_FREE_UNDEPLOYED = (
    delete(_VG)
    .where(
        col(_VG.id).in_(bindparam("ids", expanding=True)),
        or_(~_HAS_TARGETS, col(_VG.snapshot_id).is_(None), ~_FETCHED_SINCE),
    )
    .returning(col(_VG.id))
)
_STAMP_BOUND = (
    update(_VG)
    .where(col(_VG.fabric_id) == bindparam("fabric"), col(_VG.snapshot_id).is_(None))
    .values(snapshot_id=bindparam("snapshot"))
)
_STAMP_DRAINING = (
    update(_VG)
    .where(
        col(_VG.fabric_id) == bindparam("fabric"),
        col(_VG.state) == DRAINING,
        col(_VG.drain_snapshot_id).is_(None),
    )
    .values(drain_snapshot_id=bindparam("snapshot"))
)
_END_READ_BACK = (
    delete(_VG)
    .where(
        col(_VG.fabric_id) == bindparam("fabric"),
        col(_VG.state) == DRAINING,
        col(_VG.drain_snapshot_id) <= bindparam("read_back"),
    )
    .returning(col(_VG.id))
)
