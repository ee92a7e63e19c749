"""The RoCE lab itself (roce_lab.py): private Redis with ACL users, FRR per namespace, vxlanmgrd.

Tests skip without root, FRR, iproute2 or redis-server unless ``ISOFABRIC_REQUIRE_CONFORMANCE=1``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator

import pytest
import redis

from policies.roce.render_sonic import render_config_db
from tests.policies.roce_snapshots import roce_snapshot

from .conftest import skip_or_fail
from .harness import ToolsMissingError, wait_until
from .roce_lab import (
    FRR_RUN_DIR,
    LAB_TIMEOUT,
    LabTools,
    RedisServer,
    RoceLab,
    Router,
    apply_vxlanmgrd,
    run,
)

pytestmark = pytest.mark.conformance

SNAPSHOT = roce_snapshot()
# One leaf and the spine, linked as the fixture fabric links them.
SMALL = dataclasses.replace(
    SNAPSHOT,
    switches=tuple(s for s in SNAPSHOT.switches if s.name != "leaf02"),
    links=tuple(link for link in SNAPSHOT.links if "leaf02" not in (link.a_switch, link.b_switch)),
)


@pytest.fixture(scope="module")
def tools() -> LabTools:
    try:
        return LabTools.locate()
    except ToolsMissingError as exc:
        skip_or_fail(str(exc))


@pytest.fixture(scope="module")
def small_lab(tools: LabTools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoceLab]:
    with RoceLab(SMALL, tmp_path_factory.mktemp("small-lab"), tools) as lab:
        yield lab


def test_redis_runs_on_its_own_socket_with_one_database_per_url(tools, tmp_path):
    with RedisServer(tmp_path / "redis", tools.redis_server) as server:
        url = server.url(4)
        redis.Redis.from_url(url).hset("VLAN|Vlan100", "vlanid", "100")

        assert url == f"unix://{tmp_path}/redis/redis.sock?db=4"
        assert server.client(4).hgetall("VLAN|Vlan100") == {"vlanid": "100"}
        assert server.client(0).keys("*") == []
        assert server.client(0).config_get("port") == {"port": "0"}
    with pytest.raises(redis.ConnectionError):
        server.client(4).ping()


def test_an_acl_user_without_write_rights_reads_but_cannot_write(tools, tmp_path):
    with RedisServer(tmp_path / "redis", tools.redis_server) as server:
        server.client(4).hset("VLAN|Vlan100", "vlanid", "100")
        server.add_user("reader", "secret", ["~*", "+@read", "+@connection", "+select"])
        reader = redis.Redis.from_url(server.url(4, user="reader", password="secret"))

        assert reader.hget("VLAN|Vlan100", "vlanid") == b"100"
        with pytest.raises(redis.exceptions.NoPermissionError):
            reader.hset("VLAN|Vlan100", "vlanid", "101")
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis.from_url(server.url(4, user="reader", password="wrong")).ping()


def test_frr_shows_the_switch_name_and_runs_in_the_switch_namespace(small_lab):
    leaf = small_lab.router("leaf01")

    assert "hostname leaf01" in leaf.running_config().splitlines()
    links = run(["ip", "-n", leaf.namespace, "-o", "link", "show", "Ethernet248"]).stdout
    assert "Ethernet248@" in links
    addresses = leaf.ip("-o", "addr", "show", "dev", "lo").stdout
    assert "10.0.0.1/32" in addresses and "10.0.1.1/32" in addresses
    assert (FRR_RUN_DIR / leaf.namespace / "bgpd.vty").exists()


def test_vxlanmgrd_creates_a_vxlan_device_and_bridge_per_l2vni_and_removes_them(small_lab):
    leaf = small_lab.router("leaf01")
    config_db = render_config_db(SNAPSHOT, "leaf01")
    leaf.load("frr defaults datacenter\nrouter bgp 65101\n address-family l2vpn evpn\n"
              "  advertise-all-vni\n exit-address-family\nexit\n")  # fmt: skip

    assert apply_vxlanmgrd(leaf, config_db) == [10000, 10001, 10002]

    wait_for_vnis(leaf, ["10000", "10001", "10002"])
    vni = leaf.vtysh_json("show evpn vni 10000 json")
    assert (vni["type"], vni["vxlanInterface"], vni["sviInterface"]) == (
        "L2",
        "vtep-100",
        "Vlan100",
    )
    assert vni["vtepIp"] == "10.0.1.1"

    del config_db["VXLAN_TUNNEL_MAP"]["vtep|map_10001_Vlan101"]
    config_db["VXLAN_TUNNEL_MAP"]["vtep|map_10002_Vlan102"]["vni"] = "10009"
    assert apply_vxlanmgrd(leaf, config_db) == [10000, 10009]
    wait_for_vnis(leaf, ["10000", "10009"])
    assert leaf.vtysh_json("show evpn vni 10009 json")["vxlanInterface"] == "vtep-102"
    assert leaf.ip("link", "show", "Vlan101", check=False).returncode != 0


def wait_for_vnis(leaf: Router, vnis: list[str]) -> None:
    """Poll zebra until its VNIs are `vnis` (it learns VXLAN devices from netlink events)."""

    def seen() -> bool:
        return sorted(leaf.vtysh_json("show evpn vni json")) == vnis

    wait_until(seen, timeout=LAB_TIMEOUT, what=f"zebra's VNIs {vnis} on {leaf.name}")


def test_teardown_stops_the_daemons_and_removes_namespaces_and_sockets(tools, tmp_path):
    with RoceLab(SMALL, tmp_path, tools) as lab:
        pids = [proc.pid for router in lab.routers.values() for proc in router.procs]
        namespaces = [router.namespace for router in lab.routers.values()]
        assert len(pids) == 4

    listed = run(["ip", "netns", "list"]).stdout
    assert not [ns for ns in namespaces if ns in listed]
    assert not [ns for ns in namespaces if (FRR_RUN_DIR / ns).exists()]
    assert not [pid for pid in pids if os.path.exists(f"/proc/{pid}")]
