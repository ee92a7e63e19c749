"""Fakes and data for the SONiC agent's tests: a service with phases, FRR daemons, one leaf.

`FakeSonicServer` is the OpenSM tests' signing `FakeServer` plus ``sync`` (``desired`` is the
published snapshot, ``phase`` what the test sets). `FakeDaemons` stands for frr-reload.py and
vtysh: a reload makes the file run (minus the line `lose`); ``--test`` prints the file.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.client import ServerError
from agent.frr import FrrError
from policies.roce.ownership import LeafOwnership
from tests.agent.fakes import FakeServer

LEAF = "leaf01"
OWNERSHIP = LeafOwnership(
    leaf=LEAF,
    vlan_range=(100, 199),
    l2vni_range=(10100, 10199),
    l3vni_range=(5000, 5099),
    host_ports=frozenset({"Ethernet0", "Ethernet4"}),
    vtep="vtep",
)
DECLARED: dict[str, dict[str, dict[str, Any]]] = {
    "DEVICE_METADATA": {"localhost": {"hostname": LEAF, "bgp_asn": "65101"}},
    "PORT": {"Ethernet0": {"mtu": "9100"}, "Ethernet4": {"mtu": "9100"}},
    "VXLAN_TUNNEL": {"vtep": {"src_ip": "10.1.0.1"}},
}
FOREIGN: dict[str, dict[str, dict[str, Any]]] = {
    "NTP_SERVER": {"10.1.1.1": {}},
    "SYSLOG_SERVER": {"10.2.2.2": {"port": "514"}},
}
ACME: dict[str, dict[str, dict[str, Any]]] = {
    "VRF": {"Vrf5001": {"vni": "5001"}},
    "VLAN": {"Vlan100": {"vlanid": "100"}},
    "VLAN_MEMBER": {"Vlan100|Ethernet0": {"tagging_mode": "untagged"}},
    "VLAN_INTERFACE": {"Vlan100": {"vrf_name": "Vrf5001"}, "Vlan100|10.64.0.1/24": {}},
    "VXLAN_TUNNEL_MAP": {"vtep|map_10100_Vlan100": {"vlan": "Vlan100", "vni": "10100"}},
}
FRR_BASE = "router bgp 65101\n neighbor Ethernet248 interface remote-as external\nexit\n!\n"
FRR_ACME = (
    FRR_BASE
    + "router bgp 65101 vrf Vrf5001\n address-family l2vpn evpn\n  advertise ipv4 unicast\n"
    + " exit-address-family\nexit\n!\nvrf Vrf5001\n vni 5001\nexit-vrf\n"
)
FRR_ACME_GRANT = FRR_ACME.replace(
    "  advertise ipv4 unicast\n",
    "  advertise ipv4 unicast\n  ! grant acme-globex\n  route-target import 65000:5002\n",
)


def document(*parts: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
    merged: dict[str, dict[str, dict[str, Any]]] = {}
    for part in parts:
        for table, entries in part.items():
            merged.setdefault(table, {}).update({k: dict(v) for k, v in entries.items()})
    return merged


def leaf_bundle(config_db: str, frr: str | None = None) -> dict[str, bytes]:
    files = {
        f"sonic/{LEAF}/config_db.json": config_db.encode(),
        f"sonic/{LEAF}/ownership.json": OWNERSHIP.to_json().encode(),
        "sonic/leaf02/config_db.json": b"{}\n",  # another leaf's: left alone
    }
    if frr is not None:
        files[f"frr/{LEAF}/frr.conf"] = frr.encode()
    return files


@dataclass
class FakeSonicServer(FakeServer):
    """The signing fake service, with ``sync``: ``desired`` is the published snapshot."""

    phase: int | None = 2
    desired: str | None = None  # None: the published snapshot

    def sync(self) -> dict[str, Any]:
        if self.down:
            raise ServerError("connection refused")
        published = self.envelope and _digest_of(self.envelope)
        return {"desired": self.desired or published, "phase": self.phase, "targets": []}


def _digest_of(envelope: dict[str, Any]) -> str:
    return str(json.loads(base64.b64decode(envelope["payload"]))["snapshot_digest"])


@dataclass
class FakeDaemons:
    """frr-reload.py and vtysh: a reload makes the file run (minus the line `lose`)."""

    running: str = ""
    lose: str | None = None
    fail_reload: bool = False
    calls: list[list[str]] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)  # the file's text at each reload

    def __call__(self, argv: list[str]) -> str:
        self.calls.append(argv)
        if "--test" in argv:
            return f"Lines To Add\n============\n{Path(argv[-1]).read_text()}"
        if "--reload" in argv:
            if self.fail_reload:
                raise FrrError("frr-reload.py exited 1")
            text = Path(argv[-1]).read_text()
            self.loaded.append(text)
            if self.lose:
                text = text.replace(self.lose, "")
            self.running = "Building configuration...\n" + text
            return ""
        return self.running
