"""RFC 9162 Merkle tree hashing, inclusion proofs and consistency proofs for the audit log.

The audit log is an append-only list of entries; each entry is hashed as a leaf and the log's
state is the Merkle Tree Hash (MTH) of all leaves, as in Certificate Transparency 2.0:

* leaf hash ``SHA-256(0x00 || data)`` and interior node ``SHA-256(0x01 || left || right)``
  (RFC 9162 §2.1.1; the prefixes keep a leaf from being passed off as a node);
* ``MTH({}) = SHA-256("")``; for ``n > 1`` leaves the tree splits at ``k``, the largest power of
  two smaller than ``n``: ``MTH(D[n]) = node(MTH(D[0:k]), MTH(D[k:n]))``;
* an inclusion proof (``PATH``, §2.1.3.1) shows that a leaf is in a tree of a given size, a
  consistency proof (``PROOF``/``SUBPROOF``, §2.1.4.1) shows that an older tree is a prefix of a
  newer one; both verifiers follow §2.1.3.2 and §2.1.4.2 step by step.

An audit entry (a JSON object) becomes a leaf through its RFC 8785 canonical bytes, so an auditor
can recompute a leaf hash from the entry's content alone (`entry_leaf_hash`).

Argument errors (an index outside the tree, a hash that is not 32 bytes) raise
`policies.errors.InvalidValueError`; a proof that does not verify makes the verifier return False.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import rfc8785

from policies.errors import InvalidValueError

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "consistency_proof",
    "entry_leaf_hash",
    "inclusion_proof",
    "leaf_hash",
    "node_hash",
    "root_hash",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE = 32
"""Length in bytes of every hash in the tree (SHA-256)."""

EMPTY_ROOT = hashlib.sha256(b"").digest()
"""MTH of the empty tree: SHA-256 of the empty string (RFC 9162 §2.1.1)."""

_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"


def leaf_hash(data: bytes) -> bytes:
    """Hash one leaf's data.

    Args:
        data: The leaf's bytes (any length, including empty).

    Returns:
        ``SHA-256(0x00 || data)`` (RFC 9162 §2.1.1), 32 bytes.
    """
    return hashlib.sha256(_LEAF_PREFIX + bytes(data)).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Hash an interior node from its two children.

    Args:
        left: The left child's hash (32 bytes).
        right: The right child's hash (32 bytes).

    Returns:
        ``SHA-256(0x01 || left || right)`` (RFC 9162 §2.1.1), 32 bytes.

    Raises:
        InvalidValueError: A child is not a 32-byte hash.
    """
    _check_hash(left, "left child")
    _check_hash(right, "right child")
    return _node(left, right)


def entry_leaf_hash(entry: Mapping[str, Any]) -> bytes:
    """Hash an audit entry as a leaf of the log.

    Args:
        entry: A JSON-compatible object (str keys; str, int within ±(2^53-1), finite float,
            bool, None, lists and objects as values).

    Returns:
        ``leaf_hash(RFC 8785 canonical JSON bytes of entry)``.

    Raises:
        InvalidValueError: The entry cannot be canonicalised (RFC 8785 §3.2.2.3 number domain,
            unsupported types).
    """
    try:
        data: bytes = rfc8785.dumps(dict(entry))
    except (rfc8785.CanonicalizationError, TypeError) as exc:
        raise InvalidValueError(f"audit entry is not canonical JSON: {exc}") from exc
    return leaf_hash(data)


def root_hash(leaf_hashes: Sequence[bytes]) -> bytes:
    """Compute the Merkle Tree Hash of a list of leaf hashes.

    Runs in O(n) hashes and memory, so 100k leaves take a fraction of a second.

    Args:
        leaf_hashes: The leaves' hashes (`leaf_hash` outputs) in log order.

    Returns:
        ``MTH(D[n])`` (RFC 9162 §2.1.1); `EMPTY_ROOT` for no leaves.

    Raises:
        InvalidValueError: A leaf hash is not 32 bytes.
    """
    _check_hashes(leaf_hashes)
    return _mth(leaf_hashes, 0, len(leaf_hashes))


