"""The agent's FRR adapter (agent/frr.py) against real zebra and bgpd in an FRR pathspace.

The daemons start with ``-N <pathspace>`` (no network namespace needed: the adapter's concern is
frr-reload.py's and vtysh's command lines); the adapter deploys a file with the real
``frr-reload.py --test``/``--reload`` and reads ``show running-config`` back, then a file whose
read-back differs is reported and reverted. Skips without root or FRR, unless
ISOFABRIC_REQUIRE_CONFORMANCE=1.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.frr import FrrError, FrrLeaf, FrrTools

from .conftest import skip_or_fail
from .harness import _spawn, stop_process, wait_until

pytestmark = pytest.mark.conformance

DAEMONS = Path("/usr/lib/frr")
RUN_DIR = Path("/var/run/frr")
FIRST = """frr defaults datacenter
!
router bgp 65101
 bgp router-id 10.1.0.1
 neighbor fabric peer-group
 neighbor fabric remote-as external
 !
 address-family l2vpn evpn
  neighbor fabric activate
  advertise-all-vni
 exit-address-family
exit
!
"""
SECOND = FIRST.replace(" bgp router-id 10.1.0.1\n", " bgp router-id 10.1.0.1\n timers bgp 10 30\n")


@pytest.fixture(scope="module")
def pathspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reload, vtysh = DAEMONS / "frr-reload.py", shutil.which("vtysh")
    if os.geteuid() != 0 or vtysh is None or not os.access(reload, os.X_OK):
        skip_or_fail("needs root, vtysh and frr-reload.py")
    name = f"isofabric-agent-{secrets.token_hex(3)}"
    work = tmp_path_factory.mktemp("frr")
    sockets = RUN_DIR / name
    sockets.mkdir(parents=True)
    shutil.chown(sockets, "frr", "frr")
    (work / "empty.conf").write_text("")
    work.chmod(0o755)
    procs = []
    try:
        for daemon, ready in (("zebra", "zserv.api"), ("bgpd", "bgpd.vty")):
            argv = [str(DAEMONS / daemon), "-N", name, "-u", "frr", "-g", "frr", "-P", "0"]
            argv += ["-f", str(work / "empty.conf")]
            procs.append(_spawn(argv, env=dict(os.environ), log=work / f"{daemon}.out", cwd=work))
            wait_until((sockets / ready).exists, timeout=30, what=daemon)
        yield name
    finally:
        for proc in reversed(procs):
            stop_process(proc)
        shutil.rmtree(sockets, ignore_errors=True)


def test_deploy_reload_read_back_and_revert(pathspace: str, tmp_path: Path) -> None:
    conf = tmp_path / "frr.conf"
    leaf = FrrLeaf(conf, FrrTools(vtysh=shutil.which("vtysh") or "vtysh", pathspace=pathspace))
    deployed = leaf.deploy(FIRST)
    assert deployed.changed and "advertise-all-vni" in deployed.delta
    assert leaf.differences(FIRST) == []

    assert leaf.deploy(SECOND).changed
    assert "timers bgp 10 30" in leaf.running()
    assert leaf.revert(deployed_changed=True) == ""  # FIRST is back, running and read back
    assert conf.read_text() == FIRST and "timers bgp 10 30" not in leaf.running()


def test_a_file_frr_does_not_run_as_written_is_a_mismatch(pathspace: str, tmp_path: Path) -> None:
    leaf = FrrLeaf(
        tmp_path / "frr.conf", FrrTools(vtysh=shutil.which("vtysh") or "vtysh", pathspace=pathspace)
    )
    leaf.deploy(FIRST)
    # 3/9 are the datacenter profile's default timers: bgpd never prints them, so the line is
    # never in the running config as written (as with `no bgp ebgp-requires-policy`, issue 16).
    odd = FIRST.replace(" bgp router-id 10.1.0.1\n", " bgp router-id 10.1.0.1\n timers bgp 3 9\n")
    with pytest.raises(FrrError) as raised:
        leaf.deploy(odd)
    assert any("timers bgp 3 9" in line for line in raised.value.differences)
