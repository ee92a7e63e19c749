"""``?dry_run=true`` on mutating routes: answer what the change would do.

The unit of work of such a request rehearses its write transaction (tenancy/store/uow.py): the use
case runs, its effect on each fabric is computed (verdict, reachability delta, artifact diffs), and
`DryRunDone` rolls everything back; its handler answers 200 with the `DryRunView`. Token and key
management have no dry run (a rehearsed token would be a secret shown and never valid): a request
for one is refused rather than silently applied. The Idempotency-Key middleware ignores dry runs.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from api.dry_run_flag import dry_run_flag
from policies.errors import InvalidValueError

NO_DRY_RUN_PREFIXES = ("/v1/tokens", "/v1/keys")
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def dry_run_requested(request: Request) -> bool:
    """Whether the request asks for a dry run (only mutating methods can).

    Raises:
        InvalidValueError: the value is not a boolean, or the route has no dry run.
    """
    if request.method not in MUTATING:
        return False
    flag = dry_run_flag(request.url.query)
    if flag is None:
        raw = request.query_params.get("dry_run", "")
        raise InvalidValueError(f"dry_run must be true or false, not '{raw[:20]}'")
    if flag and request.url.path.startswith(NO_DRY_RUN_PREFIXES):
        raise InvalidValueError("token and key management have no dry run; nothing was changed")
    return flag


async def dry_run_answer(_request: Request, error: Exception) -> JSONResponse:
    """The handler of `DryRunDone`: 200 with the rehearsed request's what-if view."""
    answer = getattr(error, "answer", None)
    body = answer.model_dump(mode="json", by_alias=True) if isinstance(answer, BaseModel) else {}
    return JSONResponse(body)
