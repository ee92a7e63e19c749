"""Tool-free checks of the fat-tree generator and the harness's output parsers."""

from __future__ import annotations

import dataclasses

import pytest

from tests.benchmarks.ibsim_fabric import BENCH_TREE
from tests.fabricgen import FatTree, main, render

from .harness import SmKeys, parse_path_records, parse_pkey_table, parse_ports_report

PORTS_REPORT = """\
CA 23  1 0x0000000000100025 4x SDR - SW  3  9 0x0000000000200001 ( 'stor02 mlx5_0' - 'leaf02' )
SW  3 36 0x0000000000200001 4x SDR - SW  6  2 0x0000000000200003 ( 'leaf02' - 'spine02' )
CA  1  1 0x0000000000100001 4x SDR - SW  2 10 0x0000000000200000 ( 'sm01 mlx5_0' - 'leaf01' )
"""

PKEYS = """\
   0: 0x7fff 0x8101 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000
   8: 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000
64 pkeys capacity for this port
"""

PATH_RECORD = """\
PathRecord dump:
\t\tservice_id..............0x0000000000000000
\t\tdlid....................7
\t\tslid....................5
\t\tpkey....................0x8101
\t\tsl......................0x3
\t\tmtu.....................0x84
\t\trate....................0x83
"""


def test_generator_is_deterministic_and_names_cas_host_hca() -> None:
    tree = FatTree(leaves=2, spines=2, gpu_nodes=8, hcas_per_gpu=2, storage_nodes=2)
    text = render(tree)
    assert text == render(tree)
    assert '"gpu0001 mlx5_0"' in text and '"gpu0008 mlx5_1"' in text
    assert '"stor02 mlx5_0"' in text and 'Switch\t36 "spine02"' in text
    assert text.index('Hca\t1 "sm01 mlx5_0"') < text.index('Hca\t1 "gpu0001 mlx5_0"')


def test_generator_wires_every_ca_once_and_every_leaf_to_every_spine() -> None:
    tree = FatTree(leaves=3, spines=2, gpu_nodes=4, hcas_per_gpu=2, storage_nodes=1)
    text = render(tree)
    for ca in tree.ca_names():
        assert text.count(f'"{ca}"[1]') == 1  # the one leaf-side line naming it
    for leaf in tree.leaf_names():
        for spine in tree.spine_names():
            assert f'"{spine}"' in text.split(f'"{leaf}"\n', 1)[1].split("\n\n", 1)[0]


def test_generator_rejects_a_radix_that_cannot_fit() -> None:
    with pytest.raises(ValueError, match="radix"):
        render(FatTree(leaves=1, gpu_nodes=20, radix=36))


def test_generator_spines_may_have_more_ports_than_the_leaves() -> None:
    tree = FatTree(leaves=40, spines=2, gpu_nodes=20, hcas_per_gpu=2, storage_nodes=0)
    with pytest.raises(ValueError, match="spine radix 36 < 40 leaves"):
        render(tree)

    text = render(dataclasses.replace(tree, spine_radix=64))

    assert 'Switch\t64 "spine02"' in text and 'Switch\t36 "leaf40"' in text
    assert '[40]\t"leaf40"[35]' in text  # leaf l on spine port l, from the leaf's top ports


def test_the_benchmark_tree_has_1024_gpu_hcas_on_non_blocking_leaves() -> None:
    tree = BENCH_TREE
    text = render(tree)

    assert len(tree.gpu_cas()) == 1024 and text.count("\nHca\t") == len(tree.ca_names())
    assert text.count("\nSwitch\t") == tree.leaves + tree.spines
    assert -(-len(tree.ca_names()) // tree.leaves) <= tree.spines == tree.radix // 2


def test_generator_cli_writes_the_same_text(tmp_path) -> None:
    out = tmp_path / "net"
    assert main(["--gpu-nodes", "2", "--leaves", "1", "--spines", "1", "-o", str(out)]) == 0
    assert out.read_text() == render(FatTree(gpu_nodes=2, leaves=1, spines=1))


def test_ports_report_keeps_ca_lines_only() -> None:
    ports = parse_ports_report(PORTS_REPORT)
    assert [(p.description, p.guid, p.lid, p.switch, p.switch_port) for p in ports] == [
        ("stor02 mlx5_0", 0x100025, 23, "leaf02", 9),
        ("sm01 mlx5_0", 0x100001, 1, "leaf01", 10),
    ]
    assert (ports[0].host, ports[0].hca) == ("stor02", "mlx5_0")


def test_pkey_table_drops_empty_entries() -> None:
    assert parse_pkey_table(PKEYS) == [0x7FFF, 0x8101]


def test_path_record_and_no_path() -> None:
    [record] = parse_path_records(PATH_RECORD)
    assert (record.slid, record.dlid, record.pkey, record.sl) == (5, 7, 0x8101, 3)
    assert parse_path_records("") == []


def test_keys_come_from_opensm_conf() -> None:
    keys = SmKeys.from_opensm_conf("m_key 0x00000000000000ab  # c\nsa_key 0x5\nsm_key 0x9\n")
    assert keys == SmKeys(m_key=0xAB, sa_key=5)
    assert SmKeys.from_opensm_conf("m_key 0x0000000000000000\n").m_key is None
