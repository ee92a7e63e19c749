"""The OpenSM management keys of an InfiniBand fabric (M_Key, SM_Key, SA_Key).

Generated once per fabric, so every replica renders the same opensm.conf; settings may override
them (ISOFABRIC_OPENSM_*_KEY).
"""

from __future__ import annotations

import secrets

from sqlmodel import Session

from policies.infiniband.model import format_guid
from policies.infiniband.render import SubnetManagerKeys
from tenancy import models as m
from tenancy.settings import Settings


def create_subnet_manager_secret(session: Session, fabric: m.Fabric) -> None:
    """Generate the fabric's OpenSM keys once, so every replica renders the same opensm.conf."""
    values = [secrets.randbits(64) | (1 << 63) for _ in range(3)]  # never 0 or 1
    m_key, sm_key, sa_key = (format_guid(v) for v in values)
    session.add(
        m.SubnetManagerSecret(fabric_id=m.pk(fabric), m_key=m_key, sm_key=sm_key, sa_key=sa_key)
    )


def subnet_manager_keys(
    session: Session, fabric: m.Fabric, settings: Settings
) -> SubnetManagerKeys:
    """Keys from settings when configured, otherwise the fabric's generated ones."""
    stored = session.get(m.SubnetManagerSecret, fabric.id)
    if stored is None:
        create_subnet_manager_secret(session, fabric)
        session.flush()
        stored = session.get(m.SubnetManagerSecret, fabric.id)
        assert stored is not None
    return SubnetManagerKeys(
        m_key=settings.opensm_m_key or int(stored.m_key, 16),
        sm_key=settings.opensm_sm_key or int(stored.sm_key, 16),
        sa_key=settings.opensm_sa_key or int(stored.sa_key, 16),
    )
