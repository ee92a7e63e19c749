"""Change sets: many operations applied and verified as one unit."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StrictBool

from tenancy.schemas.common import Slug, Strict
from tenancy.schemas.partitions import MAX_MEMBERS, MemberSpec, PartitionCreate, PartitionView
from tenancy.schemas.tenants import (
    AllocationCreate,
    AllocationView,
    GrantCreate,
    GrantView,
    TenantCreate,
    TenantView,
)
from tenancy.schemas.what_if import FabricWhatIf

MAX_OPERATIONS = 10_000
ALLOCATION_ID_PATTERN = r"^[0-9a-f-]{36}$"


class CreateTenantOp(TenantCreate):
    """`POST /v1/tenants` as an operation."""

    op: Literal["create_tenant"] = Field(description="'create_tenant': onboard a tenant")


class AllocateOp(AllocationCreate):
    """`POST /v1/tenants/{tenant}/allocations` as an operation."""

    op: Literal["allocate"] = Field(description="'allocate': allocate nodes to `tenant`")
    tenant: Slug = Field(description="The tenant's name")


class ReleaseOp(Strict):
    """`DELETE /v1/tenants/{tenant}/allocations/{allocation_id}` as an operation."""

    op: Literal["release"] = Field(description="'release': release one of `tenant`'s allocations")
    tenant: Slug = Field(description="The tenant's name")
    allocation_id: str = Field(
        max_length=64,
        description="The allocation's id, a UUID",
    )


class GrantOp(GrantCreate):
    """`POST /v1/tenants/{tenant}/grants` as an operation."""

    op: Literal["grant"] = Field(description="'grant': let `tenant` reach a shared service")
    tenant: Slug = Field(description="The tenant's name")


class RevokeOp(Strict):
    """`DELETE /v1/tenants/{tenant}/grants/{grant_id}` as an operation."""

    op: Literal["revoke"] = Field(description="'revoke': revoke one of `tenant`'s grants")
    tenant: Slug = Field(description="The tenant's name")
    grant_id: str = Field(max_length=64, description="The grant's id, a UUID")


class OffboardOp(Strict):
    """`DELETE /v1/tenants/{tenant}` as an operation."""

    op: Literal["offboard"] = Field(description="'offboard': offboard `tenant`")
    tenant: Slug = Field(description="The tenant's name")


class CreatePartitionOp(PartitionCreate):
    """`POST /v1/tenants/{tenant}/partitions` as an operation."""

    op: Literal["create_partition"] = Field(
        description="'create_partition': an additional InfiniBand partition of `tenant`"
    )
    tenant: Slug = Field(description="The tenant's name")


class SetMembersOp(Strict):
    """`PUT /v1/tenants/{tenant}/partitions/{name}/members` as an operation."""

    op: Literal["set_members"] = Field(
        description="'set_members': make a partition's members exactly `members`"
    )
    tenant: Slug = Field(description="The tenant's name")
    name: Slug = Field(description="The partition's name")
    fabric: Slug | None = Field(
        default=None, description="The fabric; needed when the name is on several"
    )
    members: list[MemberSpec] = Field(max_length=MAX_MEMBERS, description="Every member, once")


class DeletePartitionOp(Strict):
    """`DELETE /v1/tenants/{tenant}/partitions/{name}` as an operation."""

    op: Literal["delete_partition"] = Field(
        description="'delete_partition': delete one of `tenant`'s additional partitions"
    )
    tenant: Slug = Field(description="The tenant's name")
    name: Slug = Field(description="The partition's name")
    fabric: Slug | None = Field(
        default=None, description="The fabric; needed when the name is on several"
    )


PartitionOps = CreatePartitionOp | SetMembersOp | DeletePartitionOp
Operation = Annotated[
    CreateTenantOp
    | AllocateOp
    | ReleaseOp
    | GrantOp
    | RevokeOp
    | OffboardOp
    | CreatePartitionOp
    | SetMembersOp
    | DeletePartitionOp,
    Field(discriminator="op"),
]


class ChangeSetCreate(Strict):
    """Operations applied in order as one verified unit: all of them, or none."""

    operations: list[Operation] = Field(
        min_length=1,
        max_length=MAX_OPERATIONS,
        description="1 to 10,000 operations, applied in order; each names its kind in `op`",
    )
    dry_run: StrictBool = Field(
        default=False,
        description="Apply nothing: answer the verdict, reachability delta and artifact diffs",
    )


class OperationResult(BaseModel):
    """One operation's outcome, as its own route answers it (null for releases and revokes)."""

    index: int = Field(description="The operation's 0-based index in `operations`")
    op: str = Field(description="The operation's kind, as sent in `op`")
    result: TenantView | AllocationView | GrantView | PartitionView | None = Field(
        default=None,
        description="What the operation's own route answers: a TenantView (create_tenant, "
        "offboard), an AllocationView (allocate), a GrantView (grant) or a PartitionView "
        "(create_partition, set_members); null for release, revoke and delete_partition, "
        "whose routes answer 204",
    )


class FabricOutcome(BaseModel):
    """A fabric the change set touched, verified once after all operations."""

    fabric: str = Field(description="The fabric's name")
    holds: bool = Field(description="Whether the fabric verifies after the whole change set")
    snapshot_digest: str = Field(description="Digest of the fabric's state after the change set")


class ChangeSetView(BaseModel):
    """The applied change set: each operation's result in order, each touched fabric's verdict."""

    dry_run: bool = Field(description="Whether this was a dry run (nothing written)")
    results: list[OperationResult] = Field(description="One result per operation, in order")
    fabrics: list[FabricOutcome] = Field(description="Each fabric the change set touched")
    # Dry runs only: per touched fabric, the verdict, reachability delta and artifact diffs.
    what_if: list[FabricWhatIf] | None = Field(
        default=None,
        description="Dry runs only: per touched fabric, the verdict, reachability delta and "
        "artifact diffs; null when applied",
    )
