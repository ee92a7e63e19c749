"""The ``dry_run`` query flag, read the same way by every layer that looks at it.

The route (api/dry_run.py), the Idempotency-Key middleware (api/idempotency.py) and the request
observer (api/request_observer.py) must agree on whether a request is a dry run: read one way by
the route and another by the middleware, ``?dry_run=%20true`` ran as a dry run and was then
recorded and replayed as if it had changed something.
"""

from __future__ import annotations

from starlette.datastructures import QueryParams

# What FastAPI reads as a boolean query parameter; case and surrounding whitespace are ignored.
DRY_RUN_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
DRY_RUN_FALSE = frozenset({"", "0", "false", "f", "no", "n", "off"})


def dry_run_flag(query: str | bytes) -> bool | None:
    """Whether the query string asks for a dry run: its last ``dry_run`` value, as a boolean.

    False when there is none; None when the value is not a boolean (the route refuses it).
    """
    text = query.decode("latin-1") if isinstance(query, bytes) else query
    raw = QueryParams(text).get("dry_run")
    if raw is None:
        return False
    value = raw.strip().lower()
    if value in DRY_RUN_TRUE:
        return True
    return False if value in DRY_RUN_FALSE else None
