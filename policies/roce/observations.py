"""Compare a RoCE leaf's observed state (``isofabric collect roce``) with the fabric's intent.

The intended state of a leaf is what isofabric renders for it (`render_config_db`,
`render_frr_conf`), read into the same shape as the observation (policies/roce/observed.py).
Drift items name what differs, each with the port's host and owner where there is one:

* ``vlan-member-unexpected`` / ``vlan-member-missing``: a port in a VLAN the model does not
  give it, or missing from its VLAN. Host ports are compared on every VLAN; other ports (an
  uplink, a port without a host) on tenant VLANs only (the fabric's VLAN range, or a segment's);
* ``vrf-unexpected`` / ``vrf-missing`` / ``vrf-vni``, ``tunnel-map-unexpected`` /
  ``tunnel-map-missing``, on tenant VRFs (``Vrf<n>`` or a VNI in the L3VNI range) and tunnel
  maps (a VNI or VLAN in the fabric's ranges): whatever else is the operator's (the
  "foreign" keys of policies/roce/ownership.py);
* ``port-qos``: a port whose PORT_QOS_MAP binding differs (a bronze host marking itself gold);
* FRR, when observed: ``route-target-leak`` (a VRF imports a route target the model does not
  give it), ``route-target-import-missing``, ``frr-vrf-unexpected`` / ``frr-vrf-missing``,
  ``vni-route-targets`` (a VNI with other RTs), ``vni-unexpected`` and ``vni-missing``. bgpd
  lists an L3VNI only once zebra has its VRF device, so a missing L3VNI is not drift;
* ``draining-port-in-tenant-vlan``: a released host that is still draining has a port in a
  tenant VLAN: its old owner's segment still reaches it, so it may not be reused yet.

The isolation violations the observed state allows are the config audit's to find
(`policies.config_audit.observed_counterexamples`, one layer up: the audits judge both
technologies). It is pure (no I/O).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

from policies.model import Owner
from policies.roce.model import RoceSnapshot
from policies.roce.observed import (
    EvpnVni,
    FrrState,
    LeafState,
    TunnelMap,
    intended_frr_state,
    leaf_state,
    vlan_id,
    vrf_number,
)
from policies.roce.render_sonic import render_config_db


@dataclass(frozen=True, slots=True)
class LeafDrift:
    """One difference between a leaf's observed and intended state.

    `subject` names what differs (a port, VRF, ``<tunnel>|<map>`` or VNI); `expected` and
    `observed` are the intended and the observed values of it (sorted); `node` and `owner`
    are the host on the port and who holds it, where there is one.
    """

    code: str
    subject: str
    expected: tuple[str, ...]
    observed: tuple[str, ...]
    message: str
    node: str | None = None
    owner: Owner | None = None


class _Leaf:
    """The fabric's tenant ranges, and the host and owner of each host port of one leaf."""

    def __init__(self, snapshot: RoceSnapshot, leaf: str) -> None:
        fabric = snapshot.fabric
        owners = {n.name: n.owners for n in snapshot.nodes}
        self.port_node = {nic.port: nic.node for nic in snapshot.nics if nic.switch == leaf}
        self.port_owner = {
            port: (owners.get(node) or (None,))[0] for port, node in self.port_node.items()
        }
        # A segment keeps its IDs when the fabric's ranges shrink later: they stay tenant IDs.
        self.segment_vlans = {v for s in snapshot.segments for v in (s.vlan, s.l3vni_vlan)}
        self.segment_vnis = {v for s in snapshot.segments for v in (s.l2vni, s.l3vni)}
        self.vlans = range(fabric.vlan_first, fabric.vlan_last + 1)
        self.l2vnis = range(fabric.l2vni_first, fabric.l2vni_last + 1)
        self.l3vnis = range(fabric.l3vni_first, fabric.l3vni_last + 1)

    def tenant_vlan(self, name: str) -> bool:
        """``Vlan<n>`` with n in the VLAN range or a segment's VLAN."""
        vlan = vlan_id(name)
        return vlan in self.vlans or vlan in self.segment_vlans

    def tenant_vni(self, vni: int | None) -> bool:
        """A VNI of the L2VNI or L3VNI range, or a segment's."""
        return vni in self.l2vnis or vni in self.l3vnis or vni in self.segment_vnis

    def tenant_vrf(self, name: str, vni: int | None) -> bool:
        """``Vrf<n>`` with n in the L3VNI range (isofabric's names), or a VRF with such a VNI."""
        return vrf_number(name) in self.l3vnis or vni in self.l3vnis

    def tenant_map(self, entry: TunnelMap) -> bool:
        """A tunnel map of a tenant VNI or VLAN."""
        return self.tenant_vni(entry.vni) or self.tenant_vlan(entry.vlan)

    def drift(
        self, code: str, subject: str, want: Collection[str], have: Collection[str], text: str
    ) -> LeafDrift:
        """A drift item on `subject`, with its host and owner when it is a host port."""
        node = self.port_node.get(subject)
        owner = self.port_owner.get(subject)
        return LeafDrift(code, subject, _sorted(want), _sorted(have), text, node, owner)


