"""The engine's immutable view of one InfiniBand fabric: the `IbSnapshot` every check reads.

Snapshots are built by `tenancy.record.snapshot` from the system of record, or directly by tests and
library users. They hold plain values only (ints, strings, tuples), so they are hashable, cheap to
compare, and have a content digest that verdicts, artifacts and proofs carry.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from policies.model import FabricKind, Grant, Node, Owner
from policies.policy import DEFAULT_POLICY, Peering, Policy, TenantFacts

# IBA: the P_Key's low 15 bits name the partition; bit 15 is the membership (1 = full).
PKEY_BASE_MASK = 0x7FFF


PKEY_FULL_BIT = 0x8000


# OpenSM: 0x7fff is the default partition, always present (doc/partition-config.txt).
DEFAULT_PKEY = 0x7FFF


# IBA: a P_Key whose base is 0 is invalid (ib_pkey_is_invalid in include/iba/ib_types.h).
MIN_PKEY = 0x0001


MAX_TENANT_PKEY = 0x7FFE
# OpenSM: osm_prtn_new() keeps the first 31 bytes of a partition's name (char name[32]).
MAX_PARTITION_NAME = 31


# mlx5 HCAs expose 128 P_Key table entries (docs/facts/infiniband.md §2.3).
DEFAULT_PKEYS_PER_PORT = 128


@dataclass(frozen=True, slots=True)
class QosClass:
    """A class of service; on InfiniBand an SL plus the IPoIB group's rate and MTU codes."""

    name: str
    ib_sl: int
    ib_rate: int
    ib_mtu: int
    vlarb_weight: int


@dataclass(frozen=True, slots=True)
class IbPort:
    """An HCA port (an InfiniBand end port) identified by its port GUID."""

    guid: int
    node: str
    hca: str
    port: int = 1
    switch: str | None = None
    switch_port: int | None = None


@dataclass(frozen=True, slots=True, order=True)
class Member:
    """A port's membership in a partition: full members talk to everyone, limited only to full."""

    guid: int
    full: bool


@dataclass(frozen=True, slots=True)
class Partition:
    """An InfiniBand partition: a 15-bit key owned by a tenant or a service, with its members.

    A peering's shared partition has `peering` set; both tenants' ports are full members and
    its `owner` is the peering's first tenant (`peering.a`). A tenant's additional partition
    (one it created beside its default partition) has `label`, its name within the tenant,
    and lists its members explicitly: ports of the tenant's nodes and virtual GUIDs bound to
    it. `ipoib` and `index0` are partitions.conf's ``ipoib`` and ``indx0`` flags, which OpenSM
    applies to the whole partition (opensm/osm_prtn_config.c, OpenSM 3.3.23).
    """

    pkey: int
    owner: Owner
    members: tuple[Member, ...]
    qos_class: str | None = None
    peering: Peering | None = None
    label: str | None = None
    ipoib: bool = True
    index0: bool = False

    @property
    def name(self) -> str:
        """Name used in partitions.conf, unique within the 31 bytes OpenSM keeps.

        ``tenant_acme``; a longer one is cut to 26 characters plus ``_<key>``. A peering's is
        ``peer_<a>_<b>`` and a tenant's additional partition ``part_<tenant>_<label>``, both cut
        as `two_slug_name` says. Slugs hold no '_', so names of different shapes never collide:
        a whole owner name holds one '_', a cut one two; a whole peering or additional name two,
        a cut one three; and names of one shape but another kind start with another word
        (``tenant``, ``service``, ``peer``, ``part``). Keys are unique, so cut names are too.
        """
        if self.peering is not None:
            return peering_partition_name(self.peering, self.pkey)
        if self.label is not None:
            return additional_partition_name(self.owner.name, self.label, self.pkey)
        whole = f"{self.owner.kind.value}_{self.owner.name}"
        if len(whole) <= MAX_PARTITION_NAME:
            return whole
        return f"{whole[: MAX_PARTITION_NAME - 5]}_{self.pkey & PKEY_BASE_MASK:04x}"


