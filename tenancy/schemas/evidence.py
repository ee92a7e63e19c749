"""Isolation proofs: the issue request and the signed envelope returned."""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
)

from tenancy.schemas.common import (
    Slug,
    Strict,
)


class ProofIssue(Strict):
    """Body of POST /v1/tenants/{tenant}/isolation-proofs."""

    fabric: Slug


class ProofCreated(BaseModel):
    """An issued isolation proof: its id and the DSSE envelope (in-toto Statement v1)."""

    id: str
    envelope: dict[str, Any]
