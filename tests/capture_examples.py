"""Regenerate the rail-optimised example fabric and capture it from ibsim.

``examples/ib-rail.topology`` is the ibsim net file (``tests/fabricgen.py``'s `RailTree`:
4 leaf groups x 4 rails, 16 GPU nodes of 4 HCAs, storage, telemetry and the SM host on a
services leaf, 2 spines). ``examples/ib-rail.ibnetdiscover`` is what ``ibnetdiscover`` prints on
that fabric from the SM host after OpenSM's first sweep (so every port has a LID, as on a live
fabric); ``examples/ib-east.ibnetdiscover`` was captured the same way from the demo's `FatTree`.

Usage (needs ibsim, OpenSM, infiniband-diags and libumad2sim; see tests/conformance/harness.py)::

    python -m tests.capture_examples
"""

from __future__ import annotations

import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from tests.conformance.harness import IbTools, OpenSM, SimFabric
from tests.fabricgen import RailTree, render

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RAIL_TREE = RailTree(groups=4, rails=4, nodes_per_group=4, spines=2)
RAIL_TOPOLOGY = EXAMPLES / "ib-rail.topology"
RAIL_CAPTURE = EXAMPLES / "ib-rail.ibnetdiscover"

TOPOLOGY_NOTE = """\
# ibsim net file of examples/ib-rail.ibnetdiscover: rendered by tests/fabricgen.py (RailTree),
# simulated by ibsim, swept by OpenSM and captured with ibnetdiscover from sm01 by
#   python -m tests.capture_examples
"""

# The capture only needs LIDs assigned: OpenSM's defaults and the default partition alone.
OPENSM_CONF = "# tests/capture_examples.py: OpenSM defaults\n"
PARTITIONS_CONF = "Default=0x7fff, ipoib : ALL=full ;\n"


def rail_topology() -> str:
    """Return the text of ``examples/ib-rail.topology``."""
    return TOPOLOGY_NOTE + render(RAIL_TREE)


def capture(netfile: Path, sim_host: str) -> str:
    """Run ibsim on ``netfile`` and OpenSM on ``sim_host``; return ibnetdiscover's output."""
    tools = IbTools.locate()
    with tempfile.TemporaryDirectory(prefix="isofabric-capture-") as tmp, ExitStack() as stack:
        workdir = Path(tmp)
        fabric = stack.enter_context(SimFabric(tools, netfile, workdir, sim_host=sim_host))
        opensm = OpenSM(fabric, workdir / "opensm", OPENSM_CONF, PARTITIONS_CONF)
        stack.enter_context(opensm)
        return fabric.ibnetdiscover()


def main() -> int:
    RAIL_TOPOLOGY.write_text(rail_topology(), encoding="ascii")
    RAIL_CAPTURE.write_text(capture(RAIL_TOPOLOGY, RAIL_TREE.mgmt_ca()), encoding="ascii")
    sys.stdout.write(f"wrote {RAIL_TOPOLOGY} and {RAIL_CAPTURE}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
