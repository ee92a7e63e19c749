"""Observed state end to end: a hand-edited partitions.conf on real OpenSM, collected and judged.

Flow: onboard the demo fabric through the API, render the OpenSM files, put one acme port into
globex's partition by hand, run OpenSM on ibsim with that file, read the live P_Key tables with
the collector (cli/collect.py, the code behind ``isofabric collect ib``) and POST them as an
observation: the drift names the port and the cross-tenant pair. A config audit of the same
file reports it too, and a file with a GUID missing its ``0x`` is reported critical.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cli.collect import Tools, collect_ib
from tests.builders import LOCAL_URL
from tests.keys import keys_create

from .conftest import FabricFactory, OpenSMFactory
from .harness import OpenSM, full
from .test_opensm_end_to_end import (
    FABRIC,
    TENANTS,
    Api,
    fetch_artifacts,
    ingest_fabric,
    onboard_tenants,
    ports_of,
)

pytestmark = pytest.mark.conformance

INTRUDER, VICTIM = "acme", "globex"


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    monkeypatch.setenv("ISOFABRIC_DATABASE_URL", f"sqlite:///{tmp_path / 'isofabric.db'}")
    keys_create(f"sqlite:///{tmp_path / 'isofabric.db'}")  # the OpenSM secret opensm.conf needs
    from api.app import create_app

    with TestClient(
        create_app(), client=("127.0.0.1", 50000), base_url=LOCAL_URL
    ) as client:  # open mode: loopback
        yield Api(client)


def add_member(partitions_conf: str, key: int, guid: int) -> str:
    """Hand-edit: append `guid` as a full member to the statement of partition `key`."""
    lines = partitions_conf.splitlines()
    start = next(i for i, line in enumerate(lines) if f"=0x{key:04x}" in line.split(":")[0])
    end = next(i for i in range(start, len(lines)) if lines[i].rstrip().endswith(";"))
    lines[end] = lines[end].rstrip()[:-1].rstrip() + ","
    lines.insert(end + 1, f"    0x{guid:016x}=full ;")
    return "\n".join(lines) + "\n"


def audit(api: Api, text: str) -> Any:
    return api.call(
        "POST",
        f"/v1/fabrics/{FABRIC}/audits?format=partitions",
        content=text,
        headers={"Content-Type": "text/plain"},
    )


def test_collected_tables_show_a_hand_edited_cross_tenant_membership(
    api: Api, sim_fabric_factory: FabricFactory, opensm_factory: OpenSMFactory
) -> None:
    fabric = sim_fabric_factory()
    ingest_fabric(api, fabric.ibnetdiscover())
    keys = onboard_tenants(api)
    tenant_ports = {t: ports_of(api, t) for t in TENANTS}
    intruder = min(tenant_ports[INTRUDER])
    files = fetch_artifacts(api)
    edited = add_member(files[OpenSM.PARTITIONS], keys[VICTIM], intruder)

    sm = opensm_factory(
        fabric,
        opensm_conf=files[OpenSM.OPTIONS],
        partitions_conf=edited,
        qos_policy_conf=files[OpenSM.QOS_POLICY],
    )
    assert sm.config_errors() == []
    document = collect_ib(
        m_key=sm.keys.m_key,
        env=fabric.client_env(),
        tools=Tools(fabric.tools.ibnetdiscover, fabric.tools.smpquery),
    )

    assert document["kind"] == "infiniband" and "Switch" in document["ibnetdiscover"]
    by_guid = {int(p["guid"], 16): p for p in document["ports"]}
    assert set(by_guid) >= set().union(*tenant_ports.values())
    victim_key = f"0x{full(keys[VICTIM]):04x}"
    assert victim_key in by_guid[intruder]["pkeys"]

    report = api.call("POST", f"/v1/fabrics/{FABRIC}/observations", json=document)

    assert report["holds"] is False
    [drifted] = report["ports"]
    assert drifted["guid"] == f"0x{intruder:016x}"
    assert drifted["owner"] == f"tenant:{INTRUDER}"
    assert drifted["unexpected"] == [victim_key] and drifted["missing"] == []
    pairs = {
        (c["rule"], frozenset((c["a"]["owner"], c["b"]["owner"])))
        for c in report["counterexamples"]
    }
    assert pairs == {
        ("cross-tenant-reachability", frozenset({f"tenant:{INTRUDER}", f"tenant:{VICTIM}"}))
    }

    audited = audit(api, edited)
    assert audited["holds"] is False
    assert [d["added"] for d in audited["drift"]] == [[f"0x{intruder:016x}"]]
    assert [c["rule"] for c in audited["counterexamples"]] == ["cross-tenant-reachability"]

    research = next(g for g in sorted(tenant_ports["research"]) if f"{g:x}"[-1] in "abcdef")
    broken = files[OpenSM.PARTITIONS].replace(f"0x{research:016x}", f"{research:016x}")
    findings = audit(api, broken)["findings"]
    assert ("guid-without-0x", "critical") in {(f["code"], f["severity"]) for f in findings}
