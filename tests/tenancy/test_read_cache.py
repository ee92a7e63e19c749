"""The read cache itself: bounded by the bytes it holds, least recently used out first, one
computation for concurrent misses of a key, fingerprints that change with every input."""

from __future__ import annotations

import threading
import time

from tenancy.store.read_cache import CachedFile, Entry, ReadCache, ReadKey, fingerprint


def key(n: int) -> ReadKey:
    return ReadKey(fabric_id=1, digest=f"v2:{n:064x}", inputs="f")


def entry(size: int) -> Entry:
    return Entry(digest="v2:0", files=(CachedFile.of("opensm/partitions.conf", b"x" * size),))


def test_a_file_carries_the_sha256_of_its_bytes():
    file = CachedFile.of("opensm/partitions.conf", b"abc")

    assert file.sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_the_least_recently_used_entries_go_first_once_the_bound_is_passed():
    cache = ReadCache(max_bytes=300)
    for n in range(3):
        cache.put(key(n), entry(100))
    cache.get(key(0))  # now the most recently used

    cache.put(key(3), entry(100))

    assert [cache.get(key(n)) is not None for n in range(4)] == [True, False, True, True]
    assert cache.bytes_held == 300


def test_an_entry_larger_than_the_bound_is_not_kept_and_evicts_nothing():
    cache = ReadCache(max_bytes=100)
    cache.put(key(0), entry(50))

    cache.put(key(1), entry(101))

    assert cache.get(key(1)) is None
    assert cache.get(key(0)) is not None


def test_putting_a_key_again_replaces_its_entry_and_its_size():
    cache = ReadCache(max_bytes=1000)
    cache.put(key(0), entry(100))

    cache.put(key(0), entry(10))

    assert cache.bytes_held == 10


def test_concurrent_misses_of_one_key_compute_it_once():
    cache, computed = ReadCache(), []
    start = threading.Barrier(8)

    def read() -> None:
        start.wait()
        with cache.single_flight(key(0)):
            if cache.get(key(0)) is None:
                time.sleep(0.05)  # a slow verification
                computed.append(1)
                cache.put(key(0), entry(10))

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert computed == [1]


def test_different_keys_do_not_wait_for_each_other():
    cache, done = ReadCache(), threading.Event()

    def compute_another_key() -> None:
        with cache.single_flight(key(1)):
            done.set()

    with cache.single_flight(key(0)):
        other = threading.Thread(target=compute_another_key)
        other.start()
        assert done.wait(timeout=5)
    other.join()


def test_fingerprints_differ_by_purpose_and_by_every_input():
    assert fingerprint("verdict") != fingerprint("artifacts")
    assert fingerprint("artifacts", b"(1, 2, 3)") != fingerprint("artifacts", b"(1, 2, 4)")
    assert fingerprint("artifacts", b"(1, 2, 3)") == fingerprint("artifacts", b"(1, 2, 3)")
