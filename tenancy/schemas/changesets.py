"""Change sets (issue 12, item 3): many operations applied and verified as one unit."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StrictBool

from tenancy.schemas.common import Slug, Strict
from tenancy.schemas.tenants import AllocationCreate, GrantCreate, TenantCreate
from tenancy.schemas.what_if import FabricWhatIf

MAX_OPERATIONS = 10_000
ALLOCATION_ID_PATTERN = r"^[0-9a-f-]{36}$"


class CreateTenantOp(TenantCreate):
    """`POST /v1/tenants` as an operation."""

    op: Literal["create_tenant"]


class AllocateOp(AllocationCreate):
    """`POST /v1/tenants/{tenant}/allocations` as an operation."""

    op: Literal["allocate"]
    tenant: Slug


class ReleaseOp(Strict):
    """`DELETE /v1/tenants/{tenant}/allocations/{allocation_id}` as an operation."""

    op: Literal["release"]
    tenant: Slug
    allocation_id: str = Field(max_length=64)


class GrantOp(GrantCreate):
    """`POST /v1/tenants/{tenant}/grants` as an operation."""

    op: Literal["grant"]
    tenant: Slug


class RevokeOp(Strict):
    """`DELETE /v1/tenants/{tenant}/grants/{grant_id}` as an operation."""

    op: Literal["revoke"]
    tenant: Slug
    grant_id: str = Field(max_length=64)


class OffboardOp(Strict):
    """`DELETE /v1/tenants/{tenant}` as an operation."""

    op: Literal["offboard"]
    tenant: Slug


Operation = Annotated[
    CreateTenantOp | AllocateOp | ReleaseOp | GrantOp | RevokeOp | OffboardOp,
    Field(discriminator="op"),
]


class ChangeSetCreate(Strict):
    """Operations applied in order as one verified unit: all of them, or none."""

    operations: list[Operation] = Field(min_length=1, max_length=MAX_OPERATIONS)
    dry_run: StrictBool = Field(
        default=False,
        description="Apply nothing: answer the verdict, reachability delta and artifact diffs",
    )


class OperationResult(BaseModel):
    """One operation's outcome, as its own route answers it (null for releases and revokes)."""

    index: int
    op: str
    result: dict[str, object] | None = None


class FabricOutcome(BaseModel):
    """A fabric the change set touched, verified once after all operations."""

    fabric: str
    holds: bool
    snapshot_digest: str


class ChangeSetView(BaseModel):
    """The applied change set: each operation's result in order, each touched fabric's verdict."""

    dry_run: bool
    results: list[OperationResult]
    fabrics: list[FabricOutcome]
    # Dry runs only: per touched fabric, the verdict, reachability delta and artifact diffs.
    what_if: list[FabricWhatIf] | None = None
