"""Wire the REST client's command groups into the root `isofabric` command (one call: `register`).

Groups are named after the API's nouns: ``fabrics``, ``topology``, ``nodes``, ``services``,
``artifacts``, ``tenants``, ``allocations``, ``grants``, ``peerings``, ``partitions``,
``policy``, ``usage``, ``targets``, ``sync``, ``deployments``, ``snapshots``, ``changesets``;
``proof list|show`` join the existing ``proof`` group, and ``virtual-guids`` and
``set-virtual-guids`` the ``fabrics`` group. `token`, `proof issue`, `verify` and
`render` are the existing commands, which go over REST when given ``--url``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli import (
    deploy_commands,
    fabric_commands,
    partition_commands,
    policy_usage,
    render,
    rest_counterparts,
    tenant_commands,
)
from cli.client import JsonOption, LimitOption, TokenOption, UrlOption


def proof_list(
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant")] = None,
    fabric: Annotated[str | None, typer.Option("--fabric", help="Only this fabric")] = None,
    since: Annotated[str | None, typer.Option("--since", help="RFC 3339: issued from then")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
) -> None:
    """Stored isolation proofs (REST), oldest first."""
    filters = {"tenant": tenant, "fabric": fabric, "since": since}
    rest_counterparts.proof_list(url, token, filters, as_json, limit)


def proof_show(
    proof_id: Annotated[str, typer.Argument(help="The proof's id")],
    out: Annotated[
        Path | None, typer.Option("--out", dir_okay=False, help="Write it here for `proof verify`")
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    _as_json: JsonOption = True,
) -> None:
    """One stored proof (REST) as JSON (always), as `proof verify` reads it."""
    rest_counterparts.proof_show(url, token, proof_id, out)


GROUPS = (
    (fabric_commands.fabrics_app, "fabrics"),
    (fabric_commands.topology_app, "topology"),
    (fabric_commands.nodes_app, "nodes"),
    (fabric_commands.services_app, "services"),
    (fabric_commands.artifacts_app, "artifacts"),
    (tenant_commands.tenants_app, "tenants"),
    (tenant_commands.allocations_app, "allocations"),
    (tenant_commands.grants_app, "grants"),
    (tenant_commands.peerings_app, "peerings"),
    (partition_commands.partitions_app, "partitions"),
    (policy_usage.policy_app, "policy"),
    (policy_usage.usage_app, "usage"),
    (deploy_commands.targets_app, "targets"),
    (deploy_commands.sync_app, "sync"),
    (deploy_commands.deployments_app, "deployments"),
    (deploy_commands.snapshots_app, "snapshots"),
    (deploy_commands.changesets_app, "changesets"),
)


verification_app = typer.Typer(
    help="A fabric's verdict: `verification show` is `verify` (over REST with --url).",
    no_args_is_help=True,
)


def register(app: typer.Typer, proof_app: typer.Typer) -> None:
    """Add the REST client's groups to `app`, and `list` / `show` to the `proof` group.

    The API's nouns `verification` and `artifacts download` are the same commands as `verify` and
    `render` (one implementation each, local or over REST), named as a REST user looks for them.
    """
    for group, name in GROUPS:
        app.add_typer(group, name=name, rich_help_panel="REST client (--url, --token)")
    proof_app.command("list")(proof_list)
    proof_app.command("show")(proof_show)
    fabric_commands.artifacts_app.command("download")(render.render)
    fabric_commands.fabrics_app.command("virtual-guids")(partition_commands.virtual_guids)
    fabric_commands.fabrics_app.command("set-virtual-guids")(partition_commands.set_virtual_guids)
    verification_app.command("show")(render.verify)
    app.add_typer(
        verification_app, name="verification", rich_help_panel="REST client (--url, --token)"
    )
