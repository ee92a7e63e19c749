"""Topology imports without HTTP: ibnetdiscover text and RoCE inventories reconciled with the
record (added, kept and removed ports), the format each fabric takes, malformed documents."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
import yaml

from policies.errors import (
    InputFormatError,
    InvalidValueError,
    NotFoundError,
    UnsupportedMediaTypeError,
)
from tenancy.schemas import NicChange, PortView, RoceFabricCreate, TopologyPortChange
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import fabrics, ib_topology, nodes, shared_services, topology
from tests.builders import (
    PORT_GUIDS,
    ROCE_FABRIC_SPEC,
    example_topology,
    fabric_spec,
    line_number,
    partition_members,
    replace_line,
    roce_inventory,
    roce_inventory_text,
    uow_partitions_conf,
    without_hosts,
)

JSON, YAML, TEXT = "application/json", "application/yaml", "text/plain"


def reimport(uow: UnitOfWork, text: str) -> Any:
    return topology.import_topology(uow, fabric_name="ib-east", text=text)


def port(
    guid: str, node: str, hca: str, *, allocated: bool, action: Literal["added", "removed", "kept"]
) -> TopologyPortChange:
    return TopologyPortChange(
        guid=guid, node=node, hca=hca, port=1, allocated=allocated, action=action
    )


@pytest.fixture
def ib_east(uow):
    """ib-east created, no topology yet."""
    fabrics.create_fabric(uow, spec=fabric_spec())
    return uow


# --- InfiniBand: a first import ----------------------------------------------------------------


def test_importing_the_sample_counts_its_switches_nodes_and_ports(ib_east):
    result = reimport(ib_east, example_topology())

    assert (result.switches, result.nodes, result.ports) == (4, 11, 19)
    assert result.missing == []


def test_importing_the_sample_reports_every_port_as_added_in_guid_order(ib_east):
    added = reimport(ib_east, example_topology()).added

    assert [p["guid"] for p in added] == sorted(g for gs in PORT_GUIDS.values() for g in gs)
    assert added[0] == port("0x0000000000100001", "sm01", "mlx5_0", allocated=False, action="added")
    assert [(p["node"], p["hca"]) for p in added if p["node"] == "gpu0001"] == [
        ("gpu0001", "mlx5_0"),
        ("gpu0001", "mlx5_1"),
    ]


def test_imported_nodes_are_free_compute_nodes_with_their_cabling(ib_east):
    reimport(ib_east, example_topology())

    node = nodes.get_node(ib_east, fabric_name="ib-east", node_name="gpu0001")

    assert (node.role, node.tenant, node.service, node.nics) == ("compute", None, None, None)
    assert node.ports == [
        PortView(guid="0x0000000000100003", hca="mlx5_0", port=1, switch="leaf01", switch_port=1),
        PortView(guid="0x0000000000100005", hca="mlx5_1", port=1, switch="leaf02", switch_port=1),
    ]


def test_a_second_import_of_the_same_text_adds_nothing_and_only_audits_itself(ib_east, db_dump):
    first = reimport(ib_east, example_topology())
    before = db_dump()

    second = reimport(ib_east, example_topology())

    assert second == first.model_copy(update={"added": []})
    after = db_dump()
    new_entries = set(after.pop("audit_entry")) - set(before.pop("audit_entry"))
    assert [row[4] for row in new_entries] == ["topology.import"]
    assert after == before


def test_the_sample_with_crlf_line_ends_imports_the_same_inventory(ib_east):
    result = reimport(ib_east, example_topology().replace("\n", "\r\n"))

    assert (result.switches, result.nodes, result.ports) == (4, 11, 19)


def malformed_cases() -> list[Any]:
    text = example_topology()
    ca_line = line_number(text, 'Ca\t1 "H-0000000000100024"')
    switch_line = line_number(text, 'Switch\t36 "S-0000000000200001"')
    port_line = line_number(text, "[1](100025)")
    return [
        pytest.param(replace_line(text, ca_line, "Ca\t1 garbage"), ca_line, id="garbled-ca-record"),
        pytest.param(
            replace_line(text, ca_line, lambda s: s.replace("stor02 mlx5_0", "stor02;x mlx5_0")),
            ca_line,
            id="hostname-with-semicolon",
        ),
        pytest.param(
            replace_line(text, switch_line, lambda s: s.replace("200001", "2000zz")),
            switch_line,
            id="non-hex-switch-guid",
        ),
        pytest.param(
            replace_line(text, port_line, "[1](100025) ???"), port_line, id="garbled-port-line"
        ),
        pytest.param(replace_line(text, 6, "this is not ibnetdiscover output"), 6, id="free-text"),
        pytest.param("", 1, id="empty"),
    ]


@pytest.mark.parametrize(("text", "line"), malformed_cases())
def test_malformed_ibnetdiscover_names_its_line_and_changes_nothing(ib_east, db_dump, text, line):
    reimport(ib_east, example_topology())
    before = db_dump()

    with pytest.raises(InputFormatError) as refused:
        reimport(ib_east, text)

    assert refused.value.line == line
    assert refused.value.detail.startswith(f"line {line}: ")
    assert db_dump() == before


def test_a_topology_for_an_unknown_fabric_is_not_found_naming_it(uow, db_dump):
    before = db_dump()

    with pytest.raises(NotFoundError, match="ib-nowhere"):
        topology.import_topology(uow, fabric_name="ib-nowhere", text=example_topology())

    assert db_dump() == before


# --- InfiniBand: a re-import reconciles ---------------------------------------------------------


def test_a_reimport_lacking_an_allocated_nodes_ports_keeps_them_and_reports_them_kept(
    uow, onboarded
):
    result = reimport(uow, without_hosts(example_topology(), ["gpu0001"]))

    assert result.added == []
    assert result.missing == [
        port("0x0000000000100003", "gpu0001", "mlx5_0", allocated=True, action="kept"),
        port("0x0000000000100005", "gpu0001", "mlx5_1", allocated=True, action="kept"),
    ]
    assert (result.nodes, result.ports) == (11, 19)
    node = nodes.get_node(uow, fabric_name="ib-east", node_name="gpu0001")
    assert node.tenant == "acme"
    assert [p.guid for p in node.ports] == list(PORT_GUIDS["gpu0001"])


def test_kept_ports_stay_in_the_tenant_partition(uow, onboarded):
    reimport(uow, without_hosts(example_topology(), ["gpu0001"]))

    acme = partition_members(uow_partitions_conf(uow), "tenant_acme")

    for guid in PORT_GUIDS["gpu0001"]:
        assert f"{guid}=full" in acme


def test_a_reimport_lacking_a_free_nodes_ports_removes_them_and_marks_the_node_absent(
    uow, onboarded
):
    result = reimport(uow, without_hosts(example_topology(), ["gpu0008"]))

    assert result.missing == [
        port("0x000000000010001f", "gpu0008", "mlx5_0", allocated=False, action="removed"),
        port("0x0000000000100021", "gpu0008", "mlx5_1", allocated=False, action="removed"),
    ]
    assert (result.nodes, result.ports) == (10, 17)
    assert result.absent_nodes == ["gpu0008"]
    node = nodes.get_node(uow, fabric_name="ib-east", node_name="gpu0008")
    assert (node.state, node.ports) == ("absent", [])


def test_a_reimport_keeps_a_service_nodes_vanished_port(uow, onboarded):
    result = reimport(uow, without_hosts(example_topology(), ["stor02"]))

    assert [(p["node"], p["action"]) for p in result.missing] == [("stor02", "kept")]
    service = shared_services.get_service(uow, fabric_name="ib-east", name="storage")
    assert service.nodes == ["stor01", "stor02"]


def test_a_vanished_port_that_comes_back_is_added_again(uow, onboarded):
    reimport(uow, without_hosts(example_topology(), ["gpu0008"]))

    result = reimport(uow, example_topology())

    assert [(p["guid"], p["node"], p["action"]) for p in result.added] == [
        ("0x000000000010001f", "gpu0008", "added"),
        ("0x0000000000100021", "gpu0008", "added"),
    ]
    assert result.missing == []
    assert (result.nodes, result.ports) == (11, 19)


def test_a_port_recabled_to_another_switch_port_is_updated_in_place(ib_east, db_dump):
    first = reimport(ib_east, example_topology())
    ca_side = '[1](100003) \t"S-0000000000200000"[1]\t'
    recabled = example_topology().replace(ca_side, ca_side.replace("[1]\t", "[30]\t"))
    before = db_dump()

    result = reimport(ib_east, recabled)

    assert result == first.model_copy(update={"added": []})
    node = nodes.get_node(ib_east, fabric_name="ib-east", node_name="gpu0001")
    assert node.ports[0] == PortView(
        guid="0x0000000000100003", hca="mlx5_0", port=1, switch="leaf01", switch_port=30
    )
    after = db_dump()
    changed = set(after["port"]) - set(before["port"])
    assert [(row[3], row[8]) for row in changed] == [("0x0000000000100003", 30)]


def test_ports_gone_and_moved_in_numbers_are_read_a_few_at_a_time(ib_east, monkeypatch):
    # Ids of changed and vanished ports are read in IN (...) queries of GUIDS_PER_QUERY GUIDs.
    reimport(ib_east, example_topology())
    monkeypatch.setattr(ib_topology, "GUIDS_PER_QUERY", 2)
    hosts = ["gpu0005", "gpu0006", "gpu0007", "gpu0008"]
    moved = example_topology().replace('"gpu0004 ', '"gpu0009 ')

    result = reimport(ib_east, without_hosts(moved, hosts))

    removed = [(host, "removed") for host in hosts for _hca in range(2)]
    assert [(p["node"], p["action"]) for p in result.missing] == removed
    assert [(m.source, m.target) for m in result.moved] == [("gpu0004", "gpu0009")] * 2
    assert result.absent_nodes == ["gpu0004", *hosts]
    node = nodes.get_node(ib_east, fabric_name="ib-east", node_name="gpu0009")
    assert [p.guid for p in node.ports] == list(PORT_GUIDS["gpu0004"])


# --- which format a fabric takes ----------------------------------------------------------------


@pytest.fixture
def both_kinds(uow):
    """ib-east and roce-west created, neither with a topology."""
    fabrics.create_fabric(uow, spec=fabric_spec())
    fabrics.create_fabric(uow, spec=RoceFabricCreate.model_validate(ROCE_FABRIC_SPEC))
    return uow


@pytest.mark.parametrize(
    ("fabric", "media_type", "wanted"),
    [
        ("ib-east", JSON, "text/plain"),
        ("ib-east", YAML, "text/plain"),
        ("roce-west", TEXT, "application/json"),
    ],
)
def test_a_document_in_the_other_technologys_format_is_unsupported_and_changes_nothing(
    both_kinds, db_dump, fabric, media_type, wanted
):
    before = db_dump()

    with pytest.raises(UnsupportedMediaTypeError, match=wanted):
        topology.import_document(
            both_kinds, fabric_name=fabric, media_type=media_type, text=roce_inventory_text()
        )

    assert db_dump() == before


def test_ibnetdiscover_text_for_a_roce_fabric_is_refused_by_the_direct_use_case(both_kinds):
    with pytest.raises(InvalidValueError):
        topology.import_topology(both_kinds, fabric_name="roce-west", text=example_topology())


# --- RoCE inventories ---------------------------------------------------------------------------


def nic(node: str, name: str, switch: str, port: str, **change: Any) -> NicChange:
    return NicChange(node=node, nic=name, switch=switch, port=port, **change)


def import_inventory(uow: UnitOfWork, document: dict[str, Any] | str, media_type: str = JSON):
    text = document if isinstance(document, str) else json.dumps(document)
    return topology.import_document(uow, fabric_name="roce-west", media_type=media_type, text=text)


def mutated(mutate: Any) -> dict[str, Any]:
    document = roce_inventory()
    mutate(document)
    return document


def node_of(document: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(n for n in document["nodes"] if n["name"] == name)
    return found


def test_importing_the_demo_inventory_counts_switches_nodes_and_nics(both_kinds):
    result = import_inventory(both_kinds, roce_inventory())

    assert (result.switches, result.nodes, result.ports) == (4, 8, 16)
    assert result.missing == []
    assert result.added[:2] == [
        nic("gpu0001", "eth0", "leaf01", "Ethernet0"),
        nic("gpu0001", "eth1", "leaf02", "Ethernet0"),
    ]


def test_the_demo_inventory_as_yaml_imports_the_same_fabric_as_json(both_kinds):
    as_yaml = import_inventory(both_kinds, yaml.safe_dump(roce_inventory()), YAML)

    assert (as_yaml.switches, as_yaml.nodes, as_yaml.ports, len(as_yaml.added)) == (4, 8, 16, 16)
    stor02 = nodes.get_node(both_kinds, fabric_name="roce-west", node_name="stor02")
    assert [(n.name, n.switch, n.port) for n in stor02.nics or []] == [
        ("eth0", "leaf01", "Ethernet56"),
        ("eth1", "leaf02", "Ethernet56"),
    ]
    assert stor02.ports == []


def test_reimporting_the_same_inventory_adds_nothing(both_kinds):
    import_inventory(both_kinds, roce_inventory())

    again = import_inventory(both_kinds, roce_inventory())

    assert (again.switches, again.nodes, again.ports, again.added, again.missing) == (
        4,
        8,
        16,
        [],
        [],
    )


@pytest.mark.parametrize(
    ("mutate", "named"),
    [
        (
            lambda d: d["links"].append({"a": "leaf09:Ethernet0", "b": "spine01:Ethernet0"}),
            "leaf09",
        ),
        (lambda d: d["links"][0].update(b="spine01:Ethernet99"), "Ethernet99"),
        (lambda d: node_of(d, "gpu0002")["nics"][0].update(port="Ethernet0"), "leaf01:Ethernet0"),
        (lambda d: node_of(d, "gpu0001")["nics"][0].update(switch="spine01"), "spine01"),
    ],
    ids=["unknown-switch", "unknown-port", "port-cabled-twice", "nic-on-a-spine"],
)
def test_an_inventory_that_does_not_fit_together_names_the_item_and_changes_nothing(
    both_kinds, db_dump, mutate, named
):
    import_inventory(both_kinds, roce_inventory())
    before = db_dump()

    with pytest.raises(InvalidValueError, match=named):
        import_inventory(both_kinds, mutated(mutate))

    assert db_dump() == before


def test_an_inventory_violating_the_schema_lists_a_pointer_per_error(both_kinds):
    def bad_asn(document: dict[str, Any]) -> None:
        document["switches"][3]["asn"] = 0

    with pytest.raises(InvalidValueError) as refused:
        import_inventory(both_kinds, mutated(bad_asn))

    assert [e["pointer"] for e in refused.value.extensions["errors"]] == ["/switches/3/asn"]


@pytest.mark.parametrize(
    ("text", "media_type", "line"),
    [
        ('{\n  "switches": [\n    {"name": "leaf01",,}\n  ]\n}\n', JSON, 3),
        ("switches:\n  - name: leaf01\n    role: [leaf\nlinks: []\n", YAML, 4),
    ],
    ids=["json", "yaml"],
)
def test_a_malformed_inventory_names_its_line_and_changes_nothing(
    both_kinds, db_dump, text, media_type, line
):
    before = db_dump()

    with pytest.raises(InputFormatError) as refused:
        import_inventory(both_kinds, text, media_type)

    assert refused.value.line == line
    assert db_dump() == before


def test_a_reimport_lacking_a_free_nodes_nics_removes_them_and_marks_the_node_absent(
    both_kinds,
):
    import_inventory(both_kinds, roce_inventory())

    result = import_inventory(
        both_kinds, mutated(lambda d: d["nodes"].remove(node_of(d, "gpu0006")))
    )

    assert result.missing == [
        nic("gpu0006", "eth0", "leaf01", "Ethernet40", action="removed"),
        nic("gpu0006", "eth1", "leaf02", "Ethernet40", action="removed"),
    ]
    assert (result.nodes, result.ports) == (7, 14)
    assert result.absent_nodes == ["gpu0006"]
    node = nodes.get_node(both_kinds, fabric_name="roce-west", node_name="gpu0006")
    assert (node.state, node.nics) == ("absent", None)


def test_a_reimport_lacking_an_allocated_nodes_nic_keeps_it_and_reports_it_kept(
    uow, roce_onboarded
):
    result = import_inventory(uow, mutated(lambda d: node_of(d, "gpu0001")["nics"].pop(1)))

    assert result.added == []
    assert result.missing == [
        nic("gpu0001", "eth1", "leaf02", "Ethernet0", allocated=True, action="kept")
    ]
    assert (result.nodes, result.ports) == (8, 16)
    node = nodes.get_node(uow, fabric_name="roce-west", node_name="gpu0001")
    assert node.tenant == "acme"
    assert [n.name for n in node.nics or []] == ["eth0", "eth1"]


def test_recabling_two_nics_onto_each_others_ports_is_accepted(both_kinds):
    import_inventory(both_kinds, roce_inventory())

    def swap(document: dict[str, Any]) -> None:
        node_of(document, "gpu0001")["nics"][0]["port"] = "Ethernet8"
        node_of(document, "gpu0002")["nics"][0]["port"] = "Ethernet0"

    import_inventory(both_kinds, mutated(swap))

    for name, expected in (("gpu0001", "Ethernet8"), ("gpu0002", "Ethernet0")):
        node = nodes.get_node(both_kinds, fabric_name="roce-west", node_name=name)
        assert node.nics is not None and node.nics[0].port == expected
