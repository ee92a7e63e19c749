"""CONFIG_DB in a real redis-server: ConfigDBConnector's layout, compare-and-swap, restore."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
import redis

from agent.config_db import (
    ConfigDb,
    RedisConfigDb,
    StoreError,
    decode_entry,
    encode_entry,
    touched,
)
from tests.agent.redis_server import RedisServer, running_redis

RUNNING: ConfigDb = {
    "VLAN": {"Vlan100": {"vlanid": "100"}},
    "VLAN_MEMBER": {"Vlan100|Ethernet0": {"tagging_mode": "untagged"}},
    "VLAN_INTERFACE": {"Vlan100": {"vrf_name": "Vrf5001"}, "Vlan100|10.64.0.1/24": {}},
    "PORT_QOS_MAP": {"Ethernet0": {"pfc_enable": "3,4", "dscp_to_tc_map": "AZURE"}},
    "BGP_NEIGHBOR": {"10.0.0.1": {"asn": "65000", "local_addr@x": "y"}},
    "NTP_SERVER": {"10.1.1.1": {}},
    "SYSLOG": {"global": {"servers": ["10.2.2.2", "10.2.2.3"]}},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with running_redis(tmp_path_factory.mktemp("redis")) as started:
        yield started


@pytest.fixture
def admin(server: RedisServer) -> redis.Redis:
    client = server.client()
    client.flushall()
    return client


def load(store: RedisConfigDb, document: ConfigDb) -> None:
    before, after = touched({}, document)
    store.write(before, after)


def changed(running: ConfigDb, edit: dict[str, Any]) -> ConfigDb:
    document = {
        table: {k: dict(v) for k, v in entries.items()} for table, entries in running.items()
    }
    for table, entries in edit.items():
        for key, entry in entries.items():
            if entry is None:
                document[table].pop(key)
            else:
                document.setdefault(table, {})[key] = entry
    return {table: entries for table, entries in document.items() if entries}


def test_entries_are_stored_as_configdbconnector_stores_them() -> None:
    assert encode_entry({"servers": ["a", "b"], "mtu": 9100}) == {"servers@": "a,b", "mtu": "9100"}
    assert encode_entry({}) == {"NULL": "NULL"}
    assert decode_entry({"NULL": "NULL"}) == {}
    assert decode_entry({"servers@": "a,b", "x": "1"}) == {"servers": ["a", "b"], "x": "1"}


def test_layout_in_redis_and_read_back(server: RedisServer, admin: redis.Redis) -> None:
    store = RedisConfigDb.from_url(server.url())
    load(store, RUNNING)
    assert admin.hgetall("VLAN_INTERFACE|Vlan100|10.64.0.1/24") == {"NULL": "NULL"}
    assert admin.hgetall("SYSLOG|global") == {"servers@": "10.2.2.2,10.2.2.3"}
    assert admin.hgetall("VLAN_MEMBER|Vlan100|Ethernet0") == {"tagging_mode": "untagged"}
    admin.set("CONFIG_DB_INITIALIZED", "1")  # not an entry: readers skip it
    assert store.read() == RUNNING
    assert server.client(db=0).dbsize() == 0  # database 4 only


def test_write_changes_only_the_touched_keys(server: RedisServer, admin: redis.Redis) -> None:
    store = RedisConfigDb.from_url(server.url())
    load(store, RUNNING)
    target = changed(
        RUNNING,
        {"VLAN_MEMBER": {"Vlan100|Ethernet0": None}, "VLAN": {"Vlan200": {"vlanid": "200"}}},
    )
    before, after = touched(RUNNING, target)
    assert sorted(after) == ["VLAN_MEMBER|Vlan100|Ethernet0", "VLAN|Vlan200"]
    store.write(before, after)
    assert store.read() == target


def test_a_concurrent_change_aborts_with_nothing_written(
    server: RedisServer, admin: redis.Redis
) -> None:
    store = RedisConfigDb.from_url(server.url())
    load(store, RUNNING)
    admin.hset("VLAN|Vlan100", "mtu", "1500")  # after the agent read RUNNING
    target = changed(RUNNING, {"VLAN": {"Vlan100": {"vlanid": "100", "mtu": "9000"}}})
    with pytest.raises(StoreError) as raised:
        store.write(*touched(RUNNING, target))
    assert raised.value.state == "failed"
    assert "changed since read: VLAN|Vlan100" in str(raised.value)
    assert admin.hgetall("VLAN|Vlan100") == {"vlanid": "100", "mtu": "1500"}


def test_a_user_without_write_rights_leaves_config_db_unchanged(
    server: RedisServer, admin: redis.Redis
) -> None:
    load(RedisConfigDb.from_url(server.url()), RUNNING)
    reader = RedisConfigDb.from_url(server.reader_url())
    assert reader.read() == RUNNING
    target = changed(RUNNING, {"VLAN_MEMBER": {"Vlan100|Ethernet0": None}})
    with pytest.raises(StoreError) as raised:
        reader.write(*touched(RUNNING, target))
    assert raised.value.state == "failed"
    assert "nothing written" in str(raised.value)
    assert "NoPermissionError" in str(raised.value)  # NOPERM at queue time: EXEC aborts
    assert RedisConfigDb.from_url(server.url()).read() == RUNNING


class RewrittenAfterWrite(RedisConfigDb):
    """A daemon rewrites one key right after the write (before the read-back), once."""

    rewrites = 1

    def read_keys(self, names: Any) -> dict[str, Any]:
        names = list(names)
        if self.rewrites and "VLAN|Vlan200" in names:
            self.rewrites -= 1
            self.client.hset("VLAN|Vlan200", "vlanid", "999")
        return super().read_keys(names)


def test_read_back_mismatch_restores_the_previous_content(
    server: RedisServer, admin: redis.Redis
) -> None:
    load(RedisConfigDb.from_url(server.url()), RUNNING)
    store = RewrittenAfterWrite(redis.Redis.from_url(server.url(), decode_responses=True))
    target = changed(
        RUNNING,
        {"VLAN_MEMBER": {"Vlan100|Ethernet0": None}, "VLAN": {"Vlan200": {"vlanid": "200"}}},
    )
    with pytest.raises(StoreError) as raised:
        store.write(*touched(RUNNING, target))
    assert raised.value.state == "rolled_back"
    assert "read back differs at VLAN|Vlan200" in str(raised.value)
    assert RedisConfigDb.from_url(server.url()).read() == RUNNING


def test_restore_after_a_verified_write(server: RedisServer, admin: redis.Redis) -> None:
    store = RedisConfigDb.from_url(server.url())
    load(store, RUNNING)
    target = changed(RUNNING, {"VRF": {"Vrf5002": {"vni": "5002"}}})
    before, after = touched(RUNNING, target)
    store.write(before, after)
    with pytest.raises(StoreError) as raised:
        store.restore(after, before, "FRR did not match")
    assert raised.value.state == "rolled_back"
    assert store.read() == RUNNING


def test_restore_does_not_overwrite_a_later_change(server: RedisServer, admin: redis.Redis) -> None:
    store = RedisConfigDb.from_url(server.url())
    load(store, RUNNING)
    target = changed(RUNNING, {"VRF": {"Vrf5002": {"vni": "5002"}}})
    before, after = touched(RUNNING, target)
    store.write(before, after)
    admin.hset("VRF|Vrf5002", "vni", "7")
    with pytest.raises(StoreError) as raised:
        store.restore(after, before, "FRR did not match")
    assert raised.value.state == "failed"
    assert "left changed" in str(raised.value)
    assert admin.hgetall("VRF|Vrf5002") == {"vni": "7"}


def test_a_changed_entry_is_updated_in_place_as_set_entry_does(
    server: RedisServer, admin: redis.Redis
) -> None:
    """SONiC's daemons act on keyspace events: a changed entry must never see a DEL."""
    store = RedisConfigDb.from_url(server.url())
    load(store, RUNNING)
    admin.config_set("notify-keyspace-events", "Kgh")
    listener = cast(Any, admin).pubsub()  # redis-py leaves pubsub() untyped
    listener.psubscribe("__keyspace@4__:*")
    listener.get_message(timeout=1)  # the subscription's confirmation
    target = changed(
        RUNNING,
        {
            "PORT_QOS_MAP": {"Ethernet0": {"pfc_enable": "3"}},  # one field changed, one lost
            "VLAN_INTERFACE": {"Vlan100|10.64.0.1/24": {"secondary": "true"}},  # NULL -> fields
            "NTP_SERVER": {"10.1.1.1": None},  # removed
        },
    )
    store.write(*touched(RUNNING, target))
    admin.hset("SENTINEL|end", "x", "1")  # the last event: everything before it has arrived
    events = []
    while (message := listener.get_message(timeout=5)) is not None:
        event = (message["channel"].split(":", 1)[1], message["data"])
        if event[0] == "SENTINEL|end":
            break
        events.append(event)
    admin.config_set("notify-keyspace-events", "")
    admin.delete("SENTINEL|end")
    assert sorted(events) == [
        ("NTP_SERVER|10.1.1.1", "del"),
        ("PORT_QOS_MAP|Ethernet0", "hdel"),
        ("PORT_QOS_MAP|Ethernet0", "hset"),
        ("VLAN_INTERFACE|Vlan100|10.64.0.1/24", "hdel"),
        ("VLAN_INTERFACE|Vlan100|10.64.0.1/24", "hset"),
    ]
    assert store.read() == target
