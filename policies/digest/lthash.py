"""A homomorphic multiset hash (LtHash16), the basis of the v2 snapshot digest.

LtHash (Bellare and Micciancio, 1997; the lattice-based variant Lewi, Kim, Maykov and Weis describe
in "Securing Update Propagation with Homomorphic Hashing", 2019) maps a multiset of elements to
the lane-wise sum, modulo 2**16, of one 1024-lane vector per element. Adding or removing an
element is one vector addition, so a digest over a whole fabric follows a change in time
proportional to the change, and the order in which elements were added does not matter. Finding
two different multisets with the same sum reduces to the short integer solution problem; with
1024 lanes of 16 bits that is estimated at over 200 bits of security (Lewi et al., §3).

Each element is first hashed with SHA-256 by the caller (`element_hash`); the vector is the
SHAKE128 expansion of that hash under a domain tag. The state is 2,048 bytes; `MultisetHash.digest`
shortens it to a SHA-256 so that the published digest stays 32 bytes.
"""

from __future__ import annotations

import hashlib

LANES = 1024
STATE_BYTES = 2 * LANES
_DOMAIN = b"isofabric/lthash16/v1\x00"

# Lanes are 16-bit little-endian words of one big integer: adding two states lane by lane without
# carries crossing lanes is SWAR arithmetic on the low 15 bits plus an XOR of the top bits.
_FULL = (1 << (16 * LANES)) - 1
_HIGH = int.from_bytes(b"\x00\x80" * LANES, "little")
_LOW = _FULL ^ _HIGH
_ONE = int.from_bytes(b"\x01\x00" * LANES, "little")


def element_hash(canonical: bytes) -> bytes:
    """The SHA-256 that stands for one element (its canonical bytes) in a multiset hash."""
    return hashlib.sha256(canonical).digest()


def _add(a: int, b: int) -> int:
    return ((a & _LOW) + (b & _LOW)) ^ ((a ^ b) & _HIGH)


def _negate(a: int) -> int:
    return _add(a ^ _FULL, _ONE)  # two's complement in every lane


def _vector(element: bytes) -> int:
    return int.from_bytes(hashlib.shake_128(_DOMAIN + element).digest(STATE_BYTES), "little")


class MultisetHash:
    """The sum of the elements' vectors; `add` and `remove` are inverse, order-independent.

    Property: for multisets A and B of element hashes, the state after adding A then removing B
    equals the state of the multiset A - B (when B is contained in A), whatever the order.
    """

    __slots__ = ("_state",)

    def __init__(self, state: bytes | None = None) -> None:
        if state is not None and len(state) != STATE_BYTES:
            raise ValueError(f"an LtHash16 state is {STATE_BYTES} bytes, not {len(state)}")
        self._state = int.from_bytes(state, "little") if state else 0

    def add(self, element: bytes) -> None:
        """Add one element (its `element_hash`)."""
        self._state = _add(self._state, _vector(element))

    def remove(self, element: bytes) -> None:
        """Remove one element previously added."""
        self._state = _add(self._state, _negate(_vector(element)))

    def state(self) -> bytes:
        """The 2,048-byte state, to store and resume from."""
        return self._state.to_bytes(STATE_BYTES, "little")

    def digest(self) -> str:
        """Lower-case hex SHA-256 of the state."""
        return hashlib.sha256(self.state()).hexdigest()
