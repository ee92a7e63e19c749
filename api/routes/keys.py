"""Route /v1/keys: the public keys that verify isolation proofs and audit checkpoints."""

from __future__ import annotations

from api.deps import Uow, authorized_router
from tenancy.schemas import KeyTransitionsView, SigningKeysView
from tenancy.usecases import key_retirement, signing_keys

router = authorized_router(tags=["proofs"])


@router.get("/v1/keys")
def list_keys(uow: Uow) -> SigningKeysView:
    """The public keys proofs and checkpoints are signed with: keyid, PEM, JWK and status."""
    return signing_keys.list_keys(uow)


@router.get("/v1/keys/transitions")
def list_key_transitions(uow: Uow) -> KeyTransitionsView:
    """Every key transition statement (signed by the retired key and its successor).

    A deploy agent that pinned a retired key reads these to learn its successor
    (docs/operators/deploy-opensm.md, "Key rotation and the agents"); every role may read
    them, agents of any fabric too.
    """
    return key_retirement.transitions(uow)
