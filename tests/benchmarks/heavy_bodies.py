"""The heavy request bodies of bench_heavy_work: each heavy route's largest plausible document.

Each body starts from what the service itself renders for the fabric (so it parses as that file
does) and is padded to `TARGET_BYTES` with entries the parser reads and the audit compares: port
GUIDs, VLAN members or VRFs the fabric does not have. They are built once per run and written
to files, which the processes that send them read.
"""

from __future__ import annotations

import json
from typing import Any

# Two of these in flight is what one principal may do at once (ISOFABRIC_HEAVY_CONCURRENCY 2).
TARGET_BYTES = 32 * 1024 * 1024
# Port GUIDs and leaf ports no bench fabric has: padding is drift, never another owner's port.
UNKNOWN_GUID = 0x0009_0000_0000_0000
UNKNOWN_PORT = 100_000
PADDING_PKEY = 0x7F00


def partitions_conf(rendered: str) -> str:
    """`rendered` and a partition of unknown GUIDs, one member per line, to TARGET_BYTES."""
    lines = [rendered.rstrip("\n"), "", f"pad=0x{PADDING_PKEY:04x}, ipoib :"]
    size, index = len(rendered) + 32, 0
    while size < TARGET_BYTES:
        line = f"    0x{UNKNOWN_GUID + index:016x}=full,"
        lines.append(line)
        size += len(line) + 1
        index += 1
    lines.append(f"    0x{UNKNOWN_GUID + index:016x}=full ;")
    return "\n".join(lines) + "\n"


def config_db_json(rendered: str) -> str:
    """`rendered` with VLAN members on ports the leaf does not have, to TARGET_BYTES."""
    document: dict[str, Any] = json.loads(rendered)
    members: dict[str, Any] = document.setdefault("VLAN_MEMBER", {})
    vlans = sorted(document.get("VLAN", {})) or ["Vlan1000"]
    size, index = len(rendered), 0
    while size < TARGET_BYTES:
        key = f"{vlans[index % len(vlans)]}|Ethernet{UNKNOWN_PORT + index}"
        members[key] = {"tagging_mode": "tagged"}
        size += len(key) + 42  # indent=1: '  "key": {\n   "tagging_mode": "tagged"\n  },\n'
        index += 1
    return json.dumps(document, indent=1)


def frr_conf(rendered: str) -> str:
    """`rendered` and VRFs with an L3VNI each that intent does not have, to TARGET_BYTES."""
    lines = [rendered.rstrip("\n")]
    size, index = len(rendered), 0
    while size < TARGET_BYTES:
        stanza = f"vrf Vpad{index}\n vni {10_000_000 + index}\nexit-vrf\n!"
        lines.append(stanza)
        size += len(stanza) + 1
        index += 1
    return "\n".join(lines) + "\n"


def observation(guids: list[str]) -> str:
    """An InfiniBand observation of the ports `guids` (at most 100,000), to TARGET_BYTES.

    ObservationCreate takes at most 100,000 ports of at most 128 P_Keys each: each port's table
    lists the default limited key as many times as the size needs (a table is a set of keys).
    """
    ports = guids[:100_000]
    keys = min(128, max(1, (TARGET_BYTES // max(1, len(ports)) - 40) // 10))
    document = {
        "kind": "infiniband",
        "ports": [
            {"guid": guid, "lid": 1 + i % 0xBFFF, "pkeys": ["0x7fff"] * keys}
            for i, guid in enumerate(ports)
        ],
    }
    return json.dumps(document)
