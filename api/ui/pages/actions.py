"""Operator actions' pages: a form, a confirmation showing the what-if, the commit (PRG).

Every path has an `actions` segment, which the policy (policies/authz.py) denies to every
role but the operator, for any method: the auditor gets a 403 on each of these pages, a
tenant role a 404 for another tenant's. For each action:

- GET  .../actions/<action>           the form (onboard, allocate, grant);
- GET  .../actions/<action>/confirm   the what-if of the form's values (a dry run: nothing is
                                      written), and a form that posts them with the CSRF token;
- POST .../actions/<action>           the change through the use case; 303 to the tenant page
                                      with a flash message, or the refusal (409) when the
                                      change would break isolation, nothing written.

Revoke and offboard take no input: their GET is the confirmation itself.
"""

from __future__ import annotations

import threading
from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from api.ui import actions
from api.ui.actions import Change
from api.ui.deps import ConsoleUow, console_router, read_form
from api.ui.flash import redirect_with_flash
from api.ui.render import render
from api.ui.session import CSRF_FIELD
from policies.errors import ConflictError, IsolationViolationError, NotFoundError
from tenancy.record import audit_log
from tenancy.store.pagination import MAX_LIMIT
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import fabrics, shared_services, tenants

router = console_router()
# The confirmation posts the audit log's length its what-if saw; the commit runs only if the
# log is still that long. Every change is audited, so a replayed form (a double submit, the
# back button) or one confirmed before another change is refused instead of committed again
# or committed unseen: the operator reviews the what-if of the state it will apply to.
SEEN_FIELD = "seen_log_size"
COMMITTING = threading.Lock()
STALE = (
    "nothing was written: the state changed since this change was confirmed, or this form "
    "was already sent. Open the action again to review its what-if."
)

TITLES = {
    "onboard": "Onboard a tenant",
    "allocate": "Allocate nodes",
    "grant": "Grant a shared service",
    "revoke": "Revoke a grant",
    "offboard": "Offboard a tenant",
}


# --- onboard -----------------------------------------------------------------------------------


@router.get("/actions/onboard")
async def onboard_form(request: Request, uow: ConsoleUow) -> Response:
    """The onboarding form: name, kind, QoS class, billing account."""
    classes = await run_in_threadpool(_qos_names, uow)
    return _form_page(request, "onboard", "/ui/actions/onboard", {"qos_classes": classes})


@router.get("/actions/onboard/confirm")
async def onboard_confirm(request: Request, uow: ConsoleUow) -> Response:
    """What onboarding the form's tenant would do."""
    change = actions.onboard(request.query_params)
    return await _confirm(request, uow, change, "/ui/actions/onboard")


@router.post("/actions/onboard")
async def onboard_commit(request: Request, uow: ConsoleUow) -> Response:
    """Onboard the tenant; to its page."""
    change = actions.onboard(await read_form(request))
    return await _commit(request, uow, change, "/ui/actions/onboard")


# --- allocate ----------------------------------------------------------------------------------


@router.get("/tenants/{tenant}/actions/allocate")
async def allocate_form(request: Request, tenant: str, uow: ConsoleUow) -> Response:
    """The allocation form: a fabric, and a count of free nodes or their names."""
    names = await run_in_threadpool(_fabric_names, uow, tenant)
    path = f"/ui/tenants/{tenant}/actions/allocate"
    return _form_page(request, "allocate", path, {"tenant": tenant, "fabrics": names})


@router.get("/tenants/{tenant}/actions/allocate/confirm")
async def allocate_confirm(request: Request, tenant: str, uow: ConsoleUow) -> Response:
    """What allocating the form's nodes would do."""
    change = actions.allocate(tenant, request.query_params)
    return await _confirm(request, uow, change, f"/ui/tenants/{tenant}/actions/allocate")


@router.post("/tenants/{tenant}/actions/allocate")
async def allocate_commit(request: Request, tenant: str, uow: ConsoleUow) -> Response:
    """Allocate the nodes; to the tenant's page."""
    change = actions.allocate(tenant, await read_form(request))
    return await _commit(request, uow, change, f"/ui/tenants/{tenant}/actions/allocate")


# --- grant -------------------------------------------------------------------------------------


@router.get("/tenants/{tenant}/actions/grant")
async def grant_form(request: Request, tenant: str, uow: ConsoleUow) -> Response:
    """The grant form: a fabric and one of its shared services."""
    services = await run_in_threadpool(_services, uow, tenant)
    path = f"/ui/tenants/{tenant}/actions/grant"
    return _form_page(request, "grant", path, {"tenant": tenant, "services": services})


@router.get("/tenants/{tenant}/actions/grant/confirm")
async def grant_confirm(request: Request, tenant: str, uow: ConsoleUow) -> Response:
    """What granting the form's service would do."""
    change = actions.grant(tenant, request.query_params)
    return await _confirm(request, uow, change, f"/ui/tenants/{tenant}/actions/grant")


@router.post("/tenants/{tenant}/actions/grant")
async def grant_commit(request: Request, tenant: str, uow: ConsoleUow) -> Response:
    """Grant the service; to the tenant's page."""
    change = actions.grant(tenant, await read_form(request))
    return await _commit(request, uow, change, f"/ui/tenants/{tenant}/actions/grant")


