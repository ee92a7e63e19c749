"""policies.infiniband.parse_ibnetdiscover against real ibnetdiscover output and variants.

The files under data/ were produced by infiniband-diags 44.0 against ibsim 0.10 (topologies
data/ibsim-*.net): `ibnetdiscover` (default format), `ibnetdiscover -s -g -f`, and a fabric where
one HCA still has its firmware NodeDescription. To regenerate (Debian: ibsim-utils, opensm,
infiniband-diags, libumad2sim0):

    export IBSIM_SOCKNAME=ibnd-$$ OSM_TMP_DIR=$PWD OSM_CACHE_DIR=$PWD
    export SIM=$(dpkg -L libumad2sim0 | grep 'libumad2sim.so$')
    ibsim -s -n data/ibsim-small.net & IBSIM=$!     # wait for "Network simulator ready."
    LD_PRELOAD=$SIM SIM_HOST="sm01 mlx5_0" opensm -o -s 0 -f $PWD/osm.log   # assigns LIDs
    LD_PRELOAD=$SIM SIM_HOST="sm01 mlx5_0" ibnetdiscover > data/ibnetdiscover-small.txt
    kill $IBSIM
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from policies.errors import InputFormatError
from policies.infiniband.parse_ibnetdiscover import (
    DiscoveredCaPort,
    DiscoveredSwitch,
    DiscoveredTopology,
    parse_ibnetdiscover,
)

DATA = Path(__file__).parent / "data"

# The ports of data/ibnetdiscover-small.txt, in file order (CA records come after the switches).
SMALL_CA_PORTS = (
    DiscoveredCaPort(0x10000C, 0x10000B, "stor01", "mlx5_0", 1, 0x200001, "spine01", 1, 35),
    DiscoveredCaPort(0x10000A, 0x100009, "gpu0003", "mlx5_0", 1, 0x200000, "leaf01", 5, 42),
    DiscoveredCaPort(0x100007, 0x100006, "gpu0002", "mlx5_0", 1, 0x200000, "leaf01", 4, 49),
    DiscoveredCaPort(0x100008, 0x100006, "gpu0002", "mlx5_0", 2, 0x200001, "spine01", 2, 50),
    DiscoveredCaPort(0x100005, 0x100004, "gpu0001", "mlx5_1", 1, 0x200000, "leaf01", 3, 57),
    DiscoveredCaPort(0x100003, 0x100002, "gpu0001", "mlx5_0", 1, 0x200000, "leaf01", 2, 64),
    DiscoveredCaPort(0x100001, 0x100000, "sm01", "mlx5_0", 1, 0x200000, "leaf01", 1, 71),
)

# A trimmed real output: one switch, two single-port CAs. LINES[n - 1] is line n.
LINES = (
    "#",
    "# Topology file: generated on Wed Dec  2 11:24:55 2026",
    "#",
    "# Initiated from node 0000000000100000 port 0000000000100001",
    "",
    "vendid=0x0",
    "devid=0x0",
    "sysimgguid=0x200000",
    "switchguid=0x200000(200000)",
    'Switch\t8 "S-0000000000200000"\t\t# "leaf01" base port 0 lid 2 lmc 0',
    '[1]\t"H-0000000000100000"[1](100001) \t\t# "sm01 mlx5_0" lid 1 4xSDR',
    '[2]\t"H-0000000000100002"[1](100003) \t\t# "gpu0001 mlx5_0" lid 4 4xSDR',
    "",
    "vendid=0x0",
    "devid=0x0",
    "sysimgguid=0x100002",
    "caguid=0x100002",
    'Ca\t1 "H-0000000000100002"\t\t# "gpu0001 mlx5_0"',
    '[1](100003) \t"S-0000000000200000"[2]\t\t# lid 4 lmc 0 "leaf01" lid 2 4xSDR',
    "",
    "vendid=0x0",
    "devid=0x0",
    "sysimgguid=0x100000",
    "caguid=0x100000",
    'Ca\t1 "H-0000000000100000"\t\t# "sm01 mlx5_0"',
    '[1](100001) \t"S-0000000000200000"[1]\t\t# lid 1 lmc 0 "leaf01" lid 2 4xSDR',
)
GPU_CA_LINE = 18
GPU_PORT_LINE = 19
SM_CA_LINE = 25


def document(*changes: tuple[int, str]) -> str:
    """LINES as a document, with line n replaced by text for each (n, text)."""
    lines = list(LINES)
    for number, text in changes:
        lines[number - 1] = text
    return "\n".join(lines) + "\n"


def ca_record(description: str) -> str:
    return f'Ca\t1 "H-0000000000100002"\t\t# "{description}"'


def refusal(text: str) -> InputFormatError:
    with pytest.raises(InputFormatError) as caught:
        parse_ibnetdiscover(text)
    return caught.value


def test_the_real_sample_yields_its_two_switches_in_file_order():
    topology = parse_ibnetdiscover((DATA / "ibnetdiscover-small.txt").read_text())

    assert topology.switches == (
        DiscoveredSwitch(guid=0x200001, name="spine01", ports=8, line=10),
        DiscoveredSwitch(guid=0x200000, name="leaf01", ports=8, line=21),
    )


def test_the_real_sample_yields_every_connected_ca_port_with_its_switch_port():
    topology = parse_ibnetdiscover((DATA / "ibnetdiscover-small.txt").read_text())

    assert topology.ca_ports == SMALL_CA_PORTS


def test_the_router_and_the_unconnected_hca_port_of_the_real_sample_yield_nothing():
    topology = parse_ibnetdiscover((DATA / "ibnetdiscover-small.txt").read_text())

    assert "gw01" not in {port.hostname for port in topology.ca_ports}
    assert [port.port for port in topology.ca_ports if port.hostname == "stor01"] == [1]


def test_the_show_grouping_and_full_variant_yields_the_same_ports():
    text = (DATA / "ibnetdiscover-small-sgf.txt").read_text()
    assert text.startswith("DR path slid 0;")  # -s progress lines really land on stdout

    topology = parse_ibnetdiscover(text)

    without_lines = [dataclasses.replace(port, line=0) for port in topology.ca_ports]
    assert without_lines == [dataclasses.replace(port, line=0) for port in SMALL_CA_PORTS]
    assert [switch.name for switch in topology.switches] == ["spine01", "leaf01"]


def test_a_real_firmware_default_node_description_is_refused_naming_rdma_ndd():
    error = refusal((DATA / "ibnetdiscover-default-nodedesc.txt").read_text())

    assert error.line == 18
    assert "'MT4123 ConnectX6   Mellanox Technologies'" in error.detail
    assert "rdma-ndd" in error.detail


def test_the_trimmed_document_parses_to_both_ca_ports():
    topology = parse_ibnetdiscover(document())

    assert topology == DiscoveredTopology(
        switches=(DiscoveredSwitch(0x200000, "leaf01", 8, 10),),
        ca_ports=(
            DiscoveredCaPort(0x100003, 0x100002, "gpu0001", "mlx5_0", 1, 0x200000, "leaf01", 2, 19),
            DiscoveredCaPort(0x100001, 0x100000, "sm01", "mlx5_0", 1, 0x200000, "leaf01", 1, 26),
        ),
    )


def test_crlf_line_ends_and_a_missing_final_newline_are_accepted():
    topology = parse_ibnetdiscover(document().replace("\n", "\r\n").removesuffix("\r\n"))

    assert [port.line for port in topology.ca_ports] == [19, 26]


def test_tabs_turned_into_spaces_by_a_terminal_copy_are_accepted():
    topology = parse_ibnetdiscover(document().replace("\t", "    "))

    assert [port.hostname for port in topology.ca_ports] == ["gpu0001", "sm01"]


def test_hostnames_are_lower_cased_and_hca_names_kept():
    topology = parse_ibnetdiscover(document((GPU_CA_LINE, ca_record("GPU0001.Example mlx5_0"))))

    assert (topology.ca_ports[0].hostname, topology.ca_ports[0].hca) == (
        "gpu0001.example",
        "mlx5_0",
    )


def test_the_switch_name_comes_from_the_switch_record_even_when_it_comes_later():
    ca_first = "\n".join(LINES[12:] + LINES[4:12]) + "\n"
    stale = ca_first.replace('lmc 0 "leaf01" lid 2', 'lmc 0 "old-name" lid 2')

    topology = parse_ibnetdiscover(stale)

    assert [port.switch_name for port in topology.ca_ports] == ["leaf01", "leaf01"]
    assert topology.switches[0].line == 20


def test_without_a_switch_record_the_name_comes_from_the_port_line():
    topology = parse_ibnetdiscover("\n".join(LINES[12:]) + "\n")

    assert topology.switches == ()
    assert [port.switch_name for port in topology.ca_ports] == ["leaf01", "leaf01"]
    assert [port.switch_guid for port in topology.ca_ports] == [0x200000, 0x200000]


def test_a_vendor_switch_name_with_semicolon_colon_and_slash_is_kept_verbatim():
    name = "MF0;leaf01:MQM8700/U1"
    text = document((10, f'Switch\t8 "S-0000000000200000"\t\t# "{name}" base port 0 lid 2 lmc 0'))

    topology = parse_ibnetdiscover(text)

    assert topology.switches[0].name == name
    assert topology.ca_ports[0].switch_name == name


def test_a_port_linked_to_another_ca_has_no_switch():
    # out_ca_port prints a CA peer as "H-<guid>"[port] followed by " (<peer port GUID>) ".
    line = (
        '[1](100003) \t"H-0000000000100000"[1] (100001) \t\t# lid 4 lmc 0 "sm01 mlx5_0" lid 1 4xSDR'
    )

    port = parse_ibnetdiscover(document((GPU_PORT_LINE, line))).ca_ports[0]

    assert (port.switch_guid, port.switch_name, port.switch_port) == (None, None, None)
    assert (port.hostname, port.guid) == ("gpu0001", 0x100003)


def test_router_records_are_checked_and_skipped():
    router = (
        "",
        "rtguid=0x300000",
        'Rt\t2 "R-0000000000300000"\t\t# "gw01"',
        '[1](300001) \t"S-0000000000200000"[3]\t\t# lid 8 lmc 0 "leaf01" lid 2 4xSDR',
    )

    topology = parse_ibnetdiscover(document() + "\n".join(router) + "\n")

    assert [port.hostname for port in topology.ca_ports] == ["gpu0001", "sm01"]


def test_the_results_are_frozen():
    port = parse_ibnetdiscover(document()).ca_ports[0]

    with pytest.raises(dataclasses.FrozenInstanceError):
        port.hostname = "other"  # type: ignore[misc]


def test_a_switch_record_without_its_description_is_refused_on_its_line():
    error = refusal(document((10, 'Switch\t8 "S-0000000000200000"')))

    assert error.line == 10
    assert "Switch record does not parse" in error.detail


def test_a_ca_record_that_does_not_parse_is_refused_on_its_line():
    error = refusal(document((GPU_CA_LINE, "Ca\t1 H-0000000000100002")))

    assert error.line == GPU_CA_LINE
    assert "Ca record does not parse" in error.detail


def test_a_port_line_that_does_not_parse_is_refused_on_its_line():
    error = refusal(document((GPU_PORT_LINE, '[1](100003) \t"S-0000000000200000"[2]')))

    assert error.line == GPU_PORT_LINE
    assert "port line does not parse" in error.detail


def test_an_unknown_line_is_refused_on_its_line():
    error = refusal(document((7, "devid is unknown")))

    assert error.line == 7


def test_the_ports_report_format_is_refused():
    ports_report = (
        "CA     4  1 0x0000000000100003 4x SDR - SW     2  2 0x0000000000200000 ( 'a' - 'b' )"
    )

    assert refusal(ports_report + "\n").line == 1


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (GPU_CA_LINE, 'Ca\t1 "H-00000000001000zz"\t\t# "gpu0001 mlx5_0"'),
        (
            GPU_PORT_LINE,
            '[1](10000g) \t"S-0000000000200000"[2]\t\t# lid 4 lmc 0 "leaf01" lid 2 4xSDR',
        ),
        (
            GPU_PORT_LINE,
            '[1](100003) \t"S-x000000000200000"[2]\t\t# lid 4 lmc 0 "leaf01" lid 2 4xSDR',
        ),
        (10, 'Switch\t8 "S-00000000002000g0"\t\t# "leaf01" base port 0 lid 2 lmc 0'),
        (11, '[1]\t"H-0000000000100000"[1](1000o1) \t\t# "sm01 mlx5_0" lid 1 4xSDR'),
        (17, "caguid=0x10000z"),
        (9, "switchguid=0x200000(2000-0)"),
        (GPU_CA_LINE, 'Ca\t1 "H-00000000000000000100002"\t\t# "gpu0001 mlx5_0"'),
    ],
)
def test_a_guid_that_is_not_hex_is_refused_on_its_line(number, text):
    error = refusal(document((number, text)))

    assert error.line == number
    assert "is not a hexadecimal number of at most 16 digits" in error.detail


@pytest.mark.parametrize(
    "description",
    [
        "gpu0001",
        "gpu0001 mlx5_0 port1",
        "gpu0001  mlx5_0",
        " gpu0001 mlx5_0",
        "MT4123 ConnectX6 Mellanox Technologies",
        "Mellanox Technologies Aggregation Nodes",
    ],
)
def test_a_ca_description_that_is_not_hostname_and_hca_is_refused(description):
    error = refusal(document((GPU_CA_LINE, ca_record(description))))

    assert error.line == GPU_CA_LINE
    assert "rdma-ndd" in error.detail


@pytest.mark.parametrize(
    ("description", "complaint"),
    [
        ("gpu0001;x mlx5_0", "hostname 'gpu0001;x'"),
        ("gpu0001,x mlx5_0", "hostname 'gpu0001,x'"),
        ("gpu:0001 mlx5_0", "hostname 'gpu:0001'"),
        ("-gpu0001 mlx5_0", "hostname '-gpu0001'"),
        ("g" * 64 + " mlx5_0", "hostname 'ggg"),
        ("gpu0001 mlx5=0", "HCA name 'mlx5=0'"),
        ("gpu0001 mlx5_0#", "HCA name 'mlx5_0#'"),
        ("gpu0001 " + "m" * 33, "HCA name 'mmm"),
        ("gpu0001\tmlx5_0", "is not '<hostname> <hca>'"),
        ("gpu0001 mlx5_0\x0b", "HCA name 'mlx5_0\\x0b'"),
    ],
)
def test_names_that_could_inject_into_an_artifact_are_refused(description, complaint):
    error = refusal(document((GPU_CA_LINE, ca_record(description))))

    assert error.line == GPU_CA_LINE
    assert complaint in error.detail


def test_a_newline_inside_a_description_leaves_a_ca_record_that_does_not_parse():
    text = document((GPU_CA_LINE, ca_record("gpu0001\nSwitch mlx5_0")))

    assert refusal(text).line == GPU_CA_LINE


def test_a_duplicated_port_guid_is_refused_on_its_second_line():
    error = refusal(
        document(
            (26, '[1](100003) \t"S-0000000000200000"[1]\t\t# lid 1 lmc 0 "leaf01" lid 2 4xSDR')
        )
    )

    assert error.line == 26
    assert "port GUID 0x100003 already appears on line 19" in error.detail


def test_two_cas_with_one_node_description_are_refused():
    error = refusal(document((SM_CA_LINE, 'Ca\t1 "H-0000000000100000"\t\t# "GPU0001 mlx5_0"')))

    assert error.line == SM_CA_LINE
    assert "already names the CA on line 18" in error.detail


def test_a_duplicated_switch_record_is_refused():
    error = refusal(document() + "\n".join(LINES[4:12]) + "\n")

    assert error.line == 32
    assert "already has a record on line 10" in error.detail


def test_a_port_number_beyond_the_record_is_refused():
    error = refusal(
        document(
            (
                GPU_PORT_LINE,
                '[2](100003) \t"S-0000000000200000"[2]\t\t# lid 4 lmc 0 "leaf01" lid 2 4xSDR',
            )
        )
    )

    assert error.line == GPU_PORT_LINE
    assert "outside 1..1" in error.detail


def test_a_ca_port_line_without_its_port_guid_is_refused():
    error = refusal(
        document(
            (GPU_PORT_LINE, '[1]\t"S-0000000000200000"[2]\t\t# lid 4 lmc 0 "leaf01" lid 2 4xSDR')
        )
    )

    assert error.line == GPU_PORT_LINE


@pytest.mark.parametrize(("text", "line"), [("", 1), ("\n\n", 2), ("  \n\t\n\n", 3)])
def test_an_empty_document_is_refused(text, line):
    error = refusal(text)

    assert error.line == line
    assert "empty document" in error.detail


def test_a_document_without_any_ca_is_refused_at_its_end():
    error = refusal("\n".join(LINES[:12]) + "\n")

    assert error.line == 12
    assert "no CA port" in error.detail


def test_a_port_line_after_a_blank_line_is_outside_any_record():
    error = refusal(document((GPU_CA_LINE, "")))

    assert error.line == GPU_PORT_LINE
    assert "outside any" in error.detail


def test_a_port_line_at_the_top_is_outside_any_record():
    assert refusal(LINES[GPU_PORT_LINE - 1] + "\n").line == 1


def test_an_overlong_line_is_refused():
    error = refusal(document((2, "# " + "x" * 2000)))

    assert error.line == 2


def test_a_switch_name_with_a_control_character_is_refused():
    text = document(
        (10, 'Switch\t8 "S-0000000000200000"\t\t# "leaf\x0101" base port 0 lid 2 lmc 0')
    )

    assert refusal(text).line == 10


def synthetic(ports: int) -> str:
    """A fabric of single-port CAs, 32 per 64-port leaf, in ibnetdiscover's layout."""
    out = ["#", "# Topology file: generated on Wed Dec  2 11:24:55 2026", "#"]
    for leaf in range(0, ports, 32):
        guid = 0x200000 + leaf
        out += ["", "vendid=0x2c9", "devid=0xd2f0", f"switchguid={guid:#x}({guid:x})"]
        out.append(f'Switch\t64 "S-{guid:016x}"\t\t# "leaf{leaf}" base port 0 lid 1 lmc 0')
        for i in range(leaf, min(leaf + 32, ports)):
            desc = f"gpu{i // 8:05d} mlx5_{i % 8}"
            ca = f'"H-{0x100000 + 2 * i:016x}"[1]({0x100001 + 2 * i:x}) '
            out.append(f'[{i - leaf + 1}]\t{ca}\t\t# "{desc}" lid {i + 2} 4xNDR')
    for i in range(ports):
        guid, leaf = 0x100000 + 2 * i, 0x200000 + i // 32 * 32
        out += ["", "vendid=0x2c9", "devid=0x1021", f"sysimgguid={guid:#x}", f"caguid={guid:#x}"]
        out.append(f'Ca\t1 "H-{guid:016x}"\t\t# "gpu{i // 8:05d} mlx5_{i % 8}"')
        peer = f'"S-{leaf:016x}"[{i % 32 + 1}]'
        out.append(
            f'[1]({guid + 1:x}) \t{peer}\t\t# lid {i + 2} lmc 0 "leaf{i // 32 * 32}" lid 1 4xNDR'
        )
    return "\n".join(out) + "\n"


def test_twenty_thousand_ports_parse_whole():
    # Its time is a benchmark (tests/benchmarks/bench_parsers.py), never asserted here.
    topology = parse_ibnetdiscover(synthetic(20_000))

    assert len(topology.ca_ports) == 20_000
    assert topology.ca_ports[-1].switch_name == "leaf19968"


def test_sharp_aggregation_nodes_are_skipped_not_refused():
    text = document((GPU_CA_LINE, ca_record("Mellanox Technologies Aggregation Node")))

    topology = parse_ibnetdiscover(text)

    assert all(p.hostname != "mellanox" for p in topology.ca_ports)
    assert len(topology.ca_ports) == len(parse_ibnetdiscover(document()).ca_ports) - 1
