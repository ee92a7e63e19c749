"""Route /v1/changesets: many operations applied and verified as one unit (operators)."""

from __future__ import annotations

from api.deps import Uow, authorized_router
from tenancy.schemas.changesets import ChangeSetCreate, ChangeSetView
from tenancy.usecases import changesets

router = authorized_router(prefix="/v1/changesets", tags=["changesets"])


@router.post("")
def apply_changeset(spec: ChangeSetCreate, uow: Uow) -> ChangeSetView:
    """Apply up to 10,000 operations (create_tenant, allocate, release, grant, revoke, offboard)
    in order as one unit: all or nothing, one verification per fabric, one audit entry per
    operation. A failing operation is named by its index in the problem (`operation`).
    """  # noqa: D205 - the published OpenAPI description
    return changesets.apply_changeset(uow, spec=spec)
