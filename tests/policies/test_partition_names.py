"""Partition names as OpenSM keeps them: 31 bytes (hardening issue 10, item 17).

osm_prtn_new() copies `sizeof(p->name) - 1` bytes of a name into char name[32], and
osm_prtn_find_by_name() compares strncmp(p->name, name, 32): a name of 32 bytes or more is
logged cut and never found again by name.
"""

from policies.infiniband.model import Member, Partition, peering_partition_name
from policies.infiniband.parse_partitions import memberships, parse_partitions_conf
from policies.model import Owner
from policies.policy import Peering

DEFAULT = "Default=0x7fff, ipoib : ALL=limited ;\n"
NAME_31 = "a" * 31
NAME_32 = "a" * 32


def codes(text: str) -> list[str]:
    return [finding.code for finding in parse_partitions_conf(text).findings]


def test_a_keyless_statement_reuses_a_31_byte_name():
    text = DEFAULT + f"{NAME_31}=0x0010 : 0x1=full ;\n{NAME_31} : 0x2=full ;\n"

    keys = memberships(parse_partitions_conf(text))

    assert keys[0x0010] == {0x1: "full", 0x2: "full"}


def test_a_keyless_statement_never_reuses_a_32_byte_name():
    text = DEFAULT + f"{NAME_32}=0x0010 : 0x1=full ;\n{NAME_32} : 0x2=full ;\n"

    keys = memberships(parse_partitions_conf(text))

    # OpenSM generates a key for the second statement: the first free one, 0x0001.
    assert keys[0x0010] == {0x1: "full"}
    assert keys[0x0001] == {0x2: "full"}
    assert "long-name" in codes(text)


def test_names_equal_in_their_first_31_bytes_are_one_name_in_diagnostics():
    text = DEFAULT + f"{NAME_31}x=0x0010 : 0x1=full ;\n{NAME_31}y=0x0020 : 0x2=full ;\n"

    assert "duplicate-name" in codes(text)


def test_names_that_differ_within_31_bytes_are_not_duplicates():
    text = DEFAULT + "tenant_acme=0x0010 : 0x1=full ;\ntenant_acmf=0x0020 : 0x2=full ;\n"

    assert codes(text) == []


def test_rendered_names_stay_within_31_bytes_and_unique():
    long_slug = "a" + "b" * 62
    partitions = [
        Partition(0x0101, Owner.tenant(long_slug), (Member(1, True),)),
        Partition(0x0102, Owner.tenant(long_slug[:-1] + "c"), (Member(2, True),)),
        Partition(0x0103, Owner.tenant("acme"), (Member(3, True),)),
    ]

    names = [p.name for p in partitions]

    assert all(len(name.encode()) <= 31 for name in names)
    assert len(set(names)) == len(names)
    assert names[2] == "tenant_acme"
    assert names[0] == "tenant_a" + "b" * 18 + "_0101"  # 26 characters, '_', the key


def test_an_additional_partition_is_named_part_tenant_label():
    partition = Partition(0x0104, Owner.tenant("acme"), (Member(1, True),), label="storage")

    assert partition.name == "part_acme_storage"


def test_a_long_additional_name_keeps_prefixes_of_both_slugs_and_the_key():
    tenant, label = "t" * 30, "l" * 30
    partition = Partition(0x0104, Owner.tenant(tenant), (), label=label)

    assert partition.name == "part_" + "t" * 10 + "_" + "l" * 10 + "_0104"
    assert len(partition.name) == 31


def test_a_short_label_leaves_its_room_to_the_tenant():
    partition = Partition(0x0104, Owner.tenant("t" * 30), (), label="ab")

    assert partition.name == "part_" + "t" * 18 + "_ab_0104"
    assert len(partition.name) <= 31


def test_names_of_every_shape_stay_within_31_bytes_and_never_collide():
    long_slug = "a" + "b" * 40
    partitions = [
        Partition(0x0101, Owner.tenant("acme"), ()),
        Partition(0x0102, Owner.tenant(long_slug), ()),
        Partition(0x0103, Owner.service("acme"), ()),
        Partition(0x0104, Owner.tenant("acme"), (), peering=Peering("acme", "storage")),
        Partition(0x0105, Owner.tenant("acme"), (), peering=Peering(long_slug, long_slug + "c")),
        Partition(0x0106, Owner.tenant("acme"), (), label="storage"),
        Partition(0x0107, Owner.tenant("acme"), (), label="storagf"),
        Partition(0x0108, Owner.tenant(long_slug), (), label=long_slug),
        Partition(0x0109, Owner.tenant(long_slug), (), label=long_slug),
    ]

    names = [p.name for p in partitions]

    assert all(len(name.encode()) <= 31 for name in names)
    assert len(set(names)) == len(names)
    # A whole name's '_' count tells its shape from a cut one of the same prefix.
    assert [name.count("_") for name in names] == [1, 2, 1, 2, 3, 2, 2, 3, 3]
    assert {name.split("_")[0] for name in names} == {"tenant", "service", "peer", "part"}


def test_the_peering_name_is_unchanged_by_the_shared_helper():
    peering = Peering("a" * 30, "b" * 3)

    assert peering_partition_name(peering, 0x0105) == "peer_" + "a" * 17 + "_bbb_0105"
