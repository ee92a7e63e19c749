"""Use the policy engine as a library: parse ibnetdiscover output, plan tenant partitions,
verify isolation and print the partitions.conf OpenSM would get. No database, no service.

    python examples/verify_fabric.py examples/ib-east.ibnetdiscover
"""

from __future__ import annotations

import sys
from pathlib import Path

from policies.infiniband.intent import plan_partitions
from policies.infiniband.model import IbPort, IbSettings, IbSnapshot, QosClass
from policies.infiniband.parse_ibnetdiscover import parse_ibnetdiscover
from policies.infiniband.render import render_partitions_conf
from policies.infiniband.verify import verify_isolation
from policies.model import Grant, Node, NodeRole, Owner

HOLDERS = {
    "gpu0001": Owner.tenant("acme"),
    "gpu0002": Owner.tenant("acme"),
    "gpu0003": Owner.tenant("globex"),
    "stor01": Owner.service("storage"),
}
ROLES = {"sm01": NodeRole.MANAGEMENT, "stor01": NodeRole.STORAGE, "stor02": NodeRole.STORAGE}


def build_snapshot(ibnetdiscover_text: str) -> IbSnapshot:
    topology = parse_ibnetdiscover(ibnetdiscover_text)
    ports = tuple(
        IbPort(p.guid, p.hostname, p.hca, p.port, p.switch_name, p.switch_port)
        for p in topology.ca_ports
    )
    hosts = sorted({p.node for p in ports})
    nodes = tuple(
        Node(h, ROLES.get(h, NodeRole.COMPUTE), (HOLDERS[h],) if h in HOLDERS else ())
        for h in hosts
    )
    grants = (Grant("acme", "storage"),)
    partitions = plan_partitions(
        nodes,
        ports,
        {"acme": (0x0101, "gold"), "globex": (0x0102, "gold")},
        {"storage": 0x0100},
        grants,
    )
    gold = QosClass("gold", ib_sl=3, ib_rate=3, ib_mtu=4, vlarb_weight=128)
    return IbSnapshot(
        IbSettings("ib-east", pkey_first=0x0100, pkey_last=0x7FFE),
        nodes,
        ports,
        partitions,
        grants,
        (gold,),
    )


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else Path(__file__).with_name("ib-east.ibnetdiscover")
    snapshot = build_snapshot(path.read_text())
    verdict = verify_isolation(snapshot)
    print(f"snapshot {snapshot.digest}: isolation {'holds' if verdict.holds else 'BROKEN'}")
    for edge in verdict.reachability:
        print(f"  {edge.source} <-> {edge.target} via 0x{edge.segment:04x} allowed={edge.allowed}")
    for example in verdict.counterexamples:
        print(f"  {example.rule}: {example.message}")
    print(render_partitions_conf(snapshot), end="")
    return 0 if verdict.holds else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
