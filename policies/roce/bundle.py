"""The artifact bundle of a RoCE fabric: config_db.json, ownership.json and frr.conf per leaf."""

from __future__ import annotations

from policies.artifacts import Artifact
from policies.roce.model import RoceSnapshot
from policies.roce.ownership import OWNERSHIP_FILE, leaf_ownership
from policies.roce.render_frr import render_frr_conf
from policies.roce.render_sonic import render_config_db_json


def render_roce_artifacts(snapshot: RoceSnapshot) -> tuple[Artifact, ...]:
    """Render ``sonic/<leaf>/{config_db,ownership}.json`` and ``frr/<leaf>/frr.conf`` per leaf.

    ownership.json names the keys the leaf's agent may patch (policies/roce/ownership.py).

    Returns:
        Artifacts sorted by path; byte-identical for equal snapshots.
    """
    files = []
    for leaf in snapshot.leaves():
        files.append(
            Artifact(
                f"sonic/{leaf.name}/config_db.json",
                render_config_db_json(snapshot, leaf.name).encode(),
            )
        )
        ownership = leaf_ownership(snapshot, leaf.name).to_json()
        files.append(Artifact(f"sonic/{leaf.name}/{OWNERSHIP_FILE}", ownership.encode()))
        files.append(
            Artifact(f"frr/{leaf.name}/frr.conf", render_frr_conf(snapshot, leaf.name).encode())
        )
    return tuple(sorted(files, key=lambda artifact: artifact.path))
