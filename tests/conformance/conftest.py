"""Fixtures for the conformance suite: tools, ibsim fat trees, OpenSM daemons.

Tests skip when ibsim / OpenSM / infiniband-diags are missing, unless
``ISOFABRIC_REQUIRE_CONFORMANCE=1`` is set (lab CI runners), in which case they fail.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import NoReturn

import pytest

from tests.fabricgen import FatTree, render

from .harness import IbTools, OpenSM, SimFabric, ToolsMissingError

REQUIRE_ENV = "ISOFABRIC_REQUIRE_CONFORMANCE"

# Small enough for well under a second per OpenSM start, big enough for 3 tenants + storage.
DEMO_TREE = FatTree(leaves=2, spines=2, gpu_nodes=8, hcas_per_gpu=2, storage_nodes=2)
SM_HOST = DEMO_TREE.mgmt_ca()


def conformance_required() -> bool:
    return os.environ.get(REQUIRE_ENV, "").strip().lower() in {"1", "true", "yes"}


def skip_or_fail(reason: str) -> NoReturn:
    """Skip, or fail when the environment demands that the conformance suite runs."""
    if conformance_required():
        pytest.fail(f"{reason} (and {REQUIRE_ENV}=1 is set)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def ib_tools() -> IbTools:
    try:
        return IbTools.locate()
    except ToolsMissingError as exc:
        skip_or_fail(str(exc))


FabricFactory = Callable[..., SimFabric]
OpenSMFactory = Callable[..., OpenSM]


@pytest.fixture
def sim_fabric_factory(
    ib_tools: IbTools, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FabricFactory]:
    """``start(tree=DEMO_TREE, sim_host=SM_HOST)`` -> running ibsim, stopped by PID at teardown."""
    with ExitStack() as stack:

        def start(tree: FatTree = DEMO_TREE, sim_host: str = SM_HOST) -> SimFabric:
            workdir = tmp_path_factory.mktemp("ibsim")
            netfile = workdir / "net.fabric"
            netfile.write_text(render(tree))
            return stack.enter_context(SimFabric(ib_tools, netfile, workdir, sim_host=sim_host))

        yield start


@pytest.fixture
def opensm_factory(
    sim_fabric_factory: FabricFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OpenSMFactory]:
    """``start(fabric, opensm_conf=..., partitions_conf=..., qos_policy_conf=...)`` -> OpenSM.

    Depends on ``sim_fabric_factory`` so every OpenSM stops before its simulator does.
    """
    with ExitStack() as stack:

        def start(fabric: SimFabric, **configs: str) -> OpenSM:
            confdir = tmp_path_factory.mktemp("opensm")
            return stack.enter_context(OpenSM(fabric, confdir, **configs))

        yield start