# --- revoke and offboard -----------------------------------------------------------------------


@router.get("/tenants/{tenant}/actions/revoke/{grant_id}")
async def revoke_confirm(request: Request, tenant: str, grant_id: str, uow: ConsoleUow) -> Response:
    """What revoking the grant would do."""
    change = await run_in_threadpool(actions.revoke, uow, tenant, _grant_id(grant_id))
    return await _confirm(request, uow, change, request.url.path)


@router.post("/tenants/{tenant}/actions/revoke/{grant_id}")
async def revoke_commit(request: Request, tenant: str, grant_id: str, uow: ConsoleUow) -> Response:
    """Revoke the grant; to the tenant's page."""
    change = await run_in_threadpool(actions.revoke, uow, tenant, _grant_id(grant_id))
    return await _commit(request, uow, change, request.url.path)


@router.get("/tenants/{tenant}/actions/offboard")
async def offboard_confirm(request: Request, tenant: str, uow: ConsoleUow) -> Response:
    """What offboarding the tenant would do."""
    return await _confirm(request, uow, actions.offboard(tenant), request.url.path)


@router.post("/tenants/{tenant}/actions/offboard")
async def offboard_commit(request: Request, tenant: str, uow: ConsoleUow) -> Response:
    """Offboard the tenant; to its page (kept, as offboarded)."""
    return await _commit(request, uow, actions.offboard(tenant), request.url.path)


# --- shared steps ------------------------------------------------------------------------------


def _form_page(request: Request, action: str, path: str, extra: dict[str, Any]) -> Response:
    context = {"active": "tenants", "action": action, "title": TITLES[action], "path": path}
    values = {k: v for k, v in request.query_params.items() if k != CSRF_FIELD}
    return render(request, "action_form.html", {**context, "values": values, **extra})


async def _confirm(request: Request, uow: UnitOfWork, change: Change, path: str) -> Response:
    """The confirmation page: the what-if (or the refusal), and the commit form."""
    context = _base(change, path)
    seen = await run_in_threadpool(_log_size, uow)  # before the what-if: never newer than it
    context["fields"] = {**change.fields, SEEN_FIELD: seen}
    try:
        answer = await run_in_threadpool(actions.what_if, uow, change)
    except IsolationViolationError as refused:  # refused before any fabric was verified
        context["refusal"] = actions.refusal_view(refused.detail, refused.extensions)
        return render(request, "action_confirm.html", context, status=409)
    context["what_if"] = actions.what_if_view(answer)
    return render(request, "action_confirm.html", context)


async def _commit(request: Request, uow: UnitOfWork, change: Change, path: str) -> Response:
    """Perform the change; PRG to the tenant page, or the refusal page (409, nothing written).

    Raises:
        ConflictError: the form's what-if is stale or was already committed (see SEEN_FIELD).
    """
    seen = (await read_form(request)).get(SEEN_FIELD)
    try:
        result = await run_in_threadpool(_run_if_unchanged, uow, change, seen)
    except IsolationViolationError as refused:
        context = _base(change, path)
        context["refusal"] = actions.refusal_view(refused.detail, refused.extensions)
        context["committed"] = True
        return render(request, "action_confirm.html", context, status=409)
    return redirect_with_flash(request, f"/ui/tenants/{change.tenant}", change.done(result))


def _base(change: Change, path: str) -> dict[str, Any]:
    return {
        "active": "tenants",
        "action": change.action,
        "title": TITLES[change.action],
        "tenant": change.tenant,
        "summary": change.summary,
        "fields": change.fields,
        "path": path,
        "what_if": None,
        "refusal": None,
        "committed": False,
    }


def _grant_id(text: str) -> str:
    if not text or len(text) != 36 or not all(c in "0123456789abcdefABCDEF-" for c in text):
        raise NotFoundError(f"no grant '{text[:40]}'", resource="grant")
    return text


def _run_if_unchanged(uow: UnitOfWork, change: Change, seen: str | None) -> Any:
    # One check-and-commit at a time: two posts of one form (a double click) must not both
    # pass the check before either has committed. Replicas share no lock, but a double click
    # reaches the one server its connection is on.
    with COMMITTING:
        if seen != _log_size(uow):
            raise ConflictError(STALE)
        return change.run(uow)


def _log_size(uow: UnitOfWork) -> str:
    return str(audit_log.list_entries(uow, limit=1, cursor=None).count)


def _qos_names(uow: UnitOfWork) -> list[str]:
    return [c.name for c in tenants.list_qos_classes(uow, limit=MAX_LIMIT, cursor=None).data]


def _fabric_names(uow: UnitOfWork, tenant: str) -> list[str]:
    tenants.get_tenant(uow, name=tenant)  # an unknown tenant: its 404 before the form
    return [f.name for f in fabrics.list_fabrics(uow, limit=MAX_LIMIT, cursor=None).data]


def _services(uow: UnitOfWork, tenant: str) -> list[dict[str, str]]:
    found: list[dict[str, str]] = []
    for fabric in _fabric_names(uow, tenant):
        page = shared_services.list_services(uow, fabric_name=fabric, limit=MAX_LIMIT, cursor=None)
        found.extend({"fabric": fabric, "service": s.name} for s in page.data)
    return found
