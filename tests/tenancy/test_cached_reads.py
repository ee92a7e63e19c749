"""Cached reads: the verdict and the artifacts served from the read cache are those of the current
state (after every kind of change, a key rotation included), computed once per state, and never
rendered for a state that does not verify."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, literal

from policies.errors import IsolationViolationError, NotFoundError
from policies.verdict import Verdict
from tenancy import models as m
from tenancy.gate import cached_reads, verification
from tenancy.record import snapshot_log
from tenancy.record.snapshot import load_snapshot
from tenancy.schemas import AllocationCreate, GrantCreate, NodePatch, QosClassCreate
from tenancy.store import key_store
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import (
    allocations,
    nodes,
    shared_services,
    snapshot_history,
    tenants,
    topology,
)
from tests.builders import (
    ARTIFACT_PATHS,
    FREE_COMPUTE_NODES,
    ROCE_ARTIFACT_PATHS,
    Onboarded,
    example_topology,
    without_hosts,
)

Reads = dict[str, bytes]


def cached(
    uow: UnitOfWork, fabric: str = "ib-east", paths: tuple[str, ...] = ARTIFACT_PATHS
) -> Reads:
    """Every cached read of the fabric: the verdict's JSON, the manifest and each file."""
    reads = {"verification": cached_reads.verification_json(uow, fabric_name=fabric).content}
    reads["manifest"] = (
        cached_reads.list_artifacts(uow, fabric_name=fabric).model_dump_json().encode()
    )
    for path in paths:
        reads[path] = cached_reads.get_artifact(uow, fabric_name=fabric, path=path).file.content
    return reads


