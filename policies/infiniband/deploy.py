"""What the OpenSM deploy agent concludes from file contents: models, diffs, read-back checks.

The agent (``isofabric agent opensm``, agent/) installs signed files next to a running OpenSM;
everything it concludes from their text lives here, pure (stdlib only, no I/O):

* `expected_tables`: the P_Key table OpenSM programs on each CA port from a parsed partitions.conf
  (explicit GUIDs plus ALL/ALL_CAS/SELF members, and the default partition 0x7fff);
* `compare_tables`: the ports whose read-back table differs from that model (`Mismatch`);
* `changed_ports` and `reachability_changes`: what changes between two parsed files, as ports and
  as owners (``tenant:acme``, ``service:storage``).

What the agent reads from opensm.conf and OpenSM's command line: `policies.infiniband.opensm_conf`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from policies.infiniband.model import (
    ADDITIONAL_PARTITION_PREFIX,
    DEFAULT_PKEY,
    PKEY_BASE_MASK,
    PKEY_FULL_BIT,
    format_guid,
    format_pkey,
)
from policies.infiniband.parse_partitions import ParsedPartitions, memberships, special_members
from policies.model import Owner, OwnerKind

__all__ = [
    "Mismatch",
    "changed_ports",
    "compare_tables",
    "expected_tables",
    "reachability_changes",
]

_DEFAULT_NAME = "Default"
# OpenSM osm_prtn_make_partitions(): without a Default statement it uses ALL=limited, SELF=full.
_IMPLICIT_DEFAULT = {"ALL": "limited", "SELF": "full"}
_ALL_CA_SPECIALS = frozenset({"ALL", "ALL_CAS"})


@dataclass(frozen=True, slots=True)
class Mismatch:
    """A port whose read-back P_Key table differs from the model.

    Keys are 16-bit P_Keys (bit 15 = full member): `missing` are in the model but not on the port,
    `unexpected` are on the port but not in the model.
    """

    guid: int
    missing: tuple[int, ...]
    unexpected: tuple[int, ...]

    def as_report(self) -> dict[str, object]:
        """The report form: ``{"guid": "0x<16 hex>", "missing": ["0x8101"], "unexpected": []}``."""
        return {
            "guid": format_guid(self.guid),
            "missing": [format_pkey(k) for k in self.missing],
            "unexpected": [format_pkey(k) for k in self.unexpected],
        }


# --------------------------------------------------------------------------- the P_Key model


def expected_tables(
    parsed: ParsedPartitions, ca_ports: Iterable[int], self_guid: int | None
) -> dict[int, frozenset[int]]:
    """The P_Keys OpenSM programs on each CA port in `ca_ports` from the parsed file.

    Explicit GUID members come from `memberships`; ``ALL`` and ``ALL_CAS`` add every CA port and
    ``SELF`` the SM's own port (`self_guid`, the master's); ``ALL_SWITCHES``/``ALL_ROUTERS`` add
    no CA port. Without a Default statement OpenSM uses ``Default=0x7fff : ALL=limited,
    SELF=full``. A port listed both limited and full in one partition is a full member (one entry
    per key: allow_both_pkeys is FALSE). A file that fails open is modelled as OpenSM applies it:
    every port a full member of 0x7fff only.

    Returns:
        ``{guid: frozenset of 16-bit P_Keys}`` for every port of `ca_ports`.
    """
    ports = list(ca_ports)
    if parsed.fails_open:
        return dict.fromkeys(ports, frozenset({DEFAULT_PKEY | PKEY_FULL_BIT}))
    full: dict[int, dict[int, bool]] = {guid: {} for guid in ports}
    for key, members in _members_by_key(parsed, ports, self_guid).items():
        for guid, membership in members:
            if guid in full:
                full[guid][key] = full[guid].get(key, False) or membership == "full"
    return {
        guid: frozenset(key | (PKEY_FULL_BIT if is_full else 0) for key, is_full in keys.items())
        for guid, keys in full.items()
    }


def _members_by_key(
    parsed: ParsedPartitions, ports: list[int], self_guid: int | None
) -> dict[int, list[tuple[int, str]]]:
    """(guid, membership) pairs per base key, specials expanded over the CA ports."""
    specials = special_members(parsed)
    if not _has_default_statement(parsed):
        specials.setdefault(DEFAULT_PKEY, {}).update(_IMPLICIT_DEFAULT)
    result: dict[int, list[tuple[int, str]]] = {}
    for key, members in memberships(parsed).items():
        result.setdefault(key, []).extend(members.items())
    for key, named in specials.items():
        for special, membership in named.items():
            if special in _ALL_CA_SPECIALS:
                result.setdefault(key, []).extend((guid, membership) for guid in ports)
            elif special == "SELF" and self_guid is not None:
                result.setdefault(key, []).append((self_guid, membership))
    return result


def _has_default_statement(parsed: ParsedPartitions) -> bool:
    return any(
        p.pkey == DEFAULT_PKEY or (p.pkey is None and p.name == _DEFAULT_NAME)
        for p in parsed.partitions
    )


def compare_tables(
    expected: Mapping[int, Iterable[int]], observed: Mapping[int, Iterable[int]]
) -> tuple[Mismatch, ...]:
    """The ports of `observed` whose table is not exactly their `expected` one.

    Only the ports read are compared (a port absent from `observed` was not read); a port read
    but absent from `expected` must hold nothing. Entries with base 0 are empty slots.

    Returns:
        One `Mismatch` per differing port, sorted by GUID.
    """
    result = []
    for guid in sorted(observed):
        have = {key for key in observed[guid] if key & PKEY_BASE_MASK}
        want = set(expected.get(guid, ()))
        if have != want:
            result.append(Mismatch(guid, tuple(sorted(want - have)), tuple(sorted(have - want))))
    return tuple(result)


# ----------------------------------------------------------------------- changes between files


def changed_ports(before: ParsedPartitions, after: ParsedPartitions) -> frozenset[int]:
    """GUIDs whose explicit membership (key or full/limited) differs between the two files."""
    old, new = _port_keys(before), _port_keys(after)
    return frozenset(guid for guid in old.keys() | new.keys() if old.get(guid) != new.get(guid))


def _port_keys(parsed: ParsedPartitions) -> dict[int, frozenset[tuple[int, str]]]:
    keys: dict[int, set[tuple[int, str]]] = {}
    for key, members in memberships(parsed).items():
        for guid, membership in members.items():
            keys.setdefault(guid, set()).add((key, membership))
    return {guid: frozenset(pairs) for guid, pairs in keys.items()}


def reachability_changes(before: ParsedPartitions, after: ParsedPartitions) -> tuple[Owner, ...]:
    """The owners whose reachability differs between the two files.

    A partition named ``tenant_<name>`` or ``service_<name>`` (isofabric's names) belongs to that
    owner, and a tenant's additional partition ``part_<tenant>_<label>`` to that tenant. An
    owner's reachability changes when the members (or specials) of one of its partitions change,
    or when one of its ports (a member of its partition in either file) joins or leaves any
    partition, e.g. a grant adding a tenant's ports to a service partition. Names cut to
    OpenSM's 31 bytes keep their ``_<key>`` suffix in the owner's name (a cut additional name,
    the prefix of the tenant's name it kept).

    Returns:
        The owners, sorted (tenants first).
    """
    owners_of = {**_partition_owners(before), **_partition_owners(after)}
    old, new = _key_members(before), _key_members(after)
    changed = {key for key in old.keys() | new.keys() if old.get(key) != new.get(key)}
    result = {owners_of[key] for key in changed if key in owners_of}
    port_owner = {**_port_owners(before, owners_of), **_port_owners(after, owners_of)}
    result |= {port_owner[g] for g in changed_ports(before, after) if g in port_owner}
    return tuple(sorted(result))


def _key_members(parsed: ParsedPartitions) -> dict[int, object]:
    """Base key -> (explicit members, specials), both sorted, for equality tests."""
    explicit, specials = memberships(parsed), special_members(parsed)
    return {
        key: (sorted(explicit.get(key, {}).items()), sorted(specials.get(key, {}).items()))
        for key in explicit.keys() | specials.keys()
    }


def _partition_owners(parsed: ParsedPartitions) -> dict[int, Owner]:
    owners = {}
    for partition in parsed.partitions:
        kind, _, name = (partition.name or "").partition("_")
        if (
            kind == ADDITIONAL_PARTITION_PREFIX
        ):  # part_<tenant>_<label> (`additional_partition_name`)
            kind, name = OwnerKind.TENANT, name.partition("_")[0]
        if partition.pkey is not None and name and kind in (OwnerKind.TENANT, OwnerKind.SERVICE):
            owners[partition.pkey] = Owner(OwnerKind(kind), name)
    return owners


def _port_owners(parsed: ParsedPartitions, owners_of: Mapping[int, Owner]) -> dict[int, Owner]:
    """Port GUID -> the tenant whose partition lists it as a full member."""
    result = {}
    for key, members in memberships(parsed).items():
        owner = owners_of.get(key)
        if owner is not None and owner.kind is OwnerKind.TENANT:
            result.update({g: owner for g, m in members.items() if m == "full"})
    return result
