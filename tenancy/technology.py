"""Where InfiniBand and RoCE differ in the system of record: one dispatch per concern.

Use cases do not test a fabric's kind themselves. They take the fabric's `Technology` and call
what differs (claiming and showing an owner's segment, which rows are ports, how a segment is
written, which topology documents the fabric takes, what rendering reads besides the snapshot,
what an accepted peering claims), or
hand a snapshot to `verify_snapshot` and `render_snapshot`. Adding a technology means adding one
entry to `_TECHNOLOGIES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sqlmodel import Session

from policies.artifacts import Artifact
from policies.errors import InvalidValueError
from policies.infiniband.model import format_pkey
from policies.infiniband.render import SubnetManagerKeys, render_opensm_artifacts
from policies.infiniband.verify import verify_isolation
from policies.model import FabricKind
from policies.roce.bundle import render_roce_artifacts
from policies.roce.model import RoceSnapshot
from policies.roce.verify import verify_roce
from policies.verdict import Verdict
from tenancy import models as m
from tenancy.record import vrf_segments as roce
from tenancy.record.pools import Pool, held_values, pkey_pool, take_pkey
from tenancy.record.snapshot import Snapshot
from tenancy.record.subnet_manager import subnet_manager_keys
from tenancy.schemas import RoceSegmentView, SegmentView
from tenancy.store.documents import JSON, YAML_TYPES
from tenancy.store.uow import Tx


class EnsureSegment(Protocol):
    """Claim the owner's segment on first use (all identifiers or none)."""

    def __call__(
        self, tx: Tx, fabric: m.Fabric, *, tenant_id: int | None, service_id: int | None
    ) -> SegmentView | RoceSegmentView:
        """Claim a segment for the owner (one of the two ids) unless it holds one already.

        Returns the owner's segment as `ViewSegment` shows it (without reading it again).

        Raises:
            PoolExhaustedError: a pool of the fabric has no free value left.
        """
        ...


class ViewSegment(Protocol):
    """The owner's segment on the fabric as the API shows it."""

    def __call__(
        self, session: Session, fabric: m.Fabric, *, tenant_id: int | None, service_id: int | None
    ) -> SegmentView | RoceSegmentView:
        """The segment of the owner (one of the two ids); an empty P_Key when it holds none."""
        ...


@dataclass(frozen=True, slots=True)
class RenderInputs:
    """What rendering reads besides the snapshot: settings and secrets, never in its digest.

    InfiniBand's OpenSM options file carries the subnet manager keys; RoCE reads nothing more.
    Whatever caches rendered files must key them on these too (tenancy/store/read_cache.py), so that
    rotating a key never serves a stale file: add a new input here, not inside a renderer.
    """

    subnet_manager_keys: SubnetManagerKeys | None = None


def _no_render_inputs(_tx: Tx, _fabric: m.Fabric) -> RenderInputs:
    return RenderInputs()


def _opensm_render_inputs(tx: Tx, fabric: m.Fabric) -> RenderInputs:
    return RenderInputs(subnet_manager_keys=subnet_manager_keys(fabric, tx.settings))


@dataclass(frozen=True, slots=True)
class Technology:
    """What one fabric technology does differently in the system of record."""

    kind: FabricKind
    title: str
    topology_types: frozenset[str]
    topology_wanted: str
    port_table: type[m.Port] | type[m.Nic]
    segment_label: Callable[[int], str]
    ensure_segment: EnsureSegment
    segment_view: ViewSegment
    render_inputs: Callable[[Tx, m.Fabric], RenderInputs]
    # The pool an accepted peering's own identifier comes from: a shared partition's P_Key on
    # InfiniBand; None on RoCE, where a peering imports route targets between existing VRFs.
    peering_pool: Callable[[m.Fabric], Pool] | None = None

    def accepts_topology(self, media_type: str) -> bool:
        """True when PUT .../topology with this media type fits the fabric."""
        return media_type in self.topology_types


def _ensure_partition(
    tx: Tx, fabric: m.Fabric, *, tenant_id: int | None, service_id: int | None
) -> SegmentView:
    owner = {"tenant_id": tenant_id, "service_id": service_id}
    pkey = held_values(tx.session, m.pk(fabric), **owner).get("pkey")
    if pkey is None:
        pkey = take_pkey(tx, fabric, **owner)
    return SegmentView(pkey=format_pkey(pkey))


