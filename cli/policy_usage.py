"""Client commands for the operation policy and for usage (api/routes/policy.py, usage.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from cli import output
from cli.client import (
    ApiClient,
    DryRunOption,
    JsonOption,
    LimitOption,
    TokenOption,
    UrlOption,
)
from cli.fabric_commands import MEDIA_TYPES, finish

policy_app = typer.Typer(
    help="The internal/external operation policy (REST).", no_args_is_help=True
)
usage_app = typer.Typer(
    help="Usage for billing (REST): records, CSV, events.", no_args_is_help=True
)
POLICY_FIELDS = ("version", "fingerprint", "created_at", "created_by", "services")
KIND_COLUMNS: output.Columns = (
    ("KIND", "kind"),
    ("ISOLATION", "isolation"),
    ("QOS CLASSES", "qos_classes"),
    ("MAX NODES", "max_nodes"),
    ("PEERING", "peering"),
    ("DEFAULT GRANTS", "default_grants"),
    ("MAX POOL %", "max_pool_share_percent"),
    ("MAX PARTITIONS", "max_partitions"),
)
POLICY_COLUMNS: output.Columns = (
    ("VERSION", "version"),
    ("FINGERPRINT", "fingerprint"),
    ("CREATED", "created_at"),
    ("BY", "created_by"),
)
RECORD_COLUMNS: output.Columns = (
    ("PERIOD START", "period_start"),
    ("TENANT", "tenant"),
    ("FABRIC", "fabric"),
    ("TYPE", "resource_type"),
    ("QOS", "qos_class"),
    ("SERVICE", "service"),
    ("NODE H", "node_hours"),
    ("PORT H", "port_hours"),
    ("ACCESS H", "access_hours"),
    ("FINAL", "final"),
)
EVENT_COLUMNS: output.Columns = (
    ("ID", "id"),
    ("TIME", "time"),
    ("TENANT", "subject"),
    ("FABRIC", "fabric"),
    ("NODE H", lambda e: e["data"]["node_hours"]),
    ("PORT H", lambda e: e["data"]["port_hours"]),
)
FromOption = Annotated[
    str, typer.Option("--from", help="Start, RFC 3339 with an offset (2026-03-01T00:00:00Z)")
]
ToOption = Annotated[str | None, typer.Option("--to", help="End (exclusive); default: now")]
TenantFilter = Annotated[str | None, typer.Option("--tenant", help="Only this tenant")]
GranularityOption = Annotated[str, typer.Option("--granularity", help="hour|day")]


@policy_app.command("show")
def policy_show(
    version: Annotated[
        int | None, typer.Option("--version", min=0, help="A stored version (default: in force)")
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """The policy in force, or one version of it (0: the built-in default)."""
    path = "/v1/policy" if version is None else f"/v1/policy/versions/{version}"
    with ApiClient(url, token, as_json=as_json) as api:
        show_policy(api.json("GET", path), as_json=as_json)


def show_policy(policy: dict[str, Any], *, as_json: bool) -> None:
    """A policy: its version, then one row per tenant kind; or its JSON."""
    output.record(policy, as_json=as_json, fields=POLICY_FIELDS)
    if not as_json:
        kinds = [{"kind": name, **rules} for name, rules in policy["kinds"].items()]
        output.table(kinds, KIND_COLUMNS)


@policy_app.command("versions")
def policy_versions(
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
) -> None:
    """Every stored version, oldest first."""
    with ApiClient(url, token, as_json=as_json) as api:
        page = api.pages("/v1/policy/versions", {}, limit)
    output.listing(page, POLICY_COLUMNS, as_json=as_json)


@policy_app.command("put")
def policy_put(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
) -> None:
    """Replace the policy with FILE (YAML, or JSON by its .json suffix), verified everywhere."""
    media = MEDIA_TYPES.get(file.suffix.lower(), "application/yaml")
    with ApiClient(url, token, as_json=as_json) as api:
        answer = api.json(
            "PUT",
            "/v1/policy",
            content=file.read_bytes(),
            headers={"Content-Type": media},
            dry_run=dry_run,
        )
    if dry_run:
        finish(answer, as_json=as_json, dry_run=True)
    show_policy(answer, as_json=as_json)


@usage_app.command("records")
def usage_records(
    since: FromOption,
    until: ToOption = None,
    tenant: TenantFilter = None,
    granularity: GranularityOption = "hour",
    csv: Annotated[
        bool, typer.Option("--csv", help="FOCUS-style CSV, as the server sends it")
    ] = False,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
) -> None:
    """Usage records of [from, to) per tenant, fabric, resource type, QoS class and service."""
    params = {"from": since, "to": until, "tenant": tenant, "granularity": granularity}
    with ApiClient(url, token, as_json=as_json) as api:
        if csv:
            query = {key: value for key, value in params.items() if value is not None}
            typer.echo(api.request("GET", "/v1/usage/records.csv", params=query).text, nl=False)
            return
        page = api.pages("/v1/usage/records", params, limit)
    output.listing(page, RECORD_COLUMNS, as_json=as_json)


@usage_app.command("events")
def usage_events(
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="Resume from a previous answer's next")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="At most")] = 100,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """One page of final hourly records as CloudEvents; `next` (on stderr) resumes the feed."""
    params: dict[str, str | int] = {"limit": limit}
    if cursor is not None:
        params["cursor"] = cursor
    with ApiClient(url, token, as_json=as_json) as api:
        page = api.json("GET", "/v1/usage/events", params=params)
    if as_json:
        output.print_json(page)
        return
    output.table(page["data"], EVENT_COLUMNS)
    typer.echo(f"next: {page['next']}", err=True)
