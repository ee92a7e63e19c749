"""Conformance: a peering accepted through the service (issue 13, item 4) in FRR's own checkers.

On roce-west (tests/builders.py `uow_onboard_roce`), acme's nodes go to a second internal tenant,
labs; research requests a peering with labs and labs accepts it. Each leaf's frr.conf as the
service renders it makes research's VRF import labs' L3VNI route target and labs' VRF import
research's, and passes ``vtysh -C`` and bgpd's dry run (see test_frr.py); once the peering ends,
the imports are gone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.roce.model import route_target
from policies.roce.parse_frr import parse_frr_conf
from tenancy.schemas import AllocationCreate, TenantCreate
from tenancy.schemas.peerings import PeeringCreate
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, peerings, tenants
from tests.builders import ROCE_FABRIC, ROCE_FABRIC_SPEC, ROCE_LEAVES, RoceOnboarded
from tests.builders import uow_artifact_text as artifact

from .test_frr import FrrTools, frr, unexpected, write

pytestmark = pytest.mark.conformance

__all__ = ["frr"]  # the fixture, shared with test_frr.py

RT_ASN = ROCE_FABRIC_SPEC["rt_asn"]


def peer_research_with_labs(uow: UnitOfWork, onboarded: RoceOnboarded) -> tuple[str, int, int]:
    """labs (internal) on acme's former nodes; research's accepted peering with it.

    Returns the peering's id and the L3VNIs of research and labs.
    """
    acme = onboarded.allocation_ids["acme"]
    allocations.release_allocation(uow, tenant_name="acme", allocation_id=acme)
    tenants.create_tenant(uow, spec=TenantCreate(name="labs", kind="internal"))
    labs = allocations.allocate(
        uow, tenant_name="labs", spec=AllocationCreate(fabric=ROCE_FABRIC, count=2)
    )
    request = peerings.request_peering(
        uow, tenant_name="research", spec=PeeringCreate(fabric=ROCE_FABRIC, peer="labs")
    )
    peerings.accept_peering(uow, tenant_name="labs", peering_id=request.id)
    assert labs.segment is not None and labs.segment.kind == "roce_vrf"
    return request.id, int(onboarded.segments["research"]["l3vni"]), labs.segment.l3vni


def vrf_imports(text: str) -> dict[str, set[str]]:
    """The route targets each VRF's BGP instance imports, by VRF name (``Vrf50002``)."""
    parsed = parse_frr_conf(text)
    return {bgp.vrf: set(bgp.rt_imports) for bgp in parsed.bgp if bgp.vrf is not None}


def peer_imports(text: str, research: int, labs: int) -> tuple[bool, bool]:
    """Whether research's VRF imports labs' RT, and labs' VRF research's."""
    imports = vrf_imports(text)
    return (
        route_target(RT_ASN, labs) in imports[f"Vrf{research}"],
        route_target(RT_ASN, research) in imports[f"Vrf{labs}"],
    )


@pytest.mark.parametrize("leaf", ROCE_LEAVES)
def test_a_peerings_imports_pass_frrs_checkers_and_go_when_it_ends(
    frr: FrrTools, uow: UnitOfWork, roce_onboarded: RoceOnboarded, tmp_path: Path, leaf: str
) -> None:
    peering_id, research, labs = peer_research_with_labs(uow, roce_onboarded)
    path = f"frr/{leaf}/frr.conf"

    peered = write(tmp_path, f"{leaf}.conf", artifact(uow, ROCE_FABRIC, path))

    assert peer_imports(peered.read_text(), research, labs) == (True, True)
    done = frr.vtysh_check(peered)
    assert done.returncode == 0, done.stdout + done.stderr
    assert unexpected(frr.bgpd_dry_run(peered)) == []

    peerings.end_peering(uow, tenant_name="labs", peering_id=peering_id)

    assert peer_imports(artifact(uow, ROCE_FABRIC, path), research, labs) == (False, False)
