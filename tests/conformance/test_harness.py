"""Prove the conformance harness with hand-written OpenSM configuration files.

One ibsim fat tree and one OpenSM (M_Key protection, non-default SM/SA keys, QoS) serve the
read-only checks; the SIGHUP check gets its own fabric so the tests stay order-independent.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest

from policies.infiniband.parse_ibnetdiscover import parse_ibnetdiscover
from tests.docs.examples import host_argv
from tests.fabricgen import render

from .conftest import DEMO_TREE, SM_HOST, FabricFactory, OpenSMFactory
from .harness import DEFAULT_PKEY, CaPort, IbTools, OpenSM, SimFabric, full

pytestmark = pytest.mark.conformance

ACME_PKEY = 0x0101
ACME_SL = 3
ACME_HOSTS = ("gpu0001", "gpu0002")

M_KEY = 0x1A2B3C4D5E6F7081
SM_KEY = 0x00000000000005A1
SA_KEY = 0x00000000000005A2

# Mirrors the options the renderer must emit (policies/infiniband/render.py contract).
OPENSM_CONF = f"""\
# hand-written for the harness self-test
qos TRUE
max_op_vls 4
qos_sl2vl 0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3
qos_high_limit 0
qos_vlarb_high 0:0
qos_vlarb_low 0:16,1:64,2:32,3:8
part_enforce both
allow_both_pkeys FALSE
m_key 0x{M_KEY:016x}
m_key_protection_level 2
m_key_lease_period 60
sm_key 0x{SM_KEY:016x}
sa_key 0x{SA_KEY:016x}
"""

QOS_POLICY = f"""\
qos-ulps
    default : 0
    any, pkey 0x{ACME_PKEY:04x} : {ACME_SL}