def _sorted(items: Collection[str]) -> tuple[str, ...]:
    return tuple(sorted(items, key=lambda item: (len(item), item)))


def compare_leaf(
    intended: RoceSnapshot,
    leaf: str,
    observed: LeafState,
    frr: FrrState | None = None,
    draining: Collection[str] = frozenset(),
) -> tuple[LeafDrift, ...]:
    """Drift of leaf `leaf`'s observed CONFIG_DB (and FRR) state from intent, in that order.

    `frr` None: FRR was not observed, nothing of it is compared. `draining`: names of the
    fabric's draining nodes (released, their old owner's segment maybe still deployed).

    Raises:
        NotFoundError, InvalidValueError, ArtifactHazardError: the leaf cannot be rendered
            (not a leaf with a VTEP of the snapshot, ...), as `render_config_db` raises.
    """
    context = _Leaf(intended, leaf)
    want = leaf_state(render_config_db(intended, leaf))
    drift = [
        *_member_drift(context, want, observed),
        *_drain_findings(context, observed, draining),
        *_vrf_drift(context, want, observed),
        *_map_drift(context, want, observed),
        *_qos_drift(context, want, observed),
    ]
    if frr is not None:
        drift += _frr_drift(context, intended_frr_state(intended, leaf), frr)
    return tuple(drift)


def _member_drift(leaf: _Leaf, want: LeafState, have: LeafState) -> Iterator[LeafDrift]:
    ports = want.vlan_members.keys() | have.vlan_members.keys()
    for port in _sorted(ports):
        intended = want.vlan_members.get(port, frozenset())
        seen = have.vlan_members.get(port, frozenset())
        if port not in leaf.port_node:  # not a host port: tenant VLANs only
            seen = frozenset(v for v in seen if leaf.tenant_vlan(v))
        where = f"{port} ({leaf.port_node[port]})" if port in leaf.port_node else port
        if extra := seen - intended:
            vlans = ", ".join(_sorted(extra))
            message = f"{where} is a member of {vlans}, which the model does not give it"
            yield leaf.drift("vlan-member-unexpected", port, intended, seen, message)
        if lacking := intended - seen:
            message = f"{where} is missing from {', '.join(_sorted(lacking))}"
            yield leaf.drift("vlan-member-missing", port, intended, seen, message)


def _drain_findings(leaf: _Leaf, have: LeafState, draining: Collection[str]) -> Iterator[LeafDrift]:
    for port, node in sorted(leaf.port_node.items()):
        vlans = [v for v in have.vlan_members.get(port, ()) if leaf.tenant_vlan(v)]
        if node in draining and vlans:
            message = (
                f"{node} is draining but its port {port} is still in {', '.join(sorted(vlans))}:"
                " its previous owner's segment reaches it, it may not be reused yet"
            )
            yield LeafDrift("draining-port-in-tenant-vlan", port, (), _sorted(vlans), message, node)


def _vrf_drift(leaf: _Leaf, want: LeafState, have: LeafState) -> Iterator[LeafDrift]:
    seen = {name: vni for name, vni in have.vrfs.items() if leaf.tenant_vrf(name, vni)}
    for name in _sorted(want.vrfs.keys() | seen.keys()):
        intended, found = _vni_text(want.vrfs, name), _vni_text(seen, name)
        if name not in seen:
            yield leaf.drift("vrf-missing", name, intended, (), f"{name} is missing")
        elif name not in want.vrfs:
            yield leaf.drift("vrf-unexpected", name, (), found, f"{name} is not in the model")
        elif intended != found:
            message = f"{name} has VNI {', '.join(found) or 'none'}, the model {intended[0]}"
            yield leaf.drift("vrf-vni", name, intended, found, message)


