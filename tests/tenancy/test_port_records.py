"""A corrected import always fixes a bad port record (issue 10, item 5), even on a held node.

Imports refuse bad GUIDs today, but a record committed before (or written by hand) can hold one;
on an allocated node the import used to keep it as a vanished port, so no artifact could be
rendered again. A held node's vanished port is now removed when it cannot be right: the import
lists another GUID in its place, or its GUID is reserved or a switch's.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from sqlalchemy import Engine, text

from policies.errors import ArtifactHazardError
from tenancy.gate import verification
from tenancy.schemas import NicChange, TopologyPortChange
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import nodes, topology
from tests.builders import FABRIC, PORT_GUIDS, example_topology, without_hosts

ACME_PORT = "0x0000000000100003"  # gpu0001 mlx5_0 port 1, allocated to acme


def corrupt(engine: Engine, guid: str, bad: str) -> None:
    """Write a bad GUID into a committed port record, as an older import could."""
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE port SET guid = :bad WHERE guid = :guid"), {"bad": bad, "guid": guid}
        )


def changes(ports: Sequence[TopologyPortChange | NicChange]) -> list[tuple[str, str]]:
    """(GUID, action) of each reported InfiniBand port."""
    return [(p["guid"], p["action"]) for p in ib_ports(ports)]


def ib_ports(ports: Sequence[TopologyPortChange | NicChange]) -> list[TopologyPortChange]:
    """The reported InfiniBand ports (a TypedDict each; RoCE NICs are models)."""
    return [p for p in ports if not isinstance(p, NicChange)]


def gpu0001_ports(uow: UnitOfWork) -> list[str]:
    return [p.guid for p in nodes.get_node(uow, fabric_name=FABRIC, node_name="gpu0001").ports]


def test_a_corrected_import_fixes_a_zero_guid_that_made_every_render_fail(uow, onboarded, engine):
    corrupt(engine, ACME_PORT, "0x0000000000000000")
    with pytest.raises(ArtifactHazardError):
        verification.list_artifacts(uow, fabric_name=FABRIC)

    topology.import_topology(uow, fabric_name=FABRIC, text=example_topology())

    assert verification.list_artifacts(uow, fabric_name=FABRIC).files


@pytest.mark.parametrize(
    "bad", ["0x0000000000000000", "0xffffffffffffffff"], ids=["zero", "all-ones"]
)
def test_a_corrected_import_replaces_a_reserved_guid_on_an_allocated_node(
    uow, onboarded, engine, bad
):
    corrupt(engine, ACME_PORT, bad)

    result = topology.import_topology(uow, fabric_name=FABRIC, text=example_topology())

    assert changes(result.missing) == [(bad, "removed")]
    assert [p["allocated"] for p in ib_ports(result.missing)] == [True]
    assert changes(result.added) == [(ACME_PORT, "added")]
    assert gpu0001_ports(uow) == list(PORT_GUIDS["gpu0001"])


def test_a_corrected_import_replaces_a_wrong_guid_in_the_same_hca_port(uow, onboarded, engine):
    corrupt(engine, ACME_PORT, "0x00000000001000ff")

    result = topology.import_topology(uow, fabric_name=FABRIC, text=example_topology())

    assert changes(result.missing) == [("0x00000000001000ff", "removed")]
    assert gpu0001_ports(uow) == list(PORT_GUIDS["gpu0001"])


def test_a_reserved_guid_goes_even_when_the_held_host_is_missing_from_the_import(
    uow, onboarded, engine
):
    corrupt(engine, ACME_PORT, "0x0000000000000000")

    result = topology.import_topology(
        uow, fabric_name=FABRIC, text=without_hosts(example_topology(), ["gpu0001"])
    )

    assert changes(result.missing) == [
        ("0x0000000000000000", "removed"),
        ("0x0000000000100005", "kept"),
    ]
    assert gpu0001_ports(uow) == ["0x0000000000100005"]
    assert verification.list_artifacts(uow, fabric_name=FABRIC).files


def test_a_port_record_with_a_switchs_guid_is_not_kept(uow, onboarded, engine):
    corrupt(engine, ACME_PORT, "0x0000000000200000")  # leaf01's GUID

    topology.import_topology(
        uow, fabric_name=FABRIC, text=without_hosts(example_topology(), ["gpu0001"])
    )

    assert gpu0001_ports(uow) == ["0x0000000000100005"]


def test_a_held_nodes_sound_vanished_port_is_still_kept(uow, onboarded):
    result = topology.import_topology(
        uow, fabric_name=FABRIC, text=without_hosts(example_topology(), ["gpu0001"])
    )

    assert {p["action"] for p in ib_ports(result.missing)} == {"kept"}
    assert gpu0001_ports(uow) == list(PORT_GUIDS["gpu0001"])
