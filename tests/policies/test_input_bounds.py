"""The engine's own bounds on what it is given (issue 10, items 11 and 13).

RoCE settings: a host MTU below IPv4's 68 and a tenant prefix pool that is not unicast space are
problems of `check_roce_settings`; loopbacks and VTEPs must be unicast. ibnetdiscover: a switch's
NodeDescription is at most 64 characters (IBA), however ibnetdiscover came to print it.
"""

from __future__ import annotations

import dataclasses
from ipaddress import IPv4Address, IPv4Network

import pytest

from policies.errors import InputFormatError
from policies.infiniband.parse_ibnetdiscover import MAX_NODE_DESCRIPTION, parse_ibnetdiscover
from policies.roce import RoceSettings, check_roce_settings
from policies.roce.addresses import address_problem, prefix_pool_problem
from tests.builders import generated_topology

# --- addresses ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "label"),
    [
        ("0.0.0.0", "'this network'"),
        ("0.1.2.3", "'this network'"),
        ("127.0.0.1", "loopback"),
        ("169.254.10.1", "link-local"),
        ("224.0.0.5", "multicast"),
        ("239.255.255.250", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
    ],
)
def test_an_address_that_is_not_unicast_is_named(address: str, label: str):
    problem = address_problem(IPv4Address(address), "loopback")

    assert problem is not None
    assert problem.startswith(f"loopback {address} is {label}")


@pytest.mark.parametrize(
    "address", ["10.0.0.1", "100.64.0.1", "172.16.0.1", "192.0.2.1", "8.8.8.8"]
)
def test_a_unicast_address_has_no_problem(address: str):
    assert address_problem(IPv4Address(address)) is None


@pytest.mark.parametrize(
    ("pool", "named"),
    [
        ("0.0.0.0/0", "wider than a /8"),
        ("10.0.0.0/7", "wider than a /8"),
        ("0.0.0.0/8", "'this network'"),
        ("127.0.0.0/8", "loopback"),
        ("169.0.0.0/8", "link-local"),
        ("169.254.0.0/24", "link-local"),
        ("224.0.0.0/8", "multicast"),
        ("240.0.0.0/8", "reserved"),
        ("255.255.255.255/32", "reserved"),
    ],
)
def test_a_pool_that_is_not_unicast_space_is_named(pool: str, named: str):
    problem = prefix_pool_problem(IPv4Network(pool))

    assert problem is not None and named in problem


@pytest.mark.parametrize(
    "pool", ["10.0.0.0/8", "10.64.0.0/10", "100.64.0.0/10", "172.16.0.0/12", "198.18.0.0/15"]
)
def test_a_unicast_pool_has_no_problem(pool: str):
    assert prefix_pool_problem(IPv4Network(pool)) is None


# --- RoCE settings --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"host_mtu": -1}, "host MTU -1 is below 68"),
        ({"host_mtu": 67}, "host MTU 67 is below 68"),
        ({"tenant_prefix_pool": IPv4Network("0.0.0.0/0")}, "0.0.0.0/0 is wider than a /8"),
        ({"tenant_prefix_pool": IPv4Network("127.0.0.0/8")}, "overlaps 127.0.0.0/8"),
    ],
)
def test_settings_outside_the_standards_are_problems(changes: dict[str, object], problem: str):
    settings = dataclasses.replace(RoceSettings(name="west"), **changes)  # type: ignore[arg-type]

    problems = check_roce_settings(settings)

    assert len(problems) == 1
    assert problem in problems[0]


def test_the_smallest_host_mtu_is_accepted():
    settings = RoceSettings(name="west", host_mtu=68, underlay_mtu=118)

    assert check_roce_settings(settings) == []


# --- ibnetdiscover NodeDescriptions ---------------------------------------------------------


def _switch_named(name: str) -> str:
    return generated_topology(["gpu0001"]).replace('# "leaf01" base', f'# "{name}" base')


def test_a_switch_node_description_of_64_characters_is_kept_whole():
    name = "x" * MAX_NODE_DESCRIPTION

    topology = parse_ibnetdiscover(_switch_named(name))

    assert [s.name for s in topology.switches] == [name]
    assert topology.ca_ports[0].switch_name == name


def test_a_longer_switch_node_description_is_refused_naming_its_line():
    with pytest.raises(InputFormatError, match="65 characters") as refused:
        parse_ibnetdiscover(_switch_named("x" * 65))

    assert refused.value.line == 5


def test_a_long_switch_name_from_a_port_line_is_refused_naming_its_line():
    # No Switch record: the CA port line's comment is the only name the switch has.
    text = "\n".join(
        [
            'Ca\t1 "H-0000000000100002"\t\t# "gpu0001 mlx5_0"',
            f'[1](100003) \t"S-0000000000200000"[1]\t\t# lid 2 lmc 0 "{"y" * 65}" lid 1 4xSDR',
        ]
    )

    with pytest.raises(InputFormatError, match="more than the 64") as refused:
        parse_ibnetdiscover(text)

    assert refused.value.line == 2
