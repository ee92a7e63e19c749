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

PRINCIPAL = (
    "Who made the change: 'token:<name>:<id>' for an API token, 'admin-token', 'anonymous' "
    "(open mode) or 'system' (the service itself)"
)


class AuditEntryView(BaseModel):
    """One audit-log entry, exactly the document its Merkle leaf hashes (nulls kept)."""

    index: int = Field(description="Position in the log, from 0")
    time: str = Field(description="RFC 3339 UTC time of the change ('Z')")
    principal: str = Field(description=PRINCIPAL)
    role: str = Field(description="The principal's role, e.g. 'operator' or 'tenant-admin'")
    action: str = Field(
        examples=["allocation.create"], description="What was done: '<resource>.<verb>'"
    )
    target: str = Field(
        examples=["tenants/acme"], description="What it was done to, as a path without /v1"
    )
    request_id: str | None = Field(
        description="The request's X-Request-ID; null for changes made outside a request"
    )
    fabric: str | None = Field(description="The fabric changed; null when none was")
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

    index: int = Field(description="The entry's 0-based index in the log")
    size: int = Field(description="Entries in the tree the proof is about")
    leaf_hash: str = Field(description="The entry's leaf hash, base64")
    path: list[str] = Field(description="Audit path, base64 hashes, leaf to root")


class ConsistencyProofView(BaseModel):
    """RFC 9162 consistency proof between the trees of `first` and `second` entries."""

    first: int = Field(description="Entries in the older tree")
    second: int = Field(description="Entries in the newer tree")
    first_root: str = Field(description="Root hash of the first tree, base64")
    second_root: str = Field(description="Root hash of the second tree, base64")
    path: list[str] = Field(description="Consistency path, base64 hashes")


# --- signing keys -------------------------------------------------------------------------------


class PublicJWK(BaseModel):
    """An Ed25519 public key as an RFC 8037 JWK."""

    kty: str = Field(examples=["OKP"], description="Key type: 'OKP' (RFC 8037)")
    crv: str = Field(examples=["Ed25519"], description="Curve: 'Ed25519'")
    x: str = Field(description="The raw public key, base64url without padding")


class SigningKeyView(BaseModel):
    """A signing key's public parts; retired keys stay published so old signatures verify."""

    keyid: str = Field(description="Lowercase hex SHA-256 of the raw public key")
    name: str = Field(description="Key name in signed notes (the audit origin, then '.rN')")
    pem: str = Field(description="SubjectPublicKeyInfo PEM")
    jwk: PublicJWK = Field(description="The same public key as an RFC 8037 JWK")
    status: Literal["active", "retired"] = Field(
        description="'active': signs new proofs and checkpoints; 'retired': published only so "
        "that old signatures verify"
    )
    retired: RetirementView | None = Field(
        default=None,
        description="On a key retired by a signed transition: what it could sign while active",
    )


class RetirementView(BaseModel):
    """Where a retired key's signing ended: it verifies only what it could sign before."""

    at: str = Field(description="When the rotation retired it (RFC 3339): proofs issued later fail")
    epoch: int = Field(description="The manifest epoch at the rotation")
    log_size: int = Field(
        description="Audit log entries before the rotation's own: larger checkpoints fail"
    )


class SigningKeysView(BaseModel):
    """Every signing key, oldest first."""

    keys: list[SigningKeyView] = Field(description="Every signing key, oldest first")


class KeyTransitionsView(BaseModel):
    """Every key transition statement, oldest first (policies/evidence/key_transition.py)."""

    transitions: list[DSSEEnvelope] = Field(
        description="DSSE envelopes (payloadType application/vnd.isofabric.key-transition+json), "
        "each signed by the retired key and its successor"
    )


# --- isolation proofs ---------------------------------------------------------------------------


class ProofIssue(Strict):
    """Body of POST /v1/tenants/{tenant}/isolation-proofs."""

    fabric: Slug = Field(description="The fabric the proof is about (its name)")


class DSSESignature(BaseModel):
    """One DSSE signature: the key's id and the base64 Ed25519 signature over the PAE."""

    keyid: str = Field(description="The signing key's keyid (hex SHA-256 of the public key)")
    sig: str = Field(description="Ed25519 signature over the DSSE PAE of the payload, base64")


class DSSEEnvelope(BaseModel):
    """A DSSE envelope whose payload is a base64 in-toto Statement v1 (RFC 8785 JSON)."""

    payload_type: str = Field(
        alias="payloadType",
        examples=["application/vnd.in-toto+json"],
        description="Media type of the payload",
    )
    payload: str = Field(description="The signed document (RFC 8785 canonical JSON), base64")
    signatures: list[DSSESignature] = Field(description="Signatures over the payload")


ProofViewKind = Literal["full", "tenant"]
_VIEW_DESCRIPTION = (
    "Whom the proof is for: 'full' (operators and auditors) names every member of the tenant's "
    "segments; 'tenant' (a tenant's roles) names only the tenant's and the services' ports and "
    "counts the others. The predicate's 'view' says the same."
)


class ProofCreated(BaseModel):
    """An issued isolation proof: its id, view and the DSSE envelope (in-toto Statement v1)."""

    id: str = Field(description="The proof's id, a UUID: read it again at /v1/proofs/{proof_id}")
    view: ProofViewKind = Field(description=_VIEW_DESCRIPTION)
    envelope: DSSEEnvelope = Field(description="The signed in-toto Statement v1")


class ProofView(BaseModel):
    """A stored isolation proof."""

    id: str = Field(description="The proof's id, a UUID")
    tenant: str = Field(description="The tenant the proof is about")
    fabric: str = Field(description="The fabric the proof is about")
    created_at: str = Field(description="RFC 3339 UTC time of issue ('Z')")
    view: ProofViewKind = Field(description=_VIEW_DESCRIPTION)
    envelope: DSSEEnvelope = Field(description="The signed in-toto Statement v1")
