"""The FRR adapter with a fake frr-reload.py/vtysh (the real daemons run in the lab tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.frr import FrrError, FrrLeaf, FrrTools
from tests.agent.sonic_fakes import FakeDaemons

OLD = "router bgp 65101\n neighbor Ethernet248 interface remote-as external\nexit\n"
NEW = OLD + "vrf Vrf5001\n vni 5001\nexit-vrf\n"


def leaf(tmp_path: Path, daemons: FakeDaemons) -> FrrLeaf:
    conf = tmp_path / "frr.conf"
    conf.write_text(OLD)
    tools = FrrTools("/opt/frr-reload.py", "/opt/frr/bin/vtysh", "leaf01")
    return FrrLeaf(conf, tools, run=daemons)


def test_deploy_reloads_and_reads_back(tmp_path: Path) -> None:
    daemons = FakeDaemons(running=OLD)
    frr = leaf(tmp_path, daemons)
    deployed = frr.deploy(NEW)
    assert deployed.changed and "vni 5001" in deployed.delta
    assert frr.current() == NEW and (tmp_path / "frr.conf.prev").read_text() == OLD
    step, test, reload, show = daemons.calls
    # The new VRF alone first (FRR 8.4 loses a new VRF's VNI otherwise), then the whole file.
    assert daemons.loaded == ["vrf Vrf5001\n vni 5001\nexit-vrf\n!\n" + OLD, NEW]
    assert step[1] == "--reload"
    assert test[:2] == ["/opt/frr-reload.py", "--test"] and reload[1] == "--reload"
    for argv in (step, test, reload):
        assert argv[argv.index("--pathspace") + 1] == "leaf01"
        assert argv[argv.index("--bindir") + 1] == "/opt/frr/bin"
        assert argv[argv.index("--confdir") + 1] == str(tmp_path)
        assert argv[-1] == str(tmp_path / "frr.conf")
    assert "--stdout" in reload
    assert show == ["/opt/frr/bin/vtysh", "-N", "leaf01", "-c", "show running-config"]


def test_a_lost_line_is_a_mismatch_and_revert_reloads_the_previous_file(tmp_path: Path) -> None:
    daemons = FakeDaemons(running=OLD, lose=" vni 5001\n")
    frr = leaf(tmp_path, daemons)
    with pytest.raises(FrrError) as raised:
        frr.deploy(NEW)
    assert raised.value.differences == ("vrf Vrf5001 > vni 5001",)
    assert frr.revert(deployed_changed=True) == ""
    assert frr.current() == OLD
    assert daemons.running.endswith(OLD)


def test_a_failed_reload_raises(tmp_path: Path) -> None:
    frr = leaf(tmp_path, FakeDaemons(fail_reload=True))
    with pytest.raises(FrrError, match="exited 1"):
        frr.deploy(NEW)


def test_an_unchanged_file_is_reloaded_in_place(tmp_path: Path) -> None:
    daemons = FakeDaemons(running="")
    frr = leaf(tmp_path, daemons)
    assert not frr.deploy(OLD).changed
    assert not (tmp_path / "frr.conf.prev").exists()
    assert frr.differences(OLD) == []
