"""The rendered opensm.conf makes OpenSM flush its log, and OpenSM 3.3.23 accepts every option.

A deploy agent waits for the first ``SUBNET UP`` after a SIGHUP in OpenSM's log. OpenSM buffers
its log unless ``force_log_flush`` is on; the harness normally forces it with ``-d 2``, so here
OpenSM runs without that flag and the rendered option alone must make the lines appear.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from policies.infiniband.render import DEFAULT_STATEMENT, SubnetManagerKeys, render_opensm_options
from tests.policies.snapshots import two_tenant_snapshot

from .conftest import FabricFactory
from .harness import HarnessError, OpenSM

pytestmark = pytest.mark.conformance

KEYS = SubnetManagerKeys(m_key=0x1122334455667788, sm_key=0x0A0B, sa_key=0x2122)


@dataclass
class UnflushedOpenSM(OpenSM):
    """OpenSM without the harness's ``-d 2``: the log is flushed only if opensm.conf says so."""

    def _argv(self) -> list[str]:
        argv = super()._argv()
        at = argv.index("-d")
        assert argv[at + 1] == "2"
        return argv[:at] + argv[at + 2 :]


def test_rendered_options_flush_the_log_through_start_and_sighup(
    sim_fabric_factory: FabricFactory, tmp_path
) -> None:
    fabric = sim_fabric_factory()
    options = render_opensm_options(two_tenant_snapshot(), KEYS)
    assert "force_log_flush TRUE" in options.splitlines()
    sm = UnflushedOpenSM(fabric, tmp_path / "opensm", options, DEFAULT_STATEMENT + "\n")
    assert "-d" not in sm._argv()

    with sm:  # start() waits for the first SUBNET UP in the log file
        assert sm.option_errors() == []
        offset = sm.reload()  # the SIGHUP rescan keeps the option: the next sweep shows too
        assert "SUBNET UP" in sm.log_text()[offset:]
        assert sm.config_errors() == []


def test_control_without_the_option_the_sweep_stays_in_the_buffer(
    sim_fabric_factory: FabricFactory, tmp_path
) -> None:
    # Shows the test above can fail: the same OpenSM without force_log_flush logs its
    # SUBNET UP (well under one stdio buffer of log) only when the buffer fills or it exits.
    fabric = sim_fabric_factory()
    options = render_opensm_options(two_tenant_snapshot(), KEYS)
    unflushed = options.replace("force_log_flush TRUE\n", "")
    sm = UnflushedOpenSM(fabric, tmp_path / "opensm", unflushed, DEFAULT_STATEMENT + "\n")

    with pytest.raises(HarnessError, match="SUBNET UP"):
        sm.start(timeout=2.0)  # stops OpenSM when the wait fails
