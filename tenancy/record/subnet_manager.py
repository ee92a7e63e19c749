"""The OpenSM management keys of an InfiniBand fabric (M_Key, SM_Key, SA_Key).

They are never stored: each derives from the OpenSM secret (a 0600 file beside the database, see
tenancy/store/key_store.py) and the fabric's name, so every replica holding the secret renders the
same opensm.conf and a database reader learns none of them. Settings may override them
(``ISOFABRIC_OPENSM_*_KEY``).
"""

from __future__ import annotations

import hashlib
import hmac

from policies.infiniband.render import SubnetManagerKeys
from tenancy import models as m
from tenancy.store import key_store
from tenancy.store.settings import Settings

# Domain separation: the same secret yields unrelated keys per fabric and per key kind.
_LABEL = "isofabric/opensm/v1"


def derive_key(secret: bytes, fabric_name: str, kind: str) -> int:
    """A 64-bit key: HMAC-SHA-256(secret, label/fabric/kind), top bit set (never 0 nor 1)."""
    message = f"{_LABEL}/{fabric_name}/{kind}".encode()
    digest = hmac.new(secret, message, hashlib.sha256).digest()
    # OpenSM treats 0 as "no key"; the top bit keeps every derived key far from 0 and 1.
    return int.from_bytes(digest[:8], "big") | (1 << 63)


def subnet_manager_keys(fabric: m.Fabric, settings: Settings) -> SubnetManagerKeys:
    """Keys from settings when configured, otherwise derived from the OpenSM secret.

    Raises:
        KeyUnavailableError: a key is not configured and the OpenSM secret is missing (503).
    """
    m_key, sm_key, sa_key = settings.opensm_m_key, settings.opensm_sm_key, settings.opensm_sa_key
    if m_key and sm_key and sa_key:
        return SubnetManagerKeys(m_key=m_key, sm_key=sm_key, sa_key=sa_key)
    secret = key_store.load_opensm_secret(settings)
    return SubnetManagerKeys(
        m_key=m_key or derive_key(secret, fabric.name, "m_key"),
        sm_key=sm_key or derive_key(secret, fabric.name, "sm_key"),
        sa_key=sa_key or derive_key(secret, fabric.name, "sa_key"),
    )
