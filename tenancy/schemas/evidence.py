"""Evidence: audit-log entries, checkpoints and Merkle proofs, signing keys, isolation proofs.

Field names and nesting are the JSON documents the API has always returned (RFC 9162 proofs,
C2SP signed notes, RFC 8037 JWKs, DSSE envelopes); byte strings are standard base64 unless the
field says hex.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tenancy.schemas.common import (
    Slug,
    Strict,
)

# --- the audit log ------------------------------------------------------------------------------


class AuditEntryView(BaseModel):
    """One audit-log entry, exactly the document its Merkle leaf hashes (nulls kept)."""

    index: int = Field(description="Position in the log, from 0")
    time: str = Field(description="RFC 3339 UTC time of the change ('Z')")
    principal: str
    role: str
    action: str = Field(examples=["allocation.create"])
    target: str = Field(examples=["tenants/acme"])
    request_id: str | None
    fabric: str | None
    digest_before: str | None = Field(description="The fabric's snapshot digest before the change")
    digest_after: str | None = Field(description="The fabric's snapshot digest after the change")


class CheckpointView(BaseModel):
    """A signed checkpoint of the whole log: keep it to prove later that the log only grew."""

    origin: str = Field(description="The log's name (the signing key's name in the note)")
    size: int = Field(description="Number of entries the tree covers")
    root_hash: str = Field(description="RFC 9162 tree head, base64")
    note: str = Field(description="C2SP signed note (Ed25519) of origin, size and root hash")


class InclusionProofView(BaseModel):
    """RFC 9162 inclusion proof of entry `index` in the tree of the first `size` entries."""

    index: int
    size: int
    leaf_hash: str = Field(description="The entry's leaf hash, base64")
    path: list[str] = Field(description="Audit path, base64 hashes, leaf to root")


class ConsistencyProofView(BaseModel):
    """RFC 9162 consistency proof between the trees of `first` and `second` entries."""

    first: int
    second: int
    first_root: str = Field(description="Root hash of the first tree, base64")
    second_root: str = Field(description="Root hash of the second tree, base64")
    path: list[str] = Field(description="Consistency path, base64 hashes")


# --- signing keys -------------------------------------------------------------------------------


class PublicJWK(BaseModel):
    """An Ed25519 public key as an RFC 8037 JWK."""

    kty: str = Field(examples=["OKP"])
    crv: str = Field(examples=["Ed25519"])
    x: str = Field(description="The raw public key, base64url without padding")


class SigningKeyView(BaseModel):
    """A signing key's public parts; retired keys stay published so old signatures verify."""

    keyid: str = Field(description="Lowercase hex SHA-256 of the raw public key")
    name: str = Field(description="Key name in signed notes (the audit origin, then '.rN')")
    pem: str = Field(description="SubjectPublicKeyInfo PEM")
    jwk: PublicJWK
    status: Literal["active", "retired"]


class SigningKeysView(BaseModel):
    """Every signing key, oldest first."""

    keys: list[SigningKeyView]


# --- isolation proofs ---------------------------------------------------------------------------


class ProofIssue(Strict):
    """Body of POST /v1/tenants/{tenant}/isolation-proofs."""

    fabric: Slug


class DSSESignature(BaseModel):
    """One DSSE signature: the key's id and the base64 Ed25519 signature over the PAE."""

    keyid: str
    sig: str


class DSSEEnvelope(BaseModel):
    """A DSSE envelope whose payload is a base64 in-toto Statement v1 (RFC 8785 JSON)."""

    payload_type: str = Field(alias="payloadType", examples=["application/vnd.in-toto+json"])
    payload: str
    signatures: list[DSSESignature]


ProofViewKind = Literal["full", "tenant"]
_VIEW_DESCRIPTION = (
    "Whom the proof is for: 'full' (operators and auditors) names every member of the tenant's "
    "segments; 'tenant' (a tenant's roles) names only the tenant's and the services' ports and "
    "counts the others. The predicate's 'view' says the same."
)


class ProofCreated(BaseModel):
    """An issued isolation proof: its id, view and the DSSE envelope (in-toto Statement v1)."""

    id: str
    view: ProofViewKind = Field(description=_VIEW_DESCRIPTION)
    envelope: DSSEEnvelope


class ProofView(BaseModel):
    """A stored isolation proof."""

    id: str
    tenant: str
    fabric: str
    created_at: str = Field(description="RFC 3339 UTC time of issue ('Z')")
    view: ProofViewKind = Field(description=_VIEW_DESCRIPTION)
    envelope: DSSEEnvelope
