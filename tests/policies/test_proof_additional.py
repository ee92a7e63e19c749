"""Proofs and tenant file views of a tenant with additional partitions and virtual GUIDs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from policies.artifacts import Artifact
from policies.evidence.claims import claims_for
from policies.evidence.proofs import build_statement, check_claims
from policies.evidence.tenant_files import tenant_file_view
from policies.infiniband.model import IbSnapshot, Member, Partition, VirtualGuid, format_guid
from policies.infiniband.render import PARTITIONS_PATH, render_partitions_conf
from policies.infiniband.verify import verify_isolation
from policies.model import Owner
from tests.policies.snapshots import member, two_tenant_snapshot

VF_ACME, VF_GLOBEX = 0x0A00000000000001, 0x0B00000000000001


def with_additional() -> IbSnapshot:
    base = two_tenant_snapshot()
    extra = (
        Partition(
            0x0103, Owner.tenant("acme"), (member("gpu0001"), Member(VF_ACME, True)), label="data"
        ),
        Partition(0x0104, Owner.tenant("acme"), (Member(VF_ACME, False),), label="vf"),
        Partition(0x0105, Owner.tenant("globex"), (Member(VF_GLOBEX, True),), label="x"),
    )
    bound = (VirtualGuid(VF_ACME, "acme"), VirtualGuid(VF_GLOBEX, "globex"))
    snapshot = replace(base, partitions=(*base.partitions, *extra), virtual_guids=bound)
    assert verify_isolation(snapshot).holds
    return snapshot


def statement(snapshot: IbSnapshot, view: str) -> dict[str, Any]:
    text = render_partitions_conf(snapshot).encode()
    subjects, claims = claims_for(snapshot, "acme", (Artifact(PARTITIONS_PATH, text),), view)  # type: ignore[arg-type]
    predicate = {"tenant": "acme", "kind": "infiniband", "verdict": {"holds": True}} | claims
    return build_statement(subjects, predicate)


@pytest.mark.parametrize("view", ["full", "tenant"])
def test_the_claims_cover_every_partition_the_tenant_owns_and_verify(view):
    snapshot = with_additional()
    document = statement(snapshot, view)

    predicate = document["predicate"]
    segments = [s["segment"] for s in predicate["segments"]]
    assert segments == ["0x0100", "0x0101", "0x0103", "0x0104"]  # not globex's 0x0105
    assert predicate["ownership"][format_guid(VF_ACME)] == "tenant:acme"
    assert format_guid(VF_ACME) not in predicate["endpoints"]  # endpoints are ports
    text = render_partitions_conf(snapshot).encode()
    reach = check_claims(document, {PARTITIONS_PATH: text})
    assert ("tenant:acme", "0x0103") in reach and ("tenant:acme", "0x0104") not in reach


def test_unchanged_without_additional_partitions():
    base = two_tenant_snapshot()

    assert statement(replace(base, virtual_guids=()), "full") == statement(base, "full")


def test_a_tenant_sees_its_virtual_guids_lines_and_not_another_tenants():
    snapshot = with_additional()
    text = render_partitions_conf(snapshot)

    shown = tenant_file_view([snapshot], "acme").project(text)

    assert "part_acme_vf=0x0104" in shown and format_guid(VF_ACME) in shown
    assert "part_globex_x" not in shown and format_guid(VF_GLOBEX) not in shown