def reference(
    uow: UnitOfWork, fabric: str = "ib-east", paths: tuple[str, ...] = ARTIFACT_PATHS
) -> Reads:
    """The same reads computed by the uncached use cases (tenancy/gate/verification.py)."""
    view = verification.verify_fabric(uow, fabric_name=fabric)
    reads = {"verification": view.model_dump_json(by_alias=True).encode()}
    reads["manifest"] = (
        verification.list_artifacts(uow, fabric_name=fabric).model_dump_json().encode()
    )
    for path in paths:
        reads[path] = verification.get_artifact(uow, fabric_name=fabric, path=path)[0].content
    return reads


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The fabrics whose snapshot the cached reads loaded, in order."""
    loaded: list[str] = []

    def counting(session: Any, fabric: m.Fabric) -> Any:
        loaded.append(fabric.name)
        return load_snapshot(session, fabric)

    monkeypatch.setattr(cached_reads, "load_snapshot", counting)
    return loaded


def refuse_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(session: Any, fabric: m.Fabric) -> Any:
        raise AssertionError(f"a cached read loaded the snapshot of '{fabric.name}'")

    monkeypatch.setattr(cached_reads, "load_snapshot", refuse)


# --- what is served ----------------------------------------------------------------------------


def test_cached_reads_serve_exactly_what_the_uncached_use_cases_compute(uow, onboarded):
    assert cached(uow) == reference(uow)


def test_cached_roce_reads_serve_exactly_what_the_uncached_use_cases_compute(uow, roce_onboarded):
    assert cached(uow, "roce-west", ROCE_ARTIFACT_PATHS) == reference(
        uow, "roce-west", ROCE_ARTIFACT_PATHS
    )


def test_a_served_files_sha256_and_digest_are_the_manifests(uow, onboarded):
    manifest = cached_reads.list_artifacts(uow, fabric_name="ib-east")

    for entry in manifest.files:
        read = cached_reads.get_artifact(uow, fabric_name="ib-east", path=entry.path)
        assert (read.file.sha256, len(read.file.content)) == (entry.sha256, entry.bytes)
        assert read.snapshot_digest == manifest.snapshot_digest


def test_an_unknown_fabric_or_artifact_is_not_found(uow, onboarded):
    with pytest.raises(NotFoundError, match="ib-nowhere"):
        cached_reads.verification_json(uow, fabric_name="ib-nowhere")
    with pytest.raises(NotFoundError, match=r"opensm/ib-routing\.conf"):
        cached_reads.get_artifact(uow, fabric_name="ib-east", path="opensm/ib-routing.conf")


# --- computed once -----------------------------------------------------------------------------


def test_a_second_read_of_an_unchanged_fabric_loads_nothing(uow, onboarded, monkeypatch):
    first = cached(uow)
    refuse_loading(monkeypatch)

    assert cached(uow) == first
    assert cached_reads.tenant_reachability(uow, tenant_name="acme").fabrics[0].holds


def test_the_signed_manifest_and_the_current_states_files_by_digest_are_read_from_the_cache(
    uow, onboarded, monkeypatch
):
    digest = cached_reads.list_artifacts(uow, fabric_name="ib-east").snapshot_digest
    refuse_loading(monkeypatch)

    envelope = snapshot_history.signed_manifest(uow, fabric_name="ib-east")
    for path in ARTIFACT_PATHS:
        file = snapshot_history.snapshot_artifact(
            uow, fabric_name="ib-east", digest=digest, path=path
        )
        assert (
            file.content
            == verification.get_artifact(uow, fabric_name="ib-east", path=path)[0].content
        )
    assert envelope.payload


def test_reading_the_artifacts_caches_the_verdict_too(uow, onboarded, loads):
    cached_reads.get_artifact(uow, fabric_name="ib-east", path="opensm/partitions.conf")
    cached_reads.verification_json(uow, fabric_name="ib-east")
    cached_reads.list_artifacts(uow, fabric_name="ib-east")

    assert loads == ["ib-east"]


def test_the_tenants_reachability_is_read_from_the_cached_verdict(uow, onboarded, loads):
    cached_reads.verification_json(uow, fabric_name="ib-east")

    acme = cached_reads.tenant_reachability(uow, tenant_name="acme")

    assert loads == ["ib-east"]
    assert acme == verification.tenant_reachability(uow, tenant_name="acme")


def test_copies_of_the_unit_of_work_share_its_cache(uow, onboarded, loads):
    cached_reads.verification_json(uow, fabric_name="ib-east")
    cached_reads.verification_json(
        dataclasses.replace(uow, request_id="r-2"), fabric_name="ib-east"
    )

    assert loads == ["ib-east"]


def test_a_fabric_without_a_logged_state_is_computed_on_every_read(uow, onboarded, loads):
    with uow.transaction() as tx:
        tx.session.exec(delete(m.SnapshotRecord))

    assert cached(uow) == reference(uow)
    assert cached(uow) == reference(uow)
    assert len(loads) == 2 * (2 + len(ARTIFACT_PATHS))


def test_an_entry_is_kept_under_the_digest_it_was_computed_from_not_the_one_looked_up(
    uow, onboarded, loads, monkeypatch
):
    # The log names one state, the snapshot loaded is another (a change committed in between).
    real_newest_digest = snapshot_log.newest_digest
    monkeypatch.setattr(snapshot_log, "newest_digest", lambda: literal("v2:" + "0" * 64))
    cached_reads.verification_json(uow, fabric_name="ib-east")
    cached_reads.verification_json(uow, fabric_name="ib-east")
    assert loads == ["ib-east", "ib-east"]  # nothing kept under the digest looked up

    monkeypatch.setattr(snapshot_log, "newest_digest", real_newest_digest)
    cached_reads.verification_json(uow, fabric_name="ib-east")
    assert loads == ["ib-east", "ib-east"]  # kept under the digest it was computed from


# --- fresh after every change ------------------------------------------------------------------


def grant_globex(uow: UnitOfWork, onboarded: Onboarded) -> None:
    shared_services.grant_service(
        uow, tenant_name="globex", spec=GrantCreate(fabric="ib-east", service="storage")
    )


def revoke_acmes_grant(uow: UnitOfWork, onboarded: Onboarded) -> None:
    grant_id = onboarded.grant_ids["acme"]
    shared_services.revoke_grant(uow, tenant_name="acme", grant_id=grant_id)


def allocate_a_free_node(uow: UnitOfWork, onboarded: Onboarded) -> None:
    spec = AllocationCreate(fabric="ib-east", nodes=[FREE_COMPUTE_NODES[0]])
    allocations.allocate(uow, tenant_name="research", spec=spec)


def release_an_allocation(uow: UnitOfWork, onboarded: Onboarded) -> None:
    allocation_id = onboarded.allocation_ids["globex"]
    allocations.release_allocation(uow, tenant_name="globex", allocation_id=allocation_id)


def offboard_a_tenant(uow: UnitOfWork, onboarded: Onboarded) -> None:
    tenants.offboard_tenant(uow, name="acme")


def create_a_qos_class(uow: UnitOfWork, onboarded: Onboarded) -> None:
    spec = QosClassCreate(
        name="platinum", ib_sl=5, vlarb_weight=200, roce_dscp=40, roce_tc=5, ets_weight=10
    )
    tenants.create_qos_class(uow, spec=spec)


def import_a_changed_topology(uow: UnitOfWork, onboarded: Onboarded) -> None:
    text = without_hosts(example_topology(), [FREE_COMPUTE_NODES[1]])
    topology.import_topology(uow, fabric_name="ib-east", text=text)


def change_a_nodes_role(uow: UnitOfWork, onboarded: Onboarded) -> None:
    patch = NodePatch(role="storage")
    nodes.set_node_role(uow, fabric_name="ib-east", node_name=FREE_COMPUTE_NODES[0], patch=patch)


CHANGES: list[Callable[[UnitOfWork, Onboarded], None]] = [
    grant_globex,
    revoke_acmes_grant,
    allocate_a_free_node,
    release_an_allocation,
    offboard_a_tenant,
    create_a_qos_class,
    import_a_changed_topology,
    change_a_nodes_role,
]


@pytest.mark.parametrize("change", CHANGES, ids=[c.__name__ for c in CHANGES])
def test_every_change_is_served_fresh_at_once(uow, onboarded, change):
    before = cached(uow)

    change(uow, onboarded)

    after = cached(uow)
    assert after == reference(uow)
    assert after["verification"] != before["verification"]


def test_a_new_qos_class_is_served_in_the_opensm_files_at_once(uow, onboarded):
    before = cached(uow)

    create_a_qos_class(uow, onboarded)

    after = cached(uow)
    # VL arbitration weighs every class, used or not (qos-policy.conf lists the used ones).
    assert after["opensm/opensm.conf"] != before["opensm/opensm.conf"]
    assert after["opensm/opensm.conf"] == reference(uow)["opensm/opensm.conf"]


def test_a_rotated_opensm_secret_is_served_at_once(uow, onboarded, loads):
    before = cached(uow)
    secret = uow.settings.opensm_secret_path
    assert isinstance(secret, Path)

    secret.unlink()
    key_store.write_private_file(secret, key_store.new_opensm_secret())

    after = cached(uow)
    assert after == reference(uow)
    assert after["opensm/opensm.conf"] != before["opensm/opensm.conf"]
    assert after["verification"] == before["verification"]  # the state did not change


def test_keys_set_in_the_settings_are_served_with_the_same_cache(uow, onboarded):
    before = cached(uow)
    keys = {"opensm_m_key": 0x8000_0000_0000_0001, "opensm_sm_key": 0x22, "opensm_sa_key": 0x33}
    configured = dataclasses.replace(uow, settings=dataclasses.replace(uow.settings, **keys))

    after = cached(configured)

    assert after == reference(configured)
    assert "m_key 0x8000000000000001" in after["opensm/opensm.conf"].decode()
    assert cached(uow) == before


# --- never for a state that does not verify ----------------------------------------------------


def test_a_state_that_does_not_verify_renders_nothing_and_keeps_no_artifacts(
    uow, onboarded, loads, monkeypatch
):
    broken = Verdict(holds=False, snapshot_digest="v2:00", counterexamples=(), reachability=())
    monkeypatch.setattr(cached_reads, "verify_snapshot", lambda snapshot: broken)

    for _ in range(2):
        with pytest.raises(IsolationViolationError, match="refusing to render"):
            cached_reads.get_artifact(uow, fabric_name="ib-east", path="opensm/partitions.conf")

    assert loads == ["ib-east", "ib-east"]
    body = cached_reads.verification_json(uow, fabric_name="ib-east").content
    assert body.startswith(b'{"holds":false')  # the verdict itself is the state's answer
    assert loads == ["ib-east", "ib-east"]
