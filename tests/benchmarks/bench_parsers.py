"""Parser benchmarks: partitions.conf with a 100,000-member partition, ibnetdiscover of 20k ports.

Run with `make bench`; prints the parse time and asserts nothing about it.
"""

from __future__ import annotations

from policies.infiniband.parse_ibnetdiscover import parse_ibnetdiscover
from policies.infiniband.parse_partitions import parse_partitions_conf
from tests.benchmarks.timing import measure
from tests.policies.test_ibnetdiscover import synthetic
from tests.policies.test_partitions_parser import partition_with_members

MEMBERS = 100_000
CA_PORTS = 20_000


def main() -> None:
    """Parse each file three times and print each run."""
    text = partition_with_members(MEMBERS)
    print(f"partitions.conf: 1 partition, {MEMBERS:,} member lines, {len(text) / 1e6:.1f} MB")
    for run in range(1, 4):
        parsed = measure(f"parse (run {run})", lambda: parse_partitions_conf(text))
        assert len(parsed.partitions[1].members) == MEMBERS
    topology_text = synthetic(CA_PORTS)
    print(f"ibnetdiscover: {CA_PORTS:,} CA ports, {len(topology_text) / 1e6:.1f} MB")
    for run in range(1, 4):
        topology = measure(f"parse (run {run})", lambda: parse_ibnetdiscover(topology_text))
        assert len(topology.ca_ports) == CA_PORTS


if __name__ == "__main__":
    main()