end-qos-ulps
"""


def partitions_conf(members: list[CaPort]) -> str:
    lines = [
        "Default=0x7fff, ipoib : ALL=limited, ALL_SWITCHES=full, SELF=full ;",
        f"tenant_acme=0x{ACME_PKEY:04x}, ipoib, mtu=4, rate=3, sl={ACME_SL} :",
    ]
    lines += [f"    0x{port.guid:016x}=full," for port in members]
    lines[-1] = lines[-1].rstrip(",") + " ;"
    return "\n".join(lines) + "\n"


@dataclass
class Lab:
    fabric: SimFabric
    sm: OpenSM
    ports: dict[str, CaPort]  # by NodeDescription, LIDs as assigned by OpenSM

    def acme(self) -> list[CaPort]:
        return [p for p in self.ports.values() if p.host in ACME_HOSTS]

    def others(self) -> list[CaPort]:
        return [p for p in self.ports.values() if p.host not in ACME_HOSTS]


def start_lab(fabric: SimFabric, sm_start: OpenSMFactory) -> Lab:
    members = [p for p in fabric.ca_ports() if p.host in ACME_HOSTS]
    sm = sm_start(
        fabric,
        opensm_conf=OPENSM_CONF,
        partitions_conf=partitions_conf(members),
        qos_policy_conf=QOS_POLICY,
    )
    return Lab(fabric, sm, {p.description: p for p in fabric.ca_ports()})


@pytest.fixture(scope="module")
def lab(ib_tools: IbTools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with ExitStack() as stack:
        workdir = tmp_path_factory.mktemp("harness")
        netfile = workdir / "net.fabric"
        netfile.write_text(render(DEMO_TREE))
        fabric = stack.enter_context(SimFabric(ib_tools, netfile, workdir, sim_host=SM_HOST))

        def sm_start(fabric: SimFabric, **configs: str) -> OpenSM:
            return stack.enter_context(OpenSM(fabric, workdir / "opensm", **configs))

        yield start_lab(fabric, sm_start)


def test_ibnetdiscover_reports_generated_names_and_lids(lab: Lab) -> None:
    assert sorted(lab.ports) == sorted(DEMO_TREE.ca_names())
    assert {p.switch for p in lab.ports.values()} == set(DEMO_TREE.leaf_names())
    lids = [p.lid for p in lab.ports.values()]
    assert all(lids) and len(set(lids)) == len(lids)


def test_sm_reads_back_keys_from_its_options(lab: Lab) -> None:
    assert lab.sm.keys.m_key == M_KEY
    assert lab.sm.keys.sa_key == SA_KEY


def test_pkey_tables(lab: Lab) -> None:
    diag = lab.sm.diag
    for port in lab.acme():
        assert sorted(diag.pkeys(port.lid)) == [DEFAULT_PKEY, full(ACME_PKEY)], port
    for port in lab.others():
        expected = [full(DEFAULT_PKEY)] if port.description == SM_HOST else [DEFAULT_PKEY]
        assert diag.pkeys(port.lid) == expected, port


def test_sa_pkey_table_record_needs_and_gets_the_sa_key(lab: Lab) -> None:
    port = lab.acme()[0]
    assert lab.sm.diag.sa_pkeys(port.lid) == lab.sm.diag.pkeys(port.lid)


def test_path_records_follow_partition_and_qos_policy(lab: Lab) -> None:
    diag = lab.sm.diag
    a, b = lab.acme()[:2]
    stranger = next(p for p in lab.others() if p.description != SM_HOST)

    record = diag.path(a.lid, b.lid, full(ACME_PKEY))
    assert record is not None
    assert (record.pkey, record.sl) == (full(ACME_PKEY), ACME_SL)
    assert diag.path(a.lid, stranger.lid, full(ACME_PKEY)) is None
    # The policy's rule needs the P_Key in the query; otherwise "default : 0" wins over sl=3.
    unkeyed = diag.path(a.lid, b.lid)
    assert unkeyed is not None and unkeyed.sl == 0


def test_opensm_accepted_the_configuration(lab: Lab) -> None:
    assert lab.sm.config_errors() == []
    assert lab.sm.option_errors() == []


def test_sighup_reloads_partitions(
    sim_fabric_factory: FabricFactory, opensm_factory: OpenSMFactory
) -> None:
    lab = start_lab(sim_fabric_factory(), opensm_factory)
    leaving = [p for p in lab.acme() if p.host == ACME_HOSTS[1]]
    staying = [p for p in lab.acme() if p.host == ACME_HOSTS[0]]

    lab.sm.install(OpenSM.PARTITIONS, partitions_conf(staying))
    since = lab.sm.reload()

    diag = lab.sm.diag
    assert all(full(ACME_PKEY) in diag.pkeys(p.lid) for p in staying)
    assert all(diag.pkeys(p.lid) == [DEFAULT_PKEY] for p in leaving)
    assert lab.sm.config_errors(since) == []


def test_the_readmes_ibnetdiscover_line_captures_what_the_import_parses(
    lab: Lab, tmp_path: Path
) -> None:
    """README.md's ``sh {.host #ibnetdiscover}`` block, run on the simulated fabric."""
    [documented] = host_argv("README.md", "ibnetdiscover")
    assert documented == ["ibnetdiscover", ">", "fabric.txt"]
    argv = [lab.fabric.tools.ibnetdiscover, *documented[1:]]

    done = subprocess.run(
        shlex.join(argv).replace("'>'", ">"), shell=True, cwd=tmp_path,
        env=lab.fabric.client_env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    topology = parse_ibnetdiscover((tmp_path / "fabric.txt").read_text())
    assert {port.guid for port in topology.ca_ports} == {p.guid for p in lab.ports.values()}


def test_opensm_runs_and_rereads_its_files_as_the_by_hand_steps_say(lab: Lab) -> None:
    """docs/operators/deploy-opensm.md's ``sh {.host #opensm-by-hand}`` block, in the lab.

    The lab's OpenSM starts in its conf dir with the page's options (and lab-only ones after
    them: log file, debug level, console, dump dir); the page's HUP line, with this OpenSM's PID
    for ``$(pidof opensm)``, makes it sweep with the files again.
    """
    start, hup = host_argv("docs/operators/deploy-opensm.md", "opensm-by-hand")
    assert lab.sm.proc is not None
    running = [Path(str(word)).name for word in cast(list[str], lab.sm.proc.args)]

    assert running[: len(start)] == start
    assert hup == ["kill", "-HUP", "$(pidof opensm)"]
    seen = lab.sm.subnet_up_count()
    line = shlex.join(hup).replace("'$(pidof opensm)'", str(lab.sm.proc.pid))
    subprocess.run(line, shell=True, check=True, timeout=30)
    lab.sm.wait_for_subnet_up(seen)
    assert lab.sm.config_errors() == []