def _partition_view(
    session: Session, fabric: m.Fabric, *, tenant_id: int | None, service_id: int | None
) -> SegmentView:
    held = held_values(session, m.pk(fabric), tenant_id=tenant_id, service_id=service_id)
    return SegmentView(pkey=format_pkey(held["pkey"]) if "pkey" in held else "")


def _ensure_vrf_segment(
    tx: Tx, fabric: m.Fabric, *, tenant_id: int | None, service_id: int | None
) -> SegmentView | RoceSegmentView:
    owner = {"tenant_id": tenant_id, "service_id": service_id}
    values = roce.owned_values(tx.session, fabric, **owner)
    if not roce.has_vrf_segment(values):
        values = roce.take_vrf_segment(tx, fabric, **owner)
    view = roce.vrf_segment_view(tx.session, fabric, values)
    return view if view is not None else SegmentView(pkey="")


def _vrf_segment_view(
    session: Session, fabric: m.Fabric, *, tenant_id: int | None, service_id: int | None
) -> SegmentView | RoceSegmentView:
    values = roce.owned_values(session, fabric, tenant_id=tenant_id, service_id=service_id)
    view = roce.vrf_segment_view(session, fabric, values)
    return view if view is not None else SegmentView(pkey="")


_TECHNOLOGIES = {
    FabricKind.INFINIBAND: Technology(
        kind=FabricKind.INFINIBAND,
        title="InfiniBand",
        topology_types=frozenset({"text/plain"}),
        topology_wanted="text/plain (ibnetdiscover output)",
        port_table=m.Port,
        segment_label=format_pkey,
        ensure_segment=_ensure_partition,
        segment_view=_partition_view,
        render_inputs=_opensm_render_inputs,
        peering_pool=pkey_pool,
    ),
    FabricKind.ROCE: Technology(
        kind=FabricKind.ROCE,
        title="RoCE",
        topology_types=frozenset({JSON, *YAML_TYPES}),
        topology_wanted="application/json or application/yaml (an inventory document)",
        port_table=m.Nic,
        segment_label=str,
        ensure_segment=_ensure_vrf_segment,
        segment_view=_vrf_segment_view,
        render_inputs=_no_render_inputs,
    ),
}


def technology_of(kind: str) -> Technology:
    """The technology of a fabric kind (``infiniband`` or ``roce``)."""
    return _TECHNOLOGIES[FabricKind(kind)]


def require_technology(fabric: m.Fabric, technology: FabricKind, why: str) -> None:
    """Refuse (422) a request that applies only to `technology`; `why` says what to do instead."""
    if fabric.kind != technology:
        title = technology_of(fabric.kind).title
        raise InvalidValueError(f"fabric '{fabric.name}' is {title}: {why}")


def verify_snapshot(snapshot: Snapshot, *, digest: str | None = None) -> Verdict:
    """Run the verifier of the snapshot's technology (`digest`: see `verify_isolation`)."""
    if isinstance(snapshot, RoceSnapshot):
        return verify_roce(snapshot, digest=digest)
    return verify_isolation(snapshot, digest=digest)


def render_inputs(tx: Tx, fabric: m.Fabric) -> RenderInputs:
    """What rendering `fabric` reads besides its snapshot (see `RenderInputs`).

    Raises:
        KeyUnavailableError: an InfiniBand key is not configured and the OpenSM secret is
            missing (503).
    """
    return technology_of(fabric.kind).render_inputs(tx, fabric)


def render_snapshot(tx: Tx, fabric: m.Fabric, snapshot: Snapshot) -> tuple[Artifact, ...]:
    """Render the artifacts of the snapshot's technology (OpenSM files, or SONiC and FRR)."""
    return render_with(snapshot, render_inputs(tx, fabric))


def render_with(snapshot: Snapshot, inputs: RenderInputs) -> tuple[Artifact, ...]:
    """Render the snapshot's artifacts from exactly `inputs` (`render_inputs` of its fabric)."""
    if isinstance(snapshot, RoceSnapshot):
        return render_roce_artifacts(snapshot)
    keys = inputs.subnet_manager_keys
    if keys is None:  # a caller bug: the inputs of a RoCE fabric handed with an IB snapshot
        raise TypeError(f"rendering fabric '{snapshot.fabric.name}' needs its OpenSM keys")
    return render_opensm_artifacts(snapshot, keys)
