"""RoCE segment identifiers: VNIs, VLANs, VRF names, RDs, route targets and subnets.

Each generator yields counterexamples for one rule family of `verify_roce` (docs/facts/roce.md §7).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from policies.roce.index import RoceIndex
from policies.roce.model import (
    MAX_VNI,
    RoceSettings,
    VrfSegment,
)
from policies.roce.settings import (
    MAX_RD_INDEX,
    MAX_VLAN,
    MAX_VRF_NAME,
    MIN_VLAN,
)
from policies.verdict import (
    Counterexample,
    Rule,
)

# One identifier a segment uses: (segment, label, value, the range it must lie in).
_Use = tuple[VrfSegment, str, int, range]


def _identifier_uses(settings: RoceSettings, segments: Iterable[VrfSegment]) -> Iterator[_Use]:
    l2vni = range(max(1, settings.l2vni_first), min(MAX_VNI, settings.l2vni_last) + 1)
    l3vni = range(max(1, settings.l3vni_first), min(MAX_VNI, settings.l3vni_last) + 1)
    vlan = range(max(MIN_VLAN, settings.vlan_first), min(MAX_VLAN, settings.vlan_last) + 1)
    for segment in segments:
        yield segment, "L3VNI", segment.l3vni, l3vni
        yield segment, "L2VNI", segment.l2vni, l2vni
        yield segment, "VLAN", segment.vlan, vlan
        yield segment, "L3VNI VLAN", segment.l3vni_vlan, vlan


def identifier_violations(index: RoceIndex) -> Iterator[Counterexample]:
    """Refute VNIs and VLANs that are out of range or used twice (VNIs across L2 and L3)."""
    # VNIs are unique fabric-wide across L2 and L3; VLAN IDs are fabric-wide
    # (docs/facts/roce.md §7).
    seen: dict[tuple[bool, int], tuple[VrfSegment, str]] = {}
    for segment, label, value, allowed in _identifier_uses(index.settings, index.snapshot.segments):
        is_vni = label.endswith("VNI")
        owner = index.endpoint(segment.owner)
        if value not in allowed:
            yield Counterexample(
                Rule.VNI_OUT_OF_RANGE if is_vni else Rule.VLAN_OUT_OF_RANGE,
                f"{label} {value} of {segment.owner} is outside {allowed.start}-{allowed.stop - 1}",
                segment.l3vni,
                owner,
            )
        first = seen.setdefault((is_vni, value), (segment, label))
        if first[0] is not segment or first[1] != label:
            yield Counterexample(
                Rule.VNI_DUPLICATE if is_vni else Rule.VLAN_DUPLICATE,
                f"{label} {value} of {segment.owner} is also the {first[1]} of {first[0].owner}",
                value if is_vni else segment.l3vni,
                index.endpoint(first[0].owner),
                owner,
            )


def vrf_violations(index: RoceIndex) -> Iterator[Counterexample]:
    """Refute VRFs not named ``Vrf<l3vni>`` (at most 15 characters) or holding two L3VNIs."""
    # SONiC: one VRF has one `vni` (its L3VNI); names match Vrf[a-zA-Z0-9_-]+, <= 15 characters.
    seen: dict[str, VrfSegment] = {}
    for segment in index.snapshot.segments:
        expected = f"Vrf{segment.l3vni}"
        if segment.vrf != expected or len(segment.vrf) > MAX_VRF_NAME:
            yield Counterexample(
                Rule.VRF_INVALID,
                f"VRF {segment.vrf!r} of {segment.owner} must be named {expected!r} "
                f"(at most {MAX_VRF_NAME} characters)",
                segment.l3vni,
                index.endpoint(segment.owner),
            )
        first = seen.setdefault(segment.vrf, segment)
        if first is not segment:
            yield Counterexample(
                Rule.VRF_INVALID,
                f"VRF {segment.vrf} would hold L3VNI {first.l3vni} of {first.owner} and "
                f"L3VNI {segment.l3vni} of {segment.owner}",
                segment.l3vni,
                index.endpoint(first.owner),
                index.endpoint(segment.owner),
            )


def rd_violations(index: RoceIndex) -> Iterator[Counterexample]:
    """Refute RD indexes outside 2 bytes or shared by two VRFs."""
    # Every leaf derives the RD <loopback>:<rd_index>, so one index per VRF fabric-wide keeps the
    # RD unique per VRF on each leaf (docs/facts/roce.md §7).
    seen: dict[int, VrfSegment] = {}
    for segment in index.snapshot.segments:
        if not 0 <= segment.rd_index <= MAX_RD_INDEX:
            yield Counterexample(
                Rule.RD_INVALID,
                f"RD index {segment.rd_index} of {segment.owner} is outside 0-{MAX_RD_INDEX}",
                segment.l3vni,
                index.endpoint(segment.owner),
            )
        first = seen.setdefault(segment.rd_index, segment)
        if first is not segment:
            yield Counterexample(
                Rule.RD_INVALID,
                f"RD index {segment.rd_index} of {segment.owner} is also used by {first.owner}",
                segment.l3vni,
                index.endpoint(first.owner),
                index.endpoint(segment.owner),
            )


def route_leaks(index: RoceIndex) -> Iterator[Counterexample]:
    """Refute imports of route targets that no segment of the fabric exports."""
    for segment in index.snapshot.segments:
        for rt in segment.imports:
            if rt not in index.by_rt:
                yield Counterexample(
                    Rule.ROUTE_LEAK,
                    f"{segment.vrf} of {segment.owner} imports route target {rt}, which no "
                    f"segment of the fabric exports",
                    segment.l3vni,
                    index.endpoint(segment.owner),
                )


def subnet_violations(index: RoceIndex) -> Iterator[Counterexample]:
    """Refute tenant subnets that overlap each other or lie outside the tenant pool."""
    # Sweep by start address, keeping the subnet that reaches furthest: O(n log n) overlap test.
    pool = index.settings.tenant_prefix_pool
    widest: VrfSegment | None = None
    for segment in sorted(
        index.snapshot.segments, key=lambda s: (s.subnet.network_address, s.subnet.prefixlen)
    ):
        subnet = segment.subnet
        if not subnet.subnet_of(pool):
            yield Counterexample(
                Rule.SUBNET_OUTSIDE_POOL,
                f"subnet {subnet} of {segment.owner} is outside the tenant pool {pool}",
                segment.l3vni,
                index.endpoint(segment.owner),
            )
        if widest is not None and subnet.network_address <= widest.subnet.broadcast_address:
            yield Counterexample(
                Rule.SUBNET_OVERLAP,
                f"subnet {subnet} of {segment.owner} overlaps {widest.subnet} of {widest.owner}",
                segment.l3vni,
                index.endpoint(widest.owner),
                index.endpoint(segment.owner),
            )
        if widest is None or subnet.broadcast_address > widest.subnet.broadcast_address:
            widest = segment
