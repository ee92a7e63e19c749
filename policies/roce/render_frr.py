"""Render a RoCE leaf's FRR ``frr.conf``: L3VNI VRFs, the EVPN underlay session and tenant VRFs.

One file per leaf, a pure function of the snapshot (byte-identical for the same state) that carries
no snapshot digest, so a change on another leaf leaves it byte-identical. It holds
what isolation depends on, all explicit (docs/facts/roce.md §4, §7):

* zebra ``vrf Vrf<l3vni>`` / ``vni <l3vni>`` only for segments with host ports on the leaf;
* the default BGP instance: BGP unnumbered to the spines (peer-group FABRIC), the loopback and
  VTEP /32s, ``advertise-all-vni`` and one ``vni`` block per L2VNI with an explicit RD and RTs;
* one BGP instance per VRF exporting its connected subnet as EVPN type-5 routes with an explicit
  RD, its own RT, and one extra ``route-target import`` per grant or allowed peering (the
  audited route leaks).

Route targets are type 0 ``rt_asn:VNI`` and identical on every leaf: with an eBGP underlay and
per-leaf ASNs, FRR's automatic RTs (``ASN:VNI``) differ per leaf and manual RTs switch the auto RT
off for that VNI (frr#10027), so every RT is written out. RDs are type 1: ``<loopback>:<rd_index>``
for the IP-VRF and ``<vtep>:<rd_index>`` for the L2VNI's MAC-VRF, so that both are unique on the
device (RFC 7432 §7.9). FRR's auto RDs (``router-id:<internal index>``) could collide with them,
and bgpd ignores a configured ``rd`` equal to the RD in use ("If same as existing value, there is
nothing more to do", ``bgp_evpn_vrf_rd`` in FRR ``bgpd/bgp_evpn_vty.c``): the RD then stays
automatic and never shows in the running config. So each VRF instance's router-id is the VTEP
address (its auto RD is ``<vtep>:<index>``, never the configured ``<loopback>:<rd_index>``); the
default instance's is the loopback (the L2VNIs' auto RDs ``<loopback>:<index>`` never equal
``<vtep>:<rd_index>``, as the VTEP and the loopback differ).

Every line but the comments is one FRR 8.4 writes back in ``show running-config`` under ``frr
defaults datacenter`` (``hostname`` is the system's host name there, the leaf's name on a switch),
so that ``frr-reload.py`` (which diffs this file against the running config, comments ignored,
and sends the difference through vtysh) finds no delta after a reload. A line the running config
never shows is re-sent on every reload, as a context snippet without ``exit``, so the commands
sent after it land in the wrong node (so does a configured RD that bgpd ignores, above).
``no bgp ebgp-requires-policy`` was one: it is the datacenter default (FRR ``bgpd/bgp_vty.c``:
``FRR_CFG_DEFAULT_BOOL(BGP_EBGP_REQUIRES_POLICY, { .val_bool = false, .match_profile =
"datacenter" }, ...)``), so it is never shown; frr-reload re-sent it, a new VRF's ``vrf VrfN``
that followed was read inside ``router bgp`` as ``vrf-policy VrfN`` and its ``vni N`` at the
top level. tests/conformance/test_frr_reload.py reloads rendered files into running
daemons and requires no delta. A reload that adds a VRF while it adds an RT import to an
existing one still needs a first step that creates the new VRFs alone
(`policies.roce.frr_running.with_new_vrfs`).

On SONiC this file is what FRR loads only with ``docker_routing_config_mode`` ``split-unified``:
in ``split`` mode docker-fpm-frr's ``docker_init.sh`` deletes ``/etc/frr/frr.conf`` and the
daemons read per-daemon files; in ``split-unified`` it appends ``no fpm use-next-hop-groups`` and
``fpm address 127.0.0.1`` when missing and writes ``service integrated-vtysh-config`` to
vtysh.conf (so that line is not repeated here).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from policies.errors import ArtifactHazardError, InvalidValueError, NotFoundError
from policies.findings import Severity
from policies.model import Grant, Owner
from policies.policy_rules import allowed_peerings
from policies.roce.model import RoceSnapshot, Switch, SwitchRole, VrfSegment, route_target
from policies.roce.parse_frr import MAX_VNI, MAX_VRF_NAME, parse_frr_conf, rd_rt_type

_RD_INDEX_LIMIT = 2**16  # type-1 RD: IPv4 administrator, 16-bit assigned number
_ASN2_LIMIT = 2**16  # type-0 RT: 2-byte ASN administrator
PEER_GROUP = "FABRIC"


@dataclass(frozen=True, slots=True)
class _LeafVrf:
    """One segment as this leaf renders it: RDs, own RTs and the granted imports."""

    segment: VrfSegment
    rd: str
    l2_rd: str
    rt: str
    l2_rt: str
    leaks: tuple[tuple[str, str], ...]  # (route target, the grant that allows it)


def render_frr_conf(snapshot: RoceSnapshot, leaf: str) -> str:
    """Render the frr.conf of leaf `leaf`.

    Contract: deterministic text; VRFs and VRF BGP instances sorted by L3VNI, L2VNI blocks by
    L2VNI, all present only for segments with a host port on the leaf (a NIC of a node the
    segment's owner holds); every RD is type 1 and unique in the file; every RT is type 0
    ``rt_asn:VNI``; a VRF imports only its own RT plus the RTs of the segments a grant or an
    accepted peering the policy allows pairs it with. The text is parsed back with
    `parse_frr_conf` before it is returned.

    Raises:
        NotFoundError: if no switch is named `leaf`.
        InvalidValueError: if `leaf` is a spine or has no VTEP, or a VNI, VRF name, RD or RT is out
            of range, VNIs or RDs collide, or a segment imports an RT no grant or peering backs.
        ArtifactHazardError: if the rendered text has an error finding (an engine defect).
    """
    switch = _leaf(snapshot, leaf)
    _check_unique_vnis(snapshot.segments)
    vrfs = tuple(_leaf_vrf(snapshot, switch, s) for s in _segments_on(snapshot, leaf))
    _check_unique_rds(vrfs, leaf)
    lines = [
        *_header(snapshot, switch),
        *_zebra_vrfs(vrfs),
        *_default_instance(switch, _fabric_ports(snapshot, leaf), vrfs),
    ]
    for vrf in vrfs:
        lines += _vrf_instance(switch, vrf)
    text = "\n".join([*lines, "end"]) + "\n"
    _refuse_hazards(text, leaf)
    return text


def _leaf(snapshot: RoceSnapshot, name: str) -> Switch:
    switch = next((s for s in snapshot.switches if s.name == name), None)
    if switch is None:
        raise NotFoundError(f"switch {name!r} is not in fabric {snapshot.fabric.name}")
    if switch.role is not SwitchRole.LEAF or switch.vtep is None:
        raise InvalidValueError(f"{name} is not a leaf with a VTEP: only leaves get EVPN frr.conf")
    if not 0 < switch.asn < 2**32:
        raise InvalidValueError(f"{name}: ASN {switch.asn} is not in 1..4294967295")
    return switch


def _segments_on(snapshot: RoceSnapshot, leaf: str) -> list[VrfSegment]:
    """Segments whose owner holds a node with a NIC on `leaf`, sorted by L3VNI."""
    owners_of = {n.name: n.owners for n in snapshot.nodes}
    present: set[Owner] = set()
    for nic in snapshot.nics:
        if nic.switch == leaf:
            present.update(owners_of.get(nic.node, ()))
    return sorted((s for s in snapshot.segments if s.owner in present), key=lambda s: s.l3vni)


def _fabric_ports(snapshot: RoceSnapshot, leaf: str) -> list[str]:
    ports = {link.a_port for link in snapshot.links if link.a_switch == leaf}
    ports |= {link.b_port for link in snapshot.links if link.b_switch == leaf}
    return sorted(ports, key=_port_order)


def _port_order(name: str) -> tuple[str, int]:
    """``Ethernet8`` before ``Ethernet16``: by prefix, then by number."""
    stem = name.rstrip("0123456789")
    return (stem, int(name[len(stem) :] or 0))


def _leaf_vrf(snapshot: RoceSnapshot, switch: Switch, segment: VrfSegment) -> _LeafVrf:
    _check_segment(segment)
    rt_asn = snapshot.fabric.rt_asn
    if not 0 < rt_asn < _ASN2_LIMIT:
        raise InvalidValueError(f"rt_asn {rt_asn} is not a 2-byte ASN (type-0 RT)")
    return _LeafVrf(
        segment=segment,
        rd=_rd(switch.loopback, segment),
        l2_rd=_rd(switch.vtep, segment),
        rt=_rt(route_target(rt_asn, segment.l3vni)),
        l2_rt=_rt(route_target(rt_asn, segment.l2vni)),
        leaks=_leaks(snapshot, segment),
    )


def _check_segment(segment: VrfSegment) -> None:
    for what, vni in (("L3VNI", segment.l3vni), ("L2VNI", segment.l2vni)):
        if not 1 <= vni <= MAX_VNI:
            raise InvalidValueError(f"{segment.owner}: {what} {vni} is not in 1..{MAX_VNI}")
    if segment.vrf != f"Vrf{segment.l3vni}" or len(segment.vrf) > MAX_VRF_NAME:
        raise InvalidValueError(f"{segment.owner}: VRF {segment.vrf!r} must be Vrf{segment.l3vni}")
    if not 0 <= segment.rd_index < _RD_INDEX_LIMIT:
        raise InvalidValueError(
            f"{segment.owner}: rd_index {segment.rd_index} does not fit 16 bits"
        )


def _check_unique_vnis(segments: tuple[VrfSegment, ...]) -> None:
    # RTs are rt_asn:VNI for L2 and L3 VNIs alike: a VNI used twice would share an RT (a leak).
    uses = Counter(vni for s in segments for vni in (s.l3vni, s.l2vni))
    duplicates = sorted(vni for vni, count in uses.items() if count > 1)
    if duplicates:
        raise InvalidValueError(f"VNI {', '.join(map(str, duplicates))} is used more than once")


def _rd(address: object, segment: VrfSegment) -> str:
    rd = f"{address}:{segment.rd_index}"
    if rd_rt_type(rd) != "type1":
        raise InvalidValueError(f"{segment.owner}: RD {rd!r} is not a type-1 IPv4:NN16 RD")
    return rd


def _rt(rt: str) -> str:
    if rd_rt_type(rt) != "type0":
        raise InvalidValueError(f"route target {rt!r} is not a type-0 ASN2:NN32 RT")
    return rt


def _leaks(snapshot: RoceSnapshot, segment: VrfSegment) -> tuple[tuple[str, str], ...]:
    """Each extra import of `segment` with the grant that allows it, sorted by RT."""
    allowed = _granted_imports(snapshot, segment.owner)
    own = route_target(snapshot.fabric.rt_asn, segment.l3vni)
    leaks = []
    for rt in sorted(set(segment.imports) - {own}):
        if rt not in allowed:
            raise InvalidValueError(
                f"{segment.vrf} ({segment.owner}) imports {rt}: no grant or peering"
            )
        leaks.append((_rt(rt), allowed[rt]))
    return tuple(leaks)


def _granted_imports(snapshot: RoceSnapshot, owner: Owner) -> dict[str, str]:
    """RT -> grant label for every segment a grant pairs with `owner` (both directions)."""
    return _granted_imports_by_owner(snapshot).get(owner, {})


# One entry per snapshot being rendered: every leaf of a fabric asks for the same map.
_GRANT_CACHE: dict[int, tuple[RoceSnapshot, dict[Owner, dict[str, str]]]] = {}


def _granted_imports_by_owner(snapshot: RoceSnapshot) -> dict[Owner, dict[str, str]]:
    cached = _GRANT_CACHE.get(id(snapshot))
    if cached is not None and cached[0] is snapshot:
        return cached[1]
    by_owner = {s.owner: s for s in snapshot.segments}
    allowed: dict[Owner, dict[str, str]] = {}
    for pair, label in _import_pairs(snapshot):
        for owner, peer in (pair, pair[::-1]):
            if peer in by_owner:
                rt = route_target(snapshot.fabric.rt_asn, by_owner[peer].l3vni)
                allowed.setdefault(owner, {}).setdefault(rt, label)
    _GRANT_CACHE.clear()
    _GRANT_CACHE[id(snapshot)] = (snapshot, allowed)
    return allowed


def _import_pairs(snapshot: RoceSnapshot) -> Iterator[tuple[tuple[Owner, Owner], str]]:
    """The owner pairs whose VRFs import each other's RT: grants, then allowed peerings."""
    for grant in sorted(snapshot.grants, key=lambda g: (g.tenant, g.service)):
        yield (Owner.tenant(grant.tenant), Owner.service(grant.service)), _grant_label(grant)
    peerings = allowed_peerings(snapshot.policy, snapshot.tenants, snapshot.peerings)
    for peering in sorted(peerings):
        a, b = Owner.tenant(peering.a), Owner.tenant(peering.b)
        yield (a, b), f"peering {a} <-> {b}"


def _grant_label(grant: Grant) -> str:
    return f"grant {Owner.tenant(grant.tenant)} -> {Owner.service(grant.service)}"


def _check_unique_rds(vrfs: tuple[_LeafVrf, ...], leaf: str) -> None:
    # RFC 7432 §7.9: an RD is unique per MAC-VRF / IP-VRF per PE. Equal loopback and VTEP, or
    # equal rd_index on two segments, would make two VRFs of this leaf share one.
    rds = [rd for vrf in vrfs for rd in (vrf.rd, vrf.l2_rd)]
    duplicates = sorted({rd for rd in rds if rds.count(rd) > 1})
    if duplicates:
        raise InvalidValueError(f"{leaf}: RD {', '.join(duplicates)} would be used twice")


def _header(snapshot: RoceSnapshot, switch: Switch) -> list[str]:
    return [
        f"! frr.conf for {switch.name} of fabric {snapshot.fabric.name}, rendered by isofabric;"
        " do not edit.",
        "! SONiC: docker_routing_config_mode split-unified (frr.conf is removed in split mode).",
        "frr defaults datacenter",
        f"hostname {switch.name}",
        "!",
    ]


def _zebra_vrfs(vrfs: tuple[_LeafVrf, ...]) -> Iterator[str]:
    for vrf in vrfs:
        # zebra: the VRF's L3VNI; SONiC also needs VRF|vni and the L3VNI VLAN's tunnel map.
        yield from (f"vrf {vrf.segment.vrf}", f" vni {vrf.segment.l3vni}", "exit-vrf", "!")


def _default_instance(switch: Switch, ports: list[str], vrfs: tuple[_LeafVrf, ...]) -> list[str]:
    networks = sorted({f"{switch.loopback}/32", f"{switch.vtep}/32"})
    return [
        f"router bgp {switch.asn}",
        f" bgp router-id {switch.loopback}",
        " no bgp default ipv4-unicast",
        f" neighbor {PEER_GROUP} peer-group",
        f" neighbor {PEER_GROUP} remote-as external",
        *(f" neighbor {port} interface peer-group {PEER_GROUP}" for port in ports),
        " !",
        " address-family ipv4 unicast",
        f"  neighbor {PEER_GROUP} activate",
        *(f"  network {network}" for network in networks),
        " exit-address-family",
        " !",
        " address-family l2vpn evpn",
        f"  neighbor {PEER_GROUP} activate",
        # bgpd: per-VNI rd/route-target are rejected unless advertise-all-vni comes first.
        "  advertise-all-vni",
        *(line for vrf in sorted(vrfs, key=_l2vni) for line in _l2vni_block(vrf)),
        " exit-address-family",
        "exit",
        "!",
    ]


def _l2vni(vrf: _LeafVrf) -> int:
    return vrf.segment.l2vni


def _l2vni_block(vrf: _LeafVrf) -> list[str]:
    return [
        f"  vni {vrf.segment.l2vni}",
        f"   rd {vrf.l2_rd}",
        f"   route-target import {vrf.l2_rt}",
        f"   route-target export {vrf.l2_rt}",
        "  exit-vni",
    ]


def _vrf_instance(switch: Switch, vrf: _LeafVrf) -> list[str]:
    leaks = [
        line for rt, label in vrf.leaks for line in (f"  ! {label}", f"  route-target import {rt}")
    ]
    return [
        f"router bgp {switch.asn} vrf {vrf.segment.vrf}",
        f" ! {vrf.segment.owner}, L2VNI {vrf.segment.l2vni}, subnet {vrf.segment.subnet}",
        # Not the loopback: FRR's automatic RD of the VRF is <router-id>:<its index> and must
        # never equal the configured <loopback>:<rd_index> (module docstring).
        f" bgp router-id {switch.vtep}",
        " !",
        " address-family ipv4 unicast",
        "  redistribute connected",
        " exit-address-family",
        " !",
        " address-family l2vpn evpn",
        "  advertise ipv4 unicast",
        f"  rd {vrf.rd}",
        f"  route-target import {vrf.rt}",
        *leaks,
        f"  route-target export {vrf.rt}",
        " exit-address-family",
        "exit",
        "!",
    ]


def _refuse_hazards(text: str, leaf: str) -> None:
    errors = [f for f in parse_frr_conf(text).findings if f.severity is Severity.ERROR]
    if errors:
        first = errors[0]
        raise ArtifactHazardError(
            f"refusing to emit frr.conf for {leaf}: line {first.line}: {first.code}: "
            f"{first.message}"
        )