def inclusion_proof(leaf_hashes: Sequence[bytes], index: int) -> list[bytes]:
    """Build the inclusion proof (audit path) of one leaf in the tree of all given leaves.

    Args:
        leaf_hashes: The tree's leaf hashes in log order (the tree size is their count).
        index: 0-based index of the leaf to prove, ``0 <= index < len(leaf_hashes)``.

    Returns:
        ``PATH(index, D[n])`` (RFC 9162 §2.1.3.1): sibling hashes from the leaf up to the root.

    Raises:
        InvalidValueError: `index` is outside the tree, or a leaf hash is not 32 bytes.
    """
    size = len(leaf_hashes)
    _check_int(index, "leaf index")
    if not 0 <= index < size:
        raise InvalidValueError(f"leaf index {index} is outside a tree of {size} leaves")
    _check_hashes(leaf_hashes)
    return _path(leaf_hashes, index, 0, size)


def consistency_proof(leaf_hashes: Sequence[bytes], first: int) -> list[bytes]:
    """Build the proof that the tree of the first `first` leaves is a prefix of the whole tree.

    Args:
        leaf_hashes: The newer tree's leaf hashes in log order (its size is their count).
        first: Size of the older tree, ``0 < first <= len(leaf_hashes)``.

    Returns:
        ``PROOF(first, D[n])`` (RFC 9162 §2.1.4.1); empty when ``first == n``.

    Raises:
        InvalidValueError: `first` is out of range, or a leaf hash is not 32 bytes.
    """
    size = len(leaf_hashes)
    _check_int(first, "first tree size")
    if not 0 < first <= size:
        raise InvalidValueError(
            f"first tree size {first} is not in 1..{size} (the second tree's size)"
        )
    _check_hashes(leaf_hashes)
    return _subproof(leaf_hashes, first, 0, size, complete=True)


def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """Check an inclusion proof with the algorithm of RFC 9162 §2.1.3.2.

    Args:
        leaf_hash: Hash of the leaf claimed to be in the tree (32 bytes).
        index: The leaf's 0-based index, ``0 <= index < size``.
        size: Size of the tree the proof is for (> 0).
        proof: The audit path, as built by `inclusion_proof`.
        root: The tree's root hash (32 bytes), e.g. from a verified checkpoint.

    Returns:
        True iff the proof shows that `leaf_hash` is leaf `index` of the tree with `root`;
        False for any wrong, tampered, short or long proof (also a proof element that is not
        32 bytes).

    Raises:
        InvalidValueError: `index`/`size` are out of range, or `leaf_hash`/`root` are not 32 bytes.
    """
    _check_int(index, "leaf index")
    _check_int(size, "tree size")
    if not 0 <= index < size:
        raise InvalidValueError(f"leaf index {index} is outside a tree of {size} leaves")
    _check_hash(leaf_hash, "leaf hash")
    _check_hash(root, "root hash")
    if not _well_formed(proof):
        return False
    return _inclusion_root_matches(leaf_hash, index, size, proof, root)


def verify_consistency(
    first: int, second: int, first_root: bytes, second_root: bytes, proof: Sequence[bytes]
) -> bool:
    """Check a consistency proof with the algorithm of RFC 9162 §2.1.4.2.

    ``first == second`` is accepted when the proof is empty and both roots are equal (the
    RFC's algorithm assumes ``first < second``).

    Args:
        first: Size of the older tree, ``0 < first <= second``.
        second: Size of the newer tree.
        first_root: Root hash of the older tree (32 bytes).
        second_root: Root hash of the newer tree (32 bytes).
        proof: The consistency proof, as built by `consistency_proof`.

    Returns:
        True iff the proof shows that the tree `first_root` is a prefix of the tree
        `second_root`; False for any wrong, tampered, short or long proof.

    Raises:
        InvalidValueError: The sizes are out of range, or a root is not 32 bytes.
    """
    _check_int(first, "first tree size")
    _check_int(second, "second tree size")
    if not 0 < first <= second:
        raise InvalidValueError(
            f"tree sizes must satisfy 0 < first <= second, got {first}, {second}"
        )
    _check_hash(first_root, "first root hash")
    _check_hash(second_root, "second root hash")
    if not _well_formed(proof):
        return False
    if first == second:
        return not proof and first_root == second_root
    return _consistency_roots_match(first, second, first_root, second_root, list(proof))


