"""Renderers for the files OpenSM consumes: partitions.conf, the QoS policy and an options file.

Every output is a pure function of the snapshot (byte-identical for the same state) and carries
no snapshot digest, so each file changes only when its own content does; it also avoids
each construct on which OpenSM fails open or silently changes meaning (docs/facts/infiniband.md
§1.6, §3.4, §8): explicit keys only, ``0x`` GUIDs one per line, an explicit ``Default`` statement,
no line over 4096 bytes, and ``any, pkey`` rather than ``ipoib, pkey`` in the QoS policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from policies.artifacts import Artifact
from policies.errors import ArtifactHazardError, InvalidValueError
from policies.findings import Severity
from policies.infiniband.model import IbSnapshot, Partition, QosClass, format_guid, format_pkey
from policies.infiniband.parse_partitions import MAX_LINE_BYTES, parse_partitions_conf

PARTITIONS_PATH = "opensm/partitions.conf"
QOS_POLICY_PATH = "opensm/qos-policy.conf"
OPTIONS_PATH = "opensm/opensm.conf"

# The default partition statement the engine always emits: CAs limited (so tenants cannot reach
# each other through it), switches full (so switch management ports keep SA paths), SM full.
DEFAULT_STATEMENT = "Default=0x7fff, ipoib : ALL=limited, ALL_SWITCHES=full, SELF=full ;"
# SL used for anything no partition rule matches: IPoIB on 0x7fff and management traffic.
DEFAULT_SL = 0
# OpenSM 3.3: max_op_vls 4 = VL0-VL7 (the VLCap of current HCAs and of ibsim); qos_max_vls is
# parsed but never used (docs/facts/infiniband.md §3.1).
MAX_OP_VLS = 4
DATA_VLS = 8
# VL0 carries the default SL; it keeps a share of the low-priority table even if no class uses it.
DEFAULT_VL0_WEIGHT = 16


@dataclass(frozen=True, slots=True)
class SubnetManagerKeys:
    """Management-key protection for OpenSM; values come from settings and are never logged."""

    m_key: int
    sm_key: int
    sa_key: int
    m_key_lease_period: int = 60

    def __post_init__(self) -> None:
        # OpenSM: m_key 0 disables M_Key protection; sm_key/sa_key 1 are the well-known defaults.
        if not 0 < self.m_key < 2**64:
            raise InvalidValueError("m_key must be a non-zero 64-bit value")
        for name in ("sm_key", "sa_key"):
            if getattr(self, name) in (0, 1) or getattr(self, name) >= 2**64:
                raise InvalidValueError(f"{name} must be a 64-bit value other than 0 and 1")

    def __repr__(self) -> str:
        return "SubnetManagerKeys(<redacted>)"


def render_opensm_artifacts(snapshot: IbSnapshot, keys: SubnetManagerKeys) -> tuple[Artifact, ...]:
    """Render the three OpenSM files for `snapshot`, sorted by path.

    Before anything is returned, partitions.conf is parsed back with OpenSM's grammar: a file
    that OpenSM would discard (falling back to every port full in 0x7fff) or misread is never
    emitted.

    Raises:
        InvalidValueError: if a rendered line would exceed OpenSM's line limit.
        ArtifactHazardError: if the rendered partitions.conf has a critical finding.
    """
    partitions = render_partitions_conf(snapshot)
    _refuse_hazards(partitions)
    files = {
        OPTIONS_PATH: render_opensm_options(snapshot, keys),
        PARTITIONS_PATH: partitions,
        QOS_POLICY_PATH: render_qos_policy(snapshot),
    }
    return tuple(Artifact(path, text.encode()) for path, text in sorted(files.items()))


def _refuse_hazards(partitions_conf: str) -> None:
    critical = [
        f
        for f in parse_partitions_conf(partitions_conf).findings
        if f.severity is Severity.CRITICAL
    ]
    if critical:
        first = critical[0]
        raise ArtifactHazardError(
            f"refusing to emit partitions.conf: line {first.line}: {first.code}: {first.message}"
        )


def _header(snapshot: IbSnapshot, what: str) -> list[str]:
    # No snapshot digest here: a file's bytes change only when its own content does, so a change
    # elsewhere in the fabric neither rewrites it nor makes an agent reinstall it and sweep. The
    # signed manifest binds each file's sha256 to the snapshot instead.
    return [f"# {what} for fabric {snapshot.fabric.name}, rendered by isofabric; do not edit."]


def render_partitions_conf(snapshot: IbSnapshot) -> str:
    """Render OpenSM's partitions.conf: the explicit default partition, then one statement per key.

    Contract: every statement has an explicit key, every member is one ``0x<guid>=full|limited``
    line, partitions without members are left out (OpenSM deletes them anyway), statements are
    sorted by key and members by GUID, and no line exceeds 4096 bytes.
    """
    qos = {q.name: q for q in snapshot.qos_classes}
    lines = _header(snapshot, "OpenSM partitions.conf")
    lines += [
        "# OpenSM falls back to 'Default=0x7fff : ALL=full' (every port reaches every port) if",
        "# this file fails to parse: check it with 'isofabric check-partitions' before installing.",
        DEFAULT_STATEMENT,
    ]
    for partition in sorted(snapshot.partitions, key=lambda p: p.pkey):
        if partition.members:
            lines += ["", *_partition_statement(partition, qos.get(partition.qos_class or ""))]
    return _checked("\n".join(lines) + "\n")


def _partition_statement(partition: Partition, qos: QosClass | None) -> Iterator[str]:
    # ``indx0`` is the one flag OpenSM matches exactly, not by prefix (docs/facts/infiniband.md
    # §1.1). Virtual GUIDs are ordinary member lines: NVIDIA's SM with virtualization applies
    # partitions.conf to vport GUIDs, even ones not present yet (docs/facts/infiniband.md §5).
    flags = ["ipoib"] if partition.ipoib else []
    if partition.index0:
        flags.append("indx0")
    if qos is not None:
        flags += [f"mtu={qos.ib_mtu}", f"rate={qos.ib_rate}", f"sl={qos.ib_sl}"]
    yield f"{partition.name}={format_pkey(partition.pkey)}{''.join(', ' + f for f in flags)} :"
    members = sorted(partition.members)
    for position, member in enumerate(members, start=1):
        end = " ;" if position == len(members) else ","
        yield f"    {format_guid(member.guid)}={'full' if member.full else 'limited'}{end}"


def _checked(text: str) -> str:
    for number, line in enumerate(text.split("\n"), start=1):
        if len(line.encode()) + 1 > MAX_LINE_BYTES:  # +1: fgets counts the newline
            raise InvalidValueError(f"rendered line {number} exceeds {MAX_LINE_BYTES} bytes")
    return text


def render_qos_policy(snapshot: IbSnapshot) -> str:
    """Render an OpenSM QoS policy file with a `qos-ulps` section.

    Contract: ``default : <SL>`` plus one ``any, pkey 0x....  : <SL>`` line per partition that has
    a QoS class. Never ``ipoib, pkey``: OpenSM drops the whole policy when such a partition has
    fewer than two full members (docs/facts/infiniband.md §3.4).
    """
    qos = {q.name: q for q in snapshot.qos_classes}
    lines = [*_header(snapshot, "OpenSM QoS policy"), "qos-ulps", f"    default : {DEFAULT_SL}"]
    for partition in sorted(snapshot.partitions, key=lambda p: p.pkey):
        cls = qos.get(partition.qos_class or "")
        if cls is not None and partition.members:
            lines.append(f"    any, pkey {format_pkey(partition.pkey)} : {cls.ib_sl}")
    lines.append("end-qos-ulps")
    return "\n".join(lines) + "\n"


def sl_to_vl(sl: int) -> int:
    """The VL an SL rides on: the identity on VL0-7, SL8-15 folded onto the same eight VLs."""
    return sl % DATA_VLS


def render_opensm_options(snapshot: IbSnapshot, keys: SubnetManagerKeys) -> str:
    """Render an OpenSM options file (``opensm -F``): QoS tables, enforcement and key protection.

    Contract: ``qos TRUE``, ``max_op_vls``, ``qos_sl2vl``, ``qos_vlarb_high/low`` derived from the
    classes' weights, ``part_enforce both``, a non-zero ``m_key`` with protection level 2 and a
    lease period, non-default ``sm_key`` / ``sa_key``, ``force_log_flush TRUE``, and
    ``virt_enabled 2`` when the fabric's SM enforces virtual GUIDs' memberships.
    """
    lines = [
        *_header(snapshot, "OpenSM options (opensm -F)"),
        "# This file holds the subnet's management keys: store it like a secret.",
        "qos TRUE",
        f"max_op_vls {MAX_OP_VLS}",
        "qos_sl2vl " + ",".join(str(sl_to_vl(sl)) for sl in range(16)),
        "# No class claims strict priority: every data VL is served by weight in the low table.",
        "qos_high_limit 0",
        "qos_vlarb_high 0:0",
        "qos_vlarb_low " + _vlarb_low(snapshot.qos_classes),
        "part_enforce both",
        "allow_both_pkeys FALSE",
        f"m_key 0x{keys.m_key:016x}",
        "m_key_protection_level 2",
        f"m_key_lease_period {keys.m_key_lease_period}",
        f"sm_key 0x{keys.sm_key:016x}",
        f"sa_key 0x{keys.sa_key:016x}",
        # OpenSM buffers its log otherwise, and a deploy agent waits for "SUBNET UP" in it.
        # Reloaded on SIGHUP: can_update is 1 in opt_tbl (opensm/osm_subnet.c, OpenSM 3.3.23:
        # { "force_log_flush", ..., opts_setup_force_log_flush, 1 }).
        "force_log_flush TRUE",
    ]
    if snapshot.fabric.virtual_guids:
        # NVIDIA's SM (MLNX_OFED, DOCA): virt_enabled 0 ignores, 1 disables and 2 enables
        # virtualization on the ports that support it; upstream OpenSM has no such option.
        # Source: the "NVIDIA SM" page of the DOCA documentation
        # (https://docs.nvidia.com/doca/archive/2-9-3/NVIDIA+SM); docs/facts/infiniband.md §5.
        lines.append("virt_enabled 2")
    return "\n".join(lines) + "\n"


def _vlarb_low(classes: Iterable[QosClass]) -> str:
    weights: dict[int, int] = {}
    for cls in classes:
        vl = sl_to_vl(cls.ib_sl)
        weights[vl] = max(cls.vlarb_weight, weights.get(vl, 0))  # classes sharing a VL share it
    weights.setdefault(0, DEFAULT_VL0_WEIGHT)
    return ",".join(f"{vl}:{weight}" for vl, weight in sorted(weights.items()))
