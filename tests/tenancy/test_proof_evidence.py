"""A proof's evidence stays fetchable: issuing retains the files it names and pins their snapshot.

A verifier (the console's in-browser check, an auditor's script) fetches a proof's subjects by
the snapshot digest it states; once the fabric moved on, those files exist only if they were
retained. Issuing retains them (opensm.conf sealed, as for a signed manifest) and the proof's
row pins the snapshot against pruning while it is among the fabric's `proof_retain` most
recently proven snapshots; the agents' window (`snapshot_retain`) is counted apart.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import zlib
from typing import Any

import pytest
from sqlalchemy import Engine, text

from policies.errors import NotRetainedError
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, proofs, snapshot_history
from tests.builders import FABRIC, FakeClock, Onboarded

PARTITIONS = "opensm/partitions.conf"


def subjects_and_digest(proof: Any) -> tuple[dict[str, str], str]:
    statement = json.loads(base64.b64decode(proof.envelope.payload))
    subjects = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    return subjects, statement["predicate"]["snapshot_digest"]


def issued(uow: UnitOfWork) -> tuple[dict[str, str], str]:
    """acme's proof on the fabric: its subjects (name -> sha256) and its snapshot digest."""
    return subjects_and_digest(proofs.issue(uow, tenant_name="acme", fabric_name=FABRIC))


def fetched_sha(uow: UnitOfWork, digest: str, path: str = PARTITIONS) -> str:
    artifact = snapshot_history.snapshot_artifact(uow, fabric_name=FABRIC, digest=digest, path=path)
    return hashlib.sha256(artifact.content).hexdigest()


def move_on(uow: UnitOfWork, onboarded: Onboarded, tenant: str) -> None:
    """Change the fabric (release the tenant's allocation), so its snapshot is no longer current."""
    allocation = onboarded.allocation_ids[tenant]
    allocations.release_allocation(uow, tenant_name=tenant, allocation_id=allocation)


def retaining(
    engine: Engine, settings: Settings, clock: FakeClock, snapshot: int, proven: int = 100
) -> UnitOfWork:
    """A unit of work keeping `snapshot` fetched and `proven` proven snapshots per fabric."""
    limits = dataclasses.replace(settings, snapshot_retain=snapshot, proof_retain=proven)
    return UnitOfWork(engine, limits, clock)


def test_a_proofs_subjects_stay_fetchable_by_digest_after_the_fabric_moves_on(uow, onboarded):
    proof = proofs.issue(uow, tenant_name="acme", fabric_name=FABRIC)
    subjects, digest = subjects_and_digest(proof)

    move_on(uow, onboarded, "research")

    assert proofs.get_proof(uow, proof_id=proof.id, tenant=None).envelope == proof.envelope
    assert fetched_sha(uow, digest) == subjects[PARTITIONS]


def test_a_proofs_opensm_conf_is_retained_sealed(uow, onboarded, engine):
    proofs.issue(uow, tenant_name="acme", fabric_name=FABRIC)

    with engine.connect() as connection:
        blobs = connection.execute(text("SELECT sealed, content FROM artifact_blob")).all()
    assert sorted(sealed for sealed, _ in blobs) == [False, False, True]
    sealed_content = next(bytes(content) for sealed, content in blobs if sealed)
    with pytest.raises(zlib.error):
        zlib.decompress(sealed_content)


def test_agents_fetches_do_not_prune_a_proven_snapshot(engine, settings, clock, onboarded):
    uow = retaining(engine, settings, clock, snapshot=1)
    subjects, digest = issued(uow)
    for tenant in ("research", "globex"):  # two newer snapshots, each fetched by an agent
        move_on(uow, onboarded, tenant)
        snapshot_history.signed_manifest(uow, fabric_name=FABRIC)

    assert fetched_sha(uow, digest) == subjects[PARTITIONS]


def test_only_the_most_recently_proven_snapshots_are_pinned(engine, settings, clock, onboarded):
    uow = retaining(engine, settings, clock, snapshot=1, proven=1)
    _, first = issued(uow)
    move_on(uow, onboarded, "research")
    clock.advance(60)
    subjects, second = issued(uow)
    move_on(uow, onboarded, "globex")
    snapshot_history.signed_manifest(uow, fabric_name=FABRIC)  # retains the newest, prunes

    assert fetched_sha(uow, second) == subjects[PARTITIONS]
    with pytest.raises(NotRetainedError):
        fetched_sha(uow, first)