def two_slug_name(prefix: str, a: str, b: str, pkey: int) -> str:
    """``<prefix>_<a>_<b>`` within OpenSM's 31 bytes; longer: ``<prefix>_<a'>_<b'>_<key>``.

    A cut name keeps a prefix of both slugs (each gets half of the characters left after the
    prefix, three '_' and the 4-digit key, or more when the other is shorter), so it holds three
    '_' and never equals a whole name of the same prefix (two); the key makes cut names unique.
    """
    whole = f"{prefix}_{a}_{b}"
    if len(whole) <= MAX_PARTITION_NAME:
        return whole
    room = MAX_PARTITION_NAME - len(prefix) - 3 - 4
    a_cut = a[: max(room // 2, room - len(b))]
    b_cut = b[: room - len(a_cut)]
    return f"{prefix}_{a_cut}_{b_cut}_{pkey & PKEY_BASE_MASK:04x}"


def peering_partition_name(peering: Peering, pkey: int) -> str:
    """``peer_<a>_<b>`` within OpenSM's 31 bytes; longer: ``peer_<a'>_<b'>_<key>``.

    Cut as `two_slug_name` says (20 characters for the two slugs): it never equals a whole
    peering name, nor a tenant's, service's or additional partition's (other prefixes).
    """
    return two_slug_name("peer", peering.a, peering.b, pkey)


# The first word of a tenant's additional partition's name (``part_<tenant>_<label>``).
ADDITIONAL_PARTITION_PREFIX = "part"


def additional_partition_name(tenant: str, label: str, pkey: int) -> str:
    """``part_<tenant>_<label>`` within OpenSM's 31 bytes; longer: ``part_<t'>_<l'>_<key>``.

    A tenant's additional partition (`Partition.label`), cut as `two_slug_name` says.
    """
    return two_slug_name(ADDITIONAL_PARTITION_PREFIX, tenant, label, pkey)


@dataclass(frozen=True, slots=True)
class VirtualGuid:
    """A virtual port GUID (an SR-IOV virtual function's) bound to the tenant that holds it.

    isofabric does not know its physical port: only a virtualization-aware SM (NVIDIA's)
    enforces its memberships, and the per-port checks cannot count it.
    """

    guid: int
    tenant: str


@dataclass(frozen=True, slots=True)
class IbSettings:
    """Fabric-wide facts the checks need: identity, key range and per-port key budget.

    `virtual_guids` is true when the fabric's SM enforces memberships of virtual GUIDs
    (NVIDIA's SM with virtualization enabled).
    """

    name: str
    kind: FabricKind = FabricKind.INFINIBAND
    pkey_first: int = 0x0001
    pkey_last: int = MAX_TENANT_PKEY
    pkeys_per_port: int = DEFAULT_PKEYS_PER_PORT
    virtual_guids: bool = False


@dataclass(frozen=True)
class IbSnapshot:
    """Everything the engine knows about one fabric at one moment.

    `default_full` lists port GUIDs that are *full* members of the default partition 0x7fff; it is
    empty for any state isofabric itself produces (every CA port is limited there) and exists so
    that audited, deployed configurations can be represented and refuted.

    `policy` is the policy in force, `tenants` the facts of every tenant that holds something in
    the snapshot and `peerings` the accepted peerings on this fabric (policies.policy_rules).
    `virtual_guids` are the virtual GUIDs bound to tenants; partitions may list them as members.
    """

    fabric: IbSettings
    nodes: tuple[Node, ...] = ()
    ports: tuple[IbPort, ...] = ()
    partitions: tuple[Partition, ...] = ()
    grants: tuple[Grant, ...] = ()
    qos_classes: tuple[QosClass, ...] = ()
    default_full: tuple[int, ...] = ()
    policy: Policy = DEFAULT_POLICY
    tenants: tuple[TenantFacts, ...] = ()
    peerings: tuple[Peering, ...] = ()
    virtual_guids: tuple[VirtualGuid, ...] = ()

    @cached_property
    def digest(self) -> str:
        """The v2 digest (``v2:<hex>``, policies/digest): a multiset hash of its groups."""
        from policies.infiniband.digest import ib_digest  # the digest module reads this one

        return ib_digest(self)


def format_pkey(pkey: int) -> str:
    """Lower-case, zero-padded 4-digit hex as used in the API and artifacts (``0x0101``)."""
    return f"0x{pkey:04x}"


def format_guid(guid: int) -> str:
    """Lower-case, zero-padded 16-digit hex (``0x0002c90300a1b2c4``)."""
    return f"0x{guid:016x}"
