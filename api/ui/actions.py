"""Operator actions of the console: onboard, allocate, grant, revoke, offboard.

Each action is one tenancy use case, the same one its /v1 route calls, run as the signed-in
operator (same audit entries, same verify-before-commit). The console first shows what the
change would do: the use case rehearsed exactly as ``?dry_run=true`` rehearses it
(tenancy/gate/what_if.py `rehearsing`), answering the same `DryRunView` (verdict,
reachability delta, artifact changes), with nothing written. Then a POST performs it; a change
that would break isolation is refused by the use case (IsolationViolationError, its
counterexamples shown) and writes nothing.

Form fields are read from the query (the confirmation page) or the posted form (the commit)
and validated by the API's own request models; bad input is an InvalidValueError (a 422 page).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from policies.errors import InvalidValueError
from tenancy.gate.what_if import DryRunDone, rehearsing
from tenancy.schemas import AllocationCreate, GrantCreate, TenantCreate
from tenancy.schemas.messages import in_words
from tenancy.schemas.what_if import DryRunView
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, shared_services, tenants

Form = Mapping[str, str]
NODE_SEPARATORS = re.compile(r"[\s,]+")


@dataclass(frozen=True, slots=True)
class Change:
    """One action with its input: what it is, what the page says, and how to run it."""

    action: str  # onboard | allocate | grant | revoke | offboard
    tenant: str  # the tenant it is about (the new one, for onboarding)
    summary: list[tuple[str, str]]  # (label, value) rows the confirmation page lists
    fields: dict[str, str]  # the hidden form fields the commit posts back
    run: Callable[[UnitOfWork], Any]  # the use case, given the unit of work to run in
    done: Callable[[Any], str]  # the flash message after a commit, given the result


def _spec(model: type[BaseModel], values: dict[str, Any]) -> Any:
    """`model` validated from `values`; its errors as an InvalidValueError (the page says why)."""
    try:
        return model.model_validate(values)
    except ValidationError as error:
        reasons = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'form'}: {in_words(e)}" for e in error.errors()
        )
        raise InvalidValueError(reasons[:500]) from error


def onboard(form: Form) -> Change:
    """Onboard a tenant (POST /v1/tenants): name, kind, QoS class, billing account."""
    values: dict[str, Any] = {
        "name": form.get("name", "").strip(),
        "kind": form.get("kind", ""),
        "qos_class": form.get("qos_class", "") or "bronze",
    }
    if form.get("billing_account", "").strip():
        values["billing_account"] = form["billing_account"].strip()
    spec: TenantCreate = _spec(TenantCreate, values)
    return Change(
        action="onboard",
        tenant=spec.name,
        summary=[
            ("Tenant", spec.name),
            ("Kind", spec.kind),
            ("QoS class", spec.qos_class),
            ("Billing account", spec.billing_account or spec.name),
        ],
        fields={k: str(v) for k, v in values.items()},
        run=lambda uow: tenants.create_tenant(uow, spec=spec),
        done=lambda view: (
            f"Tenant {view.name} onboarded ({view.kind}, QoS class {view.qos_class})."
        ),
    )


def allocate(tenant: str, form: Form) -> Change:
    """Allocate nodes (POST /v1/tenants/{tenant}/allocations): `count` or named `nodes`."""
    fabric, count = form.get("fabric", ""), form.get("count", "").strip()
    named = [n for n in NODE_SEPARATORS.split(form.get("nodes", "")) if n]
    values: dict[str, Any] = {"fabric": fabric}
    if named:
        values["nodes"] = named
    if count or not named:
        values["count"] = _integer(count, "count")
    spec: AllocationCreate = _spec(AllocationCreate, values)
    what = f"{spec.count} free node(s), first by name" if spec.nodes is None else ", ".join(named)
    return Change(
        action="allocate",
        tenant=tenant,
        summary=[("Tenant", tenant), ("Fabric", spec.fabric), ("Nodes", what)],
        fields={"fabric": fabric, "count": count, "nodes": " ".join(named)},
        run=lambda uow: allocations.allocate(uow, tenant_name=tenant, spec=spec),
        done=lambda view: f"Allocated {', '.join(view.nodes)} to {tenant} on {view.fabric}.",
    )


def _integer(text: str, name: str) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > 9:  # "²".isdigit(): int fails
        raise InvalidValueError(f"{name}: give a whole number of nodes (or name the nodes)")
    return int(text)


def grant(tenant: str, form: Form) -> Change:
    """Grant a shared service (POST /v1/tenants/{tenant}/grants): fabric and service."""
    values = {"fabric": form.get("fabric", ""), "service": form.get("service", "")}
    spec: GrantCreate = _spec(GrantCreate, values)
    return Change(
        action="grant",
        tenant=tenant,
        summary=[("Tenant", tenant), ("Fabric", spec.fabric), ("Service", spec.service)],
        fields=values,
        run=lambda uow: shared_services.grant_service(uow, tenant_name=tenant, spec=spec),
        done=lambda view: f"Granted {view.service} on {view.fabric} to {tenant}.",
    )


def revoke(uow: UnitOfWork, tenant: str, grant_id: str) -> Change:
    """Revoke a grant (DELETE /v1/tenants/{tenant}/grants/{grant_id}).

    Raises:
        NotFoundError: the tenant has no active grant with this id.
    """
    current = shared_services.get_grant(uow, tenant_name=tenant, grant_id=grant_id, state="active")
    label = f"{current.service} on {current.fabric}"
    return Change(
        action="revoke",
        tenant=tenant,
        summary=[("Tenant", tenant), ("Grant", label), ("Grant id", grant_id)],
        fields={},
        run=lambda unit: shared_services.revoke_grant(unit, tenant_name=tenant, grant_id=grant_id),
        done=lambda _none: f"Revoked {tenant}'s grant of {label}.",
    )


def offboard(tenant: str) -> Change:
    """Offboard a tenant (DELETE /v1/tenants/{tenant}): everything it holds is released."""
    return Change(
        action="offboard",
        tenant=tenant,
        summary=[("Tenant", tenant), ("Releases", "all its nodes, grants, segments and tokens")],
        fields={},
        run=lambda uow: tenants.offboard_tenant(uow, name=tenant),
        done=lambda _view: (
            f"Tenant {tenant} offboarded: its nodes, grants and segments are "
            "released; the record stays for audit and billing."
        ),
    )


def what_if(uow: UnitOfWork, change: Change) -> DryRunView:
    """What `change` would do, as ``?dry_run=true`` answers it; nothing is written.

    Raises:
        IsolationViolationError: the use case refuses the change before any fabric is
            verified (a node quota, say): the refusal the commit would get.
        IsofabricError: any other refusal of the use case (a taken name, an unknown node).
    """
    try:
        change.run(rehearsing(uow))
    except DryRunDone as done:
        if isinstance(done.answer, DryRunView):
            return done.answer
        raise
    # A use case that opened no write transaction changed nothing.
    return DryRunView(holds=True, fabrics=[])


def what_if_view(answer: DryRunView) -> dict[str, Any]:
    """The what-if for the template: per fabric its verdict, edges and changed files."""
    body = answer.model_dump(mode="json", by_alias=True)
    for fabric in body["fabrics"]:
        changed = [a for a in fabric["artifacts"] if a["sha256_before"] != a["sha256_after"]]
        fabric["changed"] = changed
        fabric["unchanged"] = len(fabric["artifacts"]) - len(changed)
    return body


def refusal_view(detail: str, extensions: Mapping[str, Any]) -> dict[str, Any]:
    """A refused change for the template: the reason and each counterexample."""
    examples = extensions.get("counterexamples", [])
    return {"detail": detail, "counterexamples": examples if isinstance(examples, list) else []}
