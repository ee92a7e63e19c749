"""Route /v1/keys: the public keys that verify isolation proofs and audit checkpoints."""

from __future__ import annotations

from api.deps import Uow, authorized_router
from tenancy.schemas import SigningKeysView
from tenancy.usecases import signing_keys

router = authorized_router(tags=["proofs"])


@router.get("/v1/keys")
def list_keys(uow: Uow) -> SigningKeysView:
    """The public keys proofs and checkpoints are signed with: keyid, PEM, JWK and status."""
    return signing_keys.list_keys(uow)