def _vni_text(vrfs: Mapping[str, int | None], name: str) -> tuple[str, ...]:
    vni = vrfs.get(name)
    return (str(vni),) if vni is not None else ()


def _map_drift(leaf: _Leaf, want: LeafState, have: LeafState) -> Iterator[LeafDrift]:
    seen = {m for m in have.tunnel_maps if leaf.tenant_map(m)}
    for code, maps, verb in (
        ("tunnel-map-unexpected", seen - want.tunnel_maps, "is not in the model"),
        ("tunnel-map-missing", want.tunnel_maps - seen, "is missing"),
    ):
        for entry in sorted(maps):
            text = (f"{entry.vni} -> {entry.vlan}",)
            subject = f"{entry.tunnel}|{entry.name}"
            expected, observed = ((), text) if code.endswith("unexpected") else (text, ())
            yield leaf.drift(code, subject, expected, observed, f"tunnel map {subject} {verb}")


def _qos_drift(leaf: _Leaf, want: LeafState, have: LeafState) -> Iterator[LeafDrift]:
    ports = (want.port_qos.keys() | leaf.port_node.keys()) - {"global"}
    for port in _sorted(ports):
        intended = _fields(want.port_qos.get(port, {}))
        seen = _fields(have.port_qos.get(port, {}))
        if intended != seen:
            message = f"PORT_QOS_MAP of {port} differs: {', '.join(_sorted(seen - intended))}"
            yield leaf.drift("port-qos", port, intended, seen, message)


def _fields(fields: Mapping[str, str]) -> frozenset[str]:
    return frozenset(f"{field}={value}" for field, value in fields.items())


def _frr_drift(leaf: _Leaf, want: FrrState, have: FrrState) -> list[LeafDrift]:
    drift = list(_import_drift(leaf, want, have))
    for vni in sorted(want.vnis.keys() | set(filter(leaf.tenant_vni, have.vnis))):
        intended, seen = want.vnis.get(vni), have.vnis.get(vni)
        subject = str(vni)
        if seen is None:
            if intended is not None and intended.kind == "L2":  # see the module docstring
                drift.append(leaf.drift("vni-missing", subject, (), (), f"VNI {vni} is missing"))
        elif intended is None:
            drift.append(leaf.drift("vni-unexpected", subject, (), (), f"bgpd has VNI {vni}"))
        elif (intended.imports, intended.exports) != (seen.imports, seen.exports):
            expected, observed = _targets(intended), _targets(seen)
            message = f"VNI {vni} has other route targets than the model"
            drift.append(leaf.drift("vni-route-targets", subject, expected, observed, message))
    return drift


def _targets(vni: EvpnVni) -> tuple[str, ...]:
    imports = (f"import {rt}" for rt in sorted(vni.imports))
    return (*imports, *(f"export {rt}" for rt in sorted(vni.exports)))


def _import_drift(leaf: _Leaf, want: FrrState, have: FrrState) -> Iterator[LeafDrift]:
    seen = {vrf: rts for vrf, rts in have.vrf_imports.items() if leaf.tenant_vrf(vrf, None)}
    for vrf in _sorted(want.vrf_imports.keys() | seen.keys()):
        intended, found = want.vrf_imports.get(vrf), seen.get(vrf)
        if found is None:
            yield leaf.drift("frr-vrf-missing", vrf, intended or (), (), f"FRR lacks {vrf}")
        elif intended is None:
            message = f"FRR has {vrf}, which the model does not have on this leaf"
            yield leaf.drift("frr-vrf-unexpected", vrf, (), found, message)
        else:
            if leaks := found - intended:
                message = f"{vrf} imports {', '.join(sorted(leaks))}, which the model does not"
                yield leaf.drift("route-target-leak", vrf, intended, found, message)
            if lacking := intended - found:
                message = f"{vrf} does not import {', '.join(sorted(lacking))}"
                yield leaf.drift("route-target-import-missing", vrf, intended, found, message)
