"""RFC 9162 Merkle tree: known vectors, a recursive reference, and proof properties."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.errors import InvalidValueError
from policies.evidence.merkle import (
    EMPTY_ROOT,
    consistency_proof,
    entry_leaf_hash,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root_hash,
    verify_consistency,
    verify_inclusion,
)

# RFC 6962 test data as published by Certificate Transparency / transparency-dev/merkle
# (testonly/constants.go): the leaves and the root for every tree size 0..8.
CT_LEAVES = [
    bytes.fromhex(h)
    for h in [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ]
]
CT_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
CT_INCLUSION = {
    (0, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (5, 8): [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
}
CT_CONSISTENCY = {
    (6, 8): [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
}
CT_HASHES = [leaf_hash(d) for d in CT_LEAVES]


# --- a straightforward recursive reference, transcribed from RFC 9162 §2.1.1-§2.1.4.1 ----------


def _k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def ref_mth(d: list[bytes]) -> bytes:
    if not d:
        return hashlib.sha256(b"").digest()
    if len(d) == 1:
        return d[0]
    k = _k(len(d))
    return hashlib.sha256(b"\x01" + ref_mth(d[:k]) + ref_mth(d[k:])).digest()


def ref_path(m: int, d: list[bytes]) -> list[bytes]:
    if len(d) == 1:
        return []
    k = _k(len(d))
    if m < k:
        return [*ref_path(m, d[:k]), ref_mth(d[k:])]
    return [*ref_path(m - k, d[k:]), ref_mth(d[:k])]


def ref_subproof(m: int, d: list[bytes], b: bool) -> list[bytes]:
    if m == len(d):
        return [] if b else [ref_mth(d)]
    k = _k(len(d))
    if m <= k:
        return [*ref_subproof(m, d[:k], b), ref_mth(d[k:])]
    return [*ref_subproof(m - k, d[k:], False), ref_mth(d[:k])]


def tampered(h: bytes) -> bytes:
    return bytes([h[0] ^ 0x01]) + h[1:]


# --- known vectors ------------------------------------------------------------------------------


def test_empty_tree_root_is_sha256_of_nothing():
    assert root_hash([]) == EMPTY_ROOT
    assert EMPTY_ROOT.hex() == CT_ROOTS[0]


def test_leaf_and_node_hash_prefixes():
    assert leaf_hash(b"abc") == hashlib.sha256(b"\x00abc").digest()
    a, b = leaf_hash(b"a"), leaf_hash(b"b")
    assert node_hash(a, b) == hashlib.sha256(b"\x01" + a + b).digest()
    assert node_hash(a, b) != node_hash(b, a)


@pytest.mark.parametrize("n", range(9))
def test_ct_roots(n):
    assert root_hash(CT_HASHES[:n]).hex() == CT_ROOTS[n]


def test_one_leaf_root_is_its_leaf_hash():
    assert root_hash([CT_HASHES[0]]) == CT_HASHES[0]


@pytest.mark.parametrize(("index", "size"), list(CT_INCLUSION))
def test_ct_inclusion_vectors(index, size):
    proof = inclusion_proof(CT_HASHES[:size], index)
    assert [p.hex() for p in proof] == CT_INCLUSION[(index, size)]
    root = bytes.fromhex(CT_ROOTS[size])
    assert verify_inclusion(CT_HASHES[index], index, size, proof, root)


@pytest.mark.parametrize(("first", "second"), list(CT_CONSISTENCY))
def test_ct_consistency_vectors(first, second):
    proof = consistency_proof(CT_HASHES[:second], first)
    assert [p.hex() for p in proof] == CT_CONSISTENCY[(first, second)]
    r1, r2 = bytes.fromhex(CT_ROOTS[first]), bytes.fromhex(CT_ROOTS[second])
    assert verify_consistency(first, second, r1, r2, proof)


def test_root_of_100k_leaves_matches_reference():
    leaves = [leaf_hash(i.to_bytes(4, "big")) for i in range(100_000)]
    assert root_hash(leaves) == ref_mth(leaves)


def test_entry_leaf_hash_is_over_rfc8785_bytes():
    entry = {"seq": 1, "b": [True, None], "a": "é"}
    canonical = '{"a":"é","b":[true,null],"seq":1}'.encode()
    assert entry_leaf_hash(entry) == leaf_hash(canonical)
    assert entry_leaf_hash({"seq": 1, "a": "é", "b": [True, None]}) == entry_leaf_hash(entry)


def test_entry_leaf_hash_refuses_non_canonicalisable():
    with pytest.raises(InvalidValueError):
        entry_leaf_hash({"n": 2**53})
    with pytest.raises(InvalidValueError):
        entry_leaf_hash({"x": float("nan")})


# --- argument errors ----------------------------------------------------------------------------


def test_out_of_range_arguments_raise():
    leaves = CT_HASHES[:5]
    root = root_hash(leaves)
    proof = inclusion_proof(leaves, 1)
    calls: list[Callable[[], object]] = [
        lambda: inclusion_proof(leaves, 5),
        lambda: inclusion_proof(leaves, -1),
        lambda: inclusion_proof([], 0),
        lambda: consistency_proof(leaves, 0),
        lambda: consistency_proof(leaves, 6),
        lambda: verify_inclusion(leaves[1], 5, 5, proof, root),
        lambda: verify_inclusion(leaves[1], -1, 5, proof, root),
        lambda: verify_inclusion(leaves[1], 0, 0, [], root),
        lambda: verify_inclusion(b"short", 1, 5, proof, root),
        lambda: verify_inclusion(leaves[1], 1, 5, proof, root[:31]),
        lambda: verify_consistency(0, 5, EMPTY_ROOT, root, []),
        lambda: verify_consistency(3, 2, root, root, []),
        lambda: verify_consistency(2, 3, b"", root, []),
        lambda: root_hash([b"x" * 31]),
        lambda: node_hash(b"x", leaves[0]),
        lambda: inclusion_proof(leaves, True),
    ]
    for call in calls:
        with pytest.raises(InvalidValueError):
            call()


def test_malformed_proof_elements_fail_without_raising():
    leaves = CT_HASHES[:5]
    root = root_hash(leaves)
    proof = inclusion_proof(leaves, 1)
    assert not verify_inclusion(leaves[1], 1, 5, [proof[0][:31], *proof[1:]], root)
    cproof = consistency_proof(leaves, 3)
    r3 = root_hash(leaves[:3])
    assert not verify_consistency(3, 5, r3, root, [b"", *cproof[1:]])


def test_equal_sizes_need_empty_proof_and_equal_roots():
    r = root_hash(CT_HASHES[:4])
    assert consistency_proof(CT_HASHES[:4], 4) == []
    assert verify_consistency(4, 4, r, r, [])
    assert not verify_consistency(4, 4, r, tampered(r), [])
    assert not verify_consistency(4, 4, r, r, [r])


# --- properties ---------------------------------------------------------------------------------

leaf_lists = st.lists(st.binary(max_size=8), min_size=1, max_size=70, unique=True).map(
    lambda data: [leaf_hash(d) for d in data]
)


@settings(max_examples=40, deadline=None)
@given(leaf_lists)
def test_every_inclusion_proof_verifies_and_nothing_else(leaves):
    n = len(leaves)
    root = root_hash(leaves)
    assert root == ref_mth(leaves)
    for i in range(n):
        proof = inclusion_proof(leaves, i)
        assert proof == ref_path(i, leaves)
        assert verify_inclusion(leaves[i], i, n, proof, root)
        assert not verify_inclusion(tampered(leaves[i]), i, n, proof, root)
        assert not verify_inclusion(leaves[i], i, n, proof, tampered(root))
        if n > 1:
            assert not verify_inclusion(leaves[i], (i + 1) % n, n, proof, root)
        assert not verify_inclusion(leaves[i], i, n, [*proof, root], root)
        if proof:
            assert not verify_inclusion(leaves[i], i, n, proof[:-1], root)
            assert not verify_inclusion(leaves[i], i, n, [tampered(proof[0]), *proof[1:]], root)


@settings(max_examples=40, deadline=None)
@given(leaf_lists)
def test_every_consistency_proof_verifies_and_tampering_fails(leaves):
    n = len(leaves)
    root = root_hash(leaves)
    for m in range(1, n + 1):
        first_root = root_hash(leaves[:m])
        proof = consistency_proof(leaves, m)
        assert proof == ref_subproof(m, leaves, True)
        assert verify_consistency(m, n, first_root, root, proof)
        assert not verify_consistency(m, n, tampered(first_root), root, proof)
        assert not verify_consistency(m, n, first_root, tampered(root), proof)
        if proof:
            assert not verify_consistency(m, n, first_root, root, proof[:-1])
            assert not verify_consistency(m, n, first_root, root, [*proof, root])
            assert not verify_consistency(m, n, first_root, root, [tampered(proof[0]), *proof[1:]])