# --- tree construction (RFC 9162 §2.1.1, §2.1.3.1, §2.1.4.1) ------------------------------------


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (n >= 2), the RFC 9162 §2.1.1 split point."""
    return 1 << ((n - 1).bit_length() - 1)


def _mth(leaves: Sequence[bytes], lo: int, hi: int) -> bytes:
    """MTH(D[lo:hi]) bottom-up in O(hi - lo).

    Pairing neighbours level by level and carrying an odd last node up unchanged builds the same
    left-balanced tree as the recursive split of RFC 9162 §2.1.1: the first k leaves (k a power of
    two) form a perfect subtree, and the rest is paired independently from the aligned offset k.
    """
    if lo == hi:
        return EMPTY_ROOT
    level = list(leaves[lo:hi])
    while len(level) > 1:
        paired = [_node(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def _path(leaves: Sequence[bytes], m: int, lo: int, hi: int) -> list[bytes]:
    """PATH(m, D[lo:hi]) of RFC 9162 §2.1.3.1, m relative to lo."""
    n = hi - lo
    if n == 1:
        return []
    k = _split(n)
    if m < k:
        return [*_path(leaves, m, lo, lo + k), _mth(leaves, lo + k, hi)]
    return [*_path(leaves, m - k, lo + k, hi), _mth(leaves, lo, lo + k)]


def _subproof(leaves: Sequence[bytes], m: int, lo: int, hi: int, *, complete: bool) -> list[bytes]:
    """SUBPROOF(m, D[lo:hi], b) of RFC 9162 §2.1.4.1; `complete` is the flag b."""
    n = hi - lo
    if m == n:
        return [] if complete else [_mth(leaves, lo, hi)]
    k = _split(n)
    if m <= k:
        return [*_subproof(leaves, m, lo, lo + k, complete=complete), _mth(leaves, lo + k, hi)]
    return [*_subproof(leaves, m - k, lo + k, hi, complete=False), _mth(leaves, lo, lo + k)]


# --- verification (RFC 9162 §2.1.3.2, §2.1.4.2) -------------------------------------------------


def _inclusion_root_matches(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    fn, sn = index, size - 1  # step 2
    r = leaf  # step 3
    for p in proof:  # step 4
        if sn == 0:  # 4a: the path is longer than the tree is deep
            return False
        if fn & 1 or fn == sn:  # 4b: p is a left sibling
            r = _node(p, r)
            if not fn & 1:
                fn, sn = _skip_right_edge(fn, sn)
        else:  # p is a right sibling
            r = _node(r, p)
        fn, sn = fn >> 1, sn >> 1  # 4c
    return sn == 0 and r == root  # step 5


def _consistency_roots_match(
    first: int, second: int, first_root: bytes, second_root: bytes, path: list[bytes]
) -> bool:
    if not path:  # step 1
        return False
    if first & (first - 1) == 0:  # step 2: first is a power of two, its root is a full subtree
        path = [first_root, *path]
    fn, sn = first - 1, second - 1  # step 3
    while fn & 1:  # step 4
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]  # step 5
    for c in path[1:]:  # step 6
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = _node(c, fr), _node(c, sr)
            if not fn & 1:
                fn, sn = _skip_right_edge(fn, sn)
        else:
            sr = _node(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return fr == first_root and sr == second_root and sn == 0  # step 7


def _skip_right_edge(fn: int, sn: int) -> tuple[int, int]:
    """Right-shift fn and sn equally until LSB(fn) is set or fn is 0 (§2.1.3.2 and §2.1.4.2)."""
    while fn and not fn & 1:
        fn, sn = fn >> 1, sn >> 1
    return fn, sn


# --- argument checks ----------------------------------------------------------------------------


def _check_int(value: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidValueError(f"{what} must be an integer, got {value!r}")


def _check_hash(value: bytes, what: str) -> None:
    if not isinstance(value, bytes) or len(value) != HASH_SIZE:
        raise InvalidValueError(f"{what} must be {HASH_SIZE} bytes")


def _check_hashes(values: Sequence[bytes]) -> None:
    for i, value in enumerate(values):
        if not isinstance(value, bytes) or len(value) != HASH_SIZE:
            raise InvalidValueError(f"leaf hash {i} must be {HASH_SIZE} bytes")


def _well_formed(proof: Sequence[bytes]) -> bool:
    return all(isinstance(p, bytes) and len(p) == HASH_SIZE for p in proof)
