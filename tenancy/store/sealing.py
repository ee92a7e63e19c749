"""Sealed bytes: AES-256-GCM under a key that is never in the database.

Files rendered from secrets (opensm.conf carries the subnet's M_Key, SM_Key and SA_Key; see
`policies.artifacts.holds_secrets`) are kept only sealed: in the read cache the replicas share
(tenancy/record/read_cache_store.py) and among retained snapshot files
(tenancy/usecases/snapshot_history.py). The key derives from the secret render inputs
themselves, which live in files beside the database (tenancy/store/key_store.py) or in
settings, so a database reader, or a backup's, can open none of them. Each sealed value is bound
to what it stands for (associated data): a row moved under another name does not open.
"""

from __future__ import annotations

import hashlib
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

# AES-GCM's standard nonce: 96 random bits per value, far from a collision at one value per
# file and state (NIST SP 800-38D, 8.2.2).
NONCE_BYTES = 12


def seal_key(secret_inputs: bytes) -> bytes:
    """The AES-256 key that seals the files rendered from `secret_inputs` (their encoding)."""
    return hashlib.sha256(b"isofabric/read-cache/v1/seal\0" + secret_inputs).digest()


def seal(key: bytes, plain: bytes, bound_to: bytes) -> bytes:
    """`plain` encrypted and authenticated under `key`, bound to `bound_to`: nonce + ciphertext."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plain, bound_to)


def unseal(key: bytes, sealed: bytes, bound_to: bytes) -> bytes | None:
    """What `seal` sealed; None if another key sealed it, it is bound elsewhere or altered."""
    nonce, ciphertext = sealed[:NONCE_BYTES], sealed[NONCE_BYTES:]
    try:
        return AESGCM(key).decrypt(nonce, ciphertext, bound_to)
    except (InvalidTag, ValueError):
        return None
