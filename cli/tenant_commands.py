"""Client commands for tenants and what they hold: tenants, allocations, grants, peerings.

Each calls the REST API (api/routes/tenants.py, allocations.py, grants.py, peerings.py) through
`cli.client`. Mutations take ``--dry-run`` (``?dry_run=true``: the what-if answer, exit 1
when the change would be refused) and POSTs ``--idempotency-key``.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import typer

from cli import output
from cli.client import (
    ApiClient,
    DryRunOption,
    IdempotencyKeyOption,
    JsonOption,
    LimitOption,
    TokenOption,
    UrlOption,
)
from cli.fabric_commands import finish, split_names

tenants_app = typer.Typer(
    help="Tenants (REST): onboard, list, change, offboard.", no_args_is_help=True
)
allocations_app = typer.Typer(help="A tenant's nodes (REST).", no_args_is_help=True)
grants_app = typer.Typer(help="A tenant's shared-service grants (REST).", no_args_is_help=True)
peerings_app = typer.Typer(help="Consented peerings between tenants (REST).", no_args_is_help=True)

TenantArg = Annotated[str, typer.Argument(help="Tenant name")]
TenantOption = Annotated[str, typer.Option("--tenant", help="Tenant name")]
IdArg = Annotated[str, typer.Argument(help="Its id")]
FabricFilter = Annotated[str | None, typer.Option("--fabric", help="Only this fabric")]
TENANT_COLUMNS: output.Columns = (
    ("NAME", "name"),
    ("KIND", "kind"),
    ("STATUS", "status"),
    ("QOS", "qos_class"),
    ("BILLING ACCOUNT", "billing_account"),
    ("MAX NODES", "max_nodes"),
)
ALLOCATION_COLUMNS: output.Columns = (
    ("ID", "id"),
    ("FABRIC", "fabric"),
    ("SEGMENT", "segment"),
    ("NODES", "nodes"),
    ("RELEASED", "released_at"),
)
GRANT_COLUMNS: output.Columns = (
    ("ID", "id"),
    ("FABRIC", "fabric"),
    ("SERVICE", "service"),
    ("SEGMENT", "segment"),
    ("REVOKED", "revoked_at"),
)
PEERING_COLUMNS: output.Columns = (
    ("ID", "id"),
    ("FABRIC", "fabric"),
    ("REQUESTER", "requester"),
    ("PEER", "peer"),
    ("STATE", "state"),
    ("SEGMENT", "segment"),
)


def tenant_path(tenant: str, *rest: str) -> str:
    """``/v1/tenants/<tenant>[/<rest>...]`` with each name percent-encoded."""
    return "/".join(["/v1/tenants", quote(tenant, safe=""), *(quote(r, safe="") for r in rest)])


def _send(
    url: str | None, token: str | None, as_json: bool, method: str, path: str, **kwargs: Any
) -> None:
    """One mutation, its answer printed (`finish`); a 204 prints what was done."""
    dry_run = bool(kwargs.get("dry_run"))
    with ApiClient(url, token, as_json=as_json) as api:
        answer = api.json(method, path, **kwargs)
    if answer is None:
        typer.echo(f"done: {method} {path}")
        return
    finish(answer, as_json=as_json, dry_run=dry_run)


@tenants_app.command("list")
def tenants_list(
    status: Annotated[str | None, typer.Option("--status", help="active|offboarded")] = None,
    kind: Annotated[str | None, typer.Option("--kind", help="internal|external")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
) -> None:
    """Tenants by name."""
    with ApiClient(url, token, as_json=as_json) as api:
        page = api.pages("/v1/tenants", {"status": status, "kind": kind}, limit)
    output.listing(page, TENANT_COLUMNS, as_json=as_json)


@tenants_app.command("show")
def tenants_show(
    name: TenantArg, url: UrlOption = None, token: TokenOption = None, as_json: JsonOption = False
) -> None:
    """One tenant."""
    with ApiClient(url, token, as_json=as_json) as api:
        output.record(api.json("GET", tenant_path(name)), as_json=as_json)


@tenants_app.command("reachability")
def tenants_reachability(
    name: TenantArg, url: UrlOption = None, token: TokenOption = None, as_json: JsonOption = False
) -> None:
    """Per fabric: whom the tenant reaches, through which segment, and the fabric's verdict."""
    with ApiClient(url, token, as_json=as_json) as api:
        view = api.json("GET", tenant_path(name, "reachability"))
    if as_json:
        output.print_json(view)
        return
    edges = [
        {**edge, "fabric": fabric["fabric"], "holds": fabric["holds"]}
        for fabric in view["fabrics"]
        for edge in fabric["edges"]
    ]
    columns = ("FABRIC", "fabric"), ("FROM", "from"), ("TO", "to"), ("SEGMENT", "segment")
    output.table(edges, (*columns, ("ALLOWED", "allowed"), ("FABRIC HOLDS", "holds")))


