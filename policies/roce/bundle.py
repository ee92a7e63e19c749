"""The artifact bundle of a RoCE fabric: SONiC config_db.json and FRR frr.conf for every leaf."""

from __future__ import annotations

from policies.artifacts import Artifact
from policies.roce.model import RoceSnapshot
from policies.roce.render_frr import render_frr_conf
from policies.roce.render_sonic import render_config_db_json


def render_roce_artifacts(snapshot: RoceSnapshot) -> tuple[Artifact, ...]:
    """Render ``sonic/<leaf>/config_db.json`` and ``frr/<leaf>/frr.conf`` for every leaf.

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
        files.append(
            Artifact(f"frr/{leaf.name}/frr.conf", render_frr_conf(snapshot, leaf.name).encode())
        )
    return tuple(sorted(files, key=lambda artifact: artifact.path))
