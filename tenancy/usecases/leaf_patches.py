"""A RoCE leaf's CONFIG_DB patch between two snapshots.

The artifacts route serves files by content; a patch depends on where the leaf starts, so it is
computed from two snapshots' retained config_db.json of the leaf (`snapshot_artifact`) with the
target snapshot's ownership.json of the leaf (`policies.roce.patch.leaf_patch`).
"""

from __future__ import annotations

import json

from policies.errors import DisruptiveChangeError, InvalidValueError, NotFoundError
from policies.roce.ownership import OWNERSHIP_FILE, LeafOwnership
from policies.roce.patch import Operation, leaf_patch
from policies.roce.render_sonic import ConfigDb
from tenancy.store.lookups import fabric_named, target_row
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import snapshot_history

CONFIG_DB_FILE = "config_db.json"


def snapshot_patch(
    uow: UnitOfWork,
    *,
    fabric_name: str,
    digest: str,
    leaf: str,
    start: str | None,
    allow_disruptive: bool,
) -> list[Operation]:
    """The RFC 6902 patch that takes `leaf`'s config_db.json of snapshot `start` to `digest`'s.

    Owned keys only, unless `allow_disruptive` (then declared keys' changes too). `start`
    defaults to the snapshot the leaf's deploy target holds.

    Raises:
        NotFoundError: no such fabric, snapshot, or leaf in snapshot `digest` or `start`.
        NotRetainedError: a snapshot existed but its files were pruned (410).
        InvalidValueError: no `start` given and the leaf's target holds no snapshot (422).
        DisruptiveChangeError: the change touches declared keys and `allow_disruptive` is off;
            `paths` lists their JSON Pointers.
    """
    target_text, ownership_text = _leaf_files(
        uow, fabric_name, digest, leaf, CONFIG_DB_FILE, OWNERSHIP_FILE
    )
    ownership = LeafOwnership.from_json(ownership_text)
    origin = start if start is not None else _deployed(uow, fabric_name, leaf)
    [running_text] = _leaf_files(uow, fabric_name, origin, leaf, CONFIG_DB_FILE)
    patch = leaf_patch(_document(running_text), _document(target_text), ownership)
    if patch.disruptive and not allow_disruptive:
        paths = [str(operation["path"]) for operation in patch.disruptive]
        raise DisruptiveChangeError(
            f"the patch of leaf '{leaf}' from {origin} to {digest} changes {len(paths)} "
            "declared CONFIG_DB entries (ports, fabric-wide QoS, buffers): ask with "
            "allow_disruptive=true to get them",
            paths=paths,
        )
    return patch.operations(allow_disruptive=allow_disruptive)


def _deployed(uow: UnitOfWork, fabric_name: str, leaf: str) -> str:
    with uow.transaction(read_only=True) as tx:
        target = target_row(tx.session, fabric_named(tx.session, fabric_name), leaf)
        if target is None or target.deployed is None:
            raise InvalidValueError(
                f"no 'from' snapshot given, and leaf '{leaf}' has no deploy target that holds "
                "one: name the snapshot the leaf runs",
                parameter="from",
            )
        return target.deployed


def _document(text: str) -> ConfigDb:
    document: ConfigDb = json.loads(text)
    return document


def _leaf_files(
    uow: UnitOfWork, fabric_name: str, digest: str, leaf: str, *names: str
) -> list[str]:
    paths = [f"sonic/{leaf}/{name}" for name in names]
    try:
        files = snapshot_history.snapshot_files(
            uow, fabric_name=fabric_name, digest=digest, paths=paths
        )
    except NotFoundError as error:
        if error.extensions.get("resource") != "artifact":
            raise  # no such snapshot (404), or pruned (410)
        raise NotFoundError(
            f"snapshot {digest} of fabric '{fabric_name}' has no leaf '{leaf}' "
            f"({', '.join(paths)})",
            resource="leaf",
            leaf=leaf,
        ) from error
    return [artifact.content.decode() for artifact in files]