@tenants_app.command("create")
def tenants_create(
    name: TenantArg,
    kind: Annotated[str, typer.Option("--kind", help="internal or external")],
    qos_class: Annotated[str | None, typer.Option("--qos-class", help="e.g. gold")] = None,
    billing_account: Annotated[
        str | None, typer.Option("--billing-account", help="Default: the tenant's name")
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
    idempotency_key: IdempotencyKeyOption = None,
) -> None:
    """Onboard a tenant with its QoS class."""
    body = {"name": name, "kind": kind, "qos_class": qos_class, "billing_account": billing_account}
    body = {key: value for key, value in body.items() if value is not None}
    _send(
        url, token, as_json, "POST", "/v1/tenants",
        json=body, dry_run=dry_run, idempotency_key=idempotency_key,
    )  # fmt: skip


@tenants_app.command("update")
def tenants_update(
    name: TenantArg,
    qos_class: Annotated[str | None, typer.Option("--qos-class", help="New QoS class")] = None,
    max_nodes: Annotated[
        int | None, typer.Option("--max-nodes", min=0, help="Own node quota")
    ] = None,
    kind_quota: Annotated[
        bool, typer.Option("--kind-quota", help="Drop the own quota: the kind's applies")
    ] = False,
    billing_account: Annotated[str | None, typer.Option("--billing-account")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
) -> None:
    """Change a tenant's QoS class, node quota or billing account (verified like any change)."""
    body: dict[str, Any] = {"qos_class": qos_class, "billing_account": billing_account}
    body = {key: value for key, value in body.items() if value is not None}
    if max_nodes is not None or kind_quota:
        body["max_nodes"] = max_nodes
    _send(url, token, as_json, "PATCH", tenant_path(name), json=body, dry_run=dry_run)


@tenants_app.command("offboard")
def tenants_offboard(
    name: TenantArg,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
) -> None:
    """Release the tenant's nodes, grants and segments; its record stays, offboarded."""
    _send(url, token, as_json, "DELETE", tenant_path(name), dry_run=dry_run)


@allocations_app.command("create")
def allocations_create(
    tenant: TenantOption,
    fabric: Annotated[str, typer.Option("--fabric", help="Fabric name")],
    nodes: Annotated[str | None, typer.Option("--nodes", help="Named nodes, a,b,…")] = None,
    count: Annotated[int | None, typer.Option("--count", min=1, help="Any N free")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
    idempotency_key: IdempotencyKeyOption = None,
) -> None:
    """Allocate named nodes (--nodes) or any free compute nodes (--count) to the tenant."""
    body: dict[str, Any] = {"fabric": fabric}
    if nodes is not None:
        body["nodes"] = split_names(nodes)
    if count is not None:
        body["count"] = count
    _send(
        url, token, as_json, "POST", tenant_path(tenant, "allocations"),
        json=body, dry_run=dry_run, idempotency_key=idempotency_key,
    )  # fmt: skip


@allocations_app.command("list")
def allocations_list(
    tenant: TenantOption,
    fabric: FabricFilter = None,
    state: Annotated[str, typer.Option("--state", help="active|released|all")] = "active",
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
) -> None:
    """The tenant's allocations (current ones unless --state says otherwise)."""
    params = {"fabric": fabric, "state": state}
    with ApiClient(url, token, as_json=as_json) as api:
        page = api.pages(tenant_path(tenant, "allocations"), params, limit)
    output.listing(page, ALLOCATION_COLUMNS, as_json=as_json)


@allocations_app.command("show")
def allocations_show(
    tenant: TenantOption,
    allocation_id: IdArg,
    state: Annotated[str, typer.Option("--state", help="active|released|all")] = "all",
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """One allocation (released ones too, by default)."""
    with ApiClient(url, token, as_json=as_json) as api:
        path = tenant_path(tenant, "allocations", allocation_id)
        output.record(api.json("GET", path, params={"state": state}), as_json=as_json)


@allocations_app.command("release")
def allocations_release(
    tenant: TenantOption,
    allocation_id: IdArg,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
) -> None:
    """Release an allocation's nodes."""
    path = tenant_path(tenant, "allocations", allocation_id)
    _send(url, token, as_json, "DELETE", path, dry_run=dry_run)


@grants_app.command("create")
def grants_create(
    tenant: TenantOption,
    fabric: Annotated[str, typer.Option("--fabric", help="Fabric name")],
    service: Annotated[str, typer.Option("--service", help="Shared service name")],
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
    idempotency_key: IdempotencyKeyOption = None,
) -> None:
    """Grant the tenant a shared service."""
    _send(
        url, token, as_json, "POST", tenant_path(tenant, "grants"),
        json={"fabric": fabric, "service": service},
        dry_run=dry_run, idempotency_key=idempotency_key,
    )  # fmt: skip


@grants_app.command("list")
def grants_list(
    tenant: TenantOption,
    state: Annotated[str, typer.Option("--state", help="active|revoked|all")] = "active",
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
) -> None:
    """The tenant's grants (active ones unless --state says otherwise)."""
    with ApiClient(url, token, as_json=as_json) as api:
        page = api.pages(tenant_path(tenant, "grants"), {"state": state}, limit)
    output.listing(page, GRANT_COLUMNS, as_json=as_json)


@grants_app.command("revoke")
def grants_revoke(
    tenant: TenantOption,
    grant_id: IdArg,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
) -> None:
    """Revoke a grant."""
    _send(url, token, as_json, "DELETE", tenant_path(tenant, "grants", grant_id), dry_run=dry_run)


@peerings_app.command("request")
def peerings_request(
    tenant: TenantOption,
    fabric: Annotated[str, typer.Option("--fabric", help="Fabric name")],
    peer: Annotated[str, typer.Option("--peer", help="The tenant to reach")],
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
    idempotency_key: IdempotencyKeyOption = None,
) -> None:
    """Ask another tenant to peer on a fabric (effective once it accepts)."""
    _send(
        url, token, as_json, "POST", tenant_path(tenant, "peerings"),
        json={"fabric": fabric, "peer": peer},
        dry_run=dry_run, idempotency_key=idempotency_key,
    )  # fmt: skip


@peerings_app.command("list")
def peerings_list(
    tenant: TenantOption,
    state: Annotated[
        str, typer.Option("--state", help="open|requested|accepted|ended|all")
    ] = "open",
    requests: Annotated[
        bool, typer.Option("--requests", help="Only pending requests addressed to the tenant")
    ] = False,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
) -> None:
    """The tenant's peerings, requested by it or addressed to it."""
    path = tenant_path(tenant, "peering-requests" if requests else "peerings")
    params = {} if requests else {"state": state}
    with ApiClient(url, token, as_json=as_json) as api:
        page = api.pages(path, params, limit)
    output.listing(page, PEERING_COLUMNS, as_json=as_json)


@peerings_app.command("accept")
def peerings_accept(
    tenant: TenantOption,
    peering_id: IdArg,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
    idempotency_key: IdempotencyKeyOption = None,
) -> None:
    """Accept a request addressed to the tenant (verified before commit)."""
    path = tenant_path(tenant, "peering-requests", peering_id, "accept")
    _send(url, token, as_json, "POST", path, dry_run=dry_run, idempotency_key=idempotency_key)


@peerings_app.command("end")
def peerings_end(
    tenant: TenantOption,
    peering_id: IdArg,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
) -> None:
    """End a peering from either side: withdraw, decline or disconnect."""
    path = tenant_path(tenant, "peerings", peering_id)
    _send(url, token, as_json, "DELETE", path, dry_run=dry_run)
