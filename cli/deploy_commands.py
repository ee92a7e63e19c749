"""Client commands for deployment and change sets: targets, sync, deployments, snapshots.

Each calls the REST API (api/routes/deploy.py, snapshots.py, changesets.py) through
`cli.client`, as `fabrics`, `tenants` and the other nouns do: a table by default, the server's
JSON with ``--json``. ``changesets apply FILE`` sends a change set document (JSON or YAML);
``--dry-run`` answers what it would do and exits 1 when a fabric would not verify.
"""

from __future__ import annotations

from pathlib import Path
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
from cli.fabric_commands import FabricArg, fabric_path, read_document

targets_app = typer.Typer(
    help="Deploy targets of a fabric (REST): SM hosts and RoCE leaves.", no_args_is_help=True
)
sync_app = typer.Typer(help="Which targets hold the fabric's desired snapshot (REST).")
deployments_app = typer.Typer(help="The deploy receipts of a fabric's targets (REST).")
snapshots_app = typer.Typer(help="A fabric's snapshot history (REST).")
changesets_app = typer.Typer(
    help="Many operations applied and verified as one unit (REST).", no_args_is_help=True
)

TargetArg = Annotated[str, typer.Argument(help="The target's name (a RoCE leaf's: the leaf)")]


def _short(digest: str | None) -> str:
    """A snapshot digest as people compare it: its scheme and first 12 hex digits."""
    return "" if not digest else digest[: digest.index(":") + 13]


TARGET_COLUMNS: output.Columns = (
    ("NAME", "name"),
    ("KIND", "kind"),
    ("STATE", "state"),
    ("ROLE", "role"),
    ("DEPLOYED", lambda t: _short(t.get("deployed"))),
    ("LAST SEEN", "last_seen_at"),
)
SYNC_COLUMNS: output.Columns = (
    ("TARGET", "name"),
    ("KIND", "kind"),
    ("STATE", "state"),
    ("DEPLOYED", lambda t: _short(t.get("deployed"))),
    ("PHASE", "phase"),
    ("BEHIND", "behind"),
)
REPORT_COLUMNS: output.Columns = (
    ("ID", "id"),
    ("TARGET", "target"),
    ("RECEIVED", "received_at"),
    ("STATE", "state"),
    ("ROLE", "role"),
    ("DIGEST", lambda r: _short(r.get("digest"))),
    ("DETAIL", "detail"),
)
SNAPSHOT_COLUMNS: output.Columns = (
    ("DIGEST", lambda s: _short(s.get("digest"))),
    ("CREATED", "created_at"),
    ("AUDIT INDEX", "audit_index"),
    ("CURRENT", "current"),
    ("RETAINED", "retained"),
    ("DEPLOYED TO", "deployed_to"),
)
OUTCOME_COLUMNS: output.Columns = (
    ("FABRIC", "fabric"),
    ("HOLDS", "holds"),
    ("SNAPSHOT", lambda f: _short(f.get("snapshot_digest"))),
)


def _list(
    path: str,
    columns: output.Columns,
    url: str | None,
    token: str | None,
    as_json: bool,
    limit: int | None,
) -> None:
    """Every item of a list route (or the first `limit`): a table, or the gathered JSON."""
    with ApiClient(url, token, as_json=as_json) as api:
        page = api.pages(path, {}, limit)
    output.listing(page, columns, as_json=as_json)


def target_path(fabric: str, name: str) -> str:
    """``/v1/fabrics/<fabric>/targets/<name>`` with both names percent-encoded."""
    return fabric_path(fabric, "targets", quote(name, safe=""))


@targets_app.command("list")
def targets_list(
    fabric: FabricArg,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
) -> None:
    """The fabric's deploy targets by name, with their last reported state."""
    _list(fabric_path(fabric, "targets"), TARGET_COLUMNS, url, token, as_json, limit)


@targets_app.command("show")
def targets_show(
    fabric: FabricArg,
    name: TargetArg,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """One deploy target and its last report."""
    with ApiClient(url, token, as_json=as_json) as api:
        output.record(api.json("GET", target_path(fabric, name)), as_json=as_json)


@targets_app.command("register")
def targets_register(
    fabric: FabricArg,
    name: TargetArg,
    kind: Annotated[str, typer.Option("--kind", help="opensm (an SM host) or sonic (a leaf)")],
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Register a deploy target (PUT: registering it again changes nothing)."""
    with ApiClient(url, token, as_json=as_json) as api:
        view = api.json("PUT", target_path(fabric, name), json={"kind": kind})
    output.record(view, as_json=as_json)


@targets_app.command("remove")
def targets_remove(
    fabric: FabricArg, name: TargetArg, url: UrlOption = None, token: TokenOption = None
) -> None:
    """Remove a deploy target; its agent tokens are revoked with it."""
    with ApiClient(url, token) as api:
        api.request("DELETE", target_path(fabric, name))
    typer.echo(f"removed target {name} of {fabric}")


@sync_app.command("show")
def sync_show(
    fabric: FabricArg, url: UrlOption = None, token: TokenOption = None, as_json: JsonOption = False
) -> None:
    """The desired snapshot and, per target, whether it holds it; exit 1 when not in sync.

    The first line says who is behind and (RoCE) which leaves carry owners' ports without a
    target (`untargeted`): either keeps the fabric out of sync.
    """
    with ApiClient(url, token, as_json=as_json) as api:
        view = api.json("GET", fabric_path(fabric, "sync"))
    if as_json:
        output.print_json(view)
    else:
        typer.echo(f"desired {view['desired']}: {_sync_state(view)}")
        output.table(view["targets"], SYNC_COLUMNS)
    raise typer.Exit(0 if view["in_sync"] else 1)


def _sync_state(view: dict[str, Any]) -> str:
    if view["in_sync"]:
        return "in sync"
    state = f"behind: {', '.join(view['behind']) or '-'}"
    # A service older than `untargeted` does not send it.
    missing = view.get("untargeted") or []
    return f"{state}; untargeted: {', '.join(missing)}" if missing else state


@deployments_app.command("list")
def deployments_list(
    fabric: FabricArg,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
) -> None:
    """The fabric's deploy receipts, oldest first (reports that changed a target's state)."""
    _list(fabric_path(fabric, "deployments"), REPORT_COLUMNS, url, token, as_json, limit)


@snapshots_app.command("list")
def snapshots_list(
    fabric: FabricArg,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
) -> None:
    """Every committed, verified state of the fabric, and where it is deployed."""
    _list(fabric_path(fabric, "snapshots"), SNAPSHOT_COLUMNS, url, token, as_json, limit)


@changesets_app.command("apply")
def changesets_apply(
    file: Annotated[
        Path,
        typer.Argument(exists=True, dir_okay=False, readable=True, help="JSON or YAML document"),
    ],
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
    idempotency_key: IdempotencyKeyOption = None,
) -> None:
    """Apply a change set (``{"operations": [...]}``); all or nothing, each fabric verified once.

    Exit 1 when a dry run finds that a fabric would not verify.
    """
    document = read_document(file)
    with ApiClient(url, token, as_json=as_json) as api:
        view = api.json(
            "POST", "/v1/changesets",
            json=document, dry_run=dry_run, idempotency_key=idempotency_key,
        )  # fmt: skip
    raise typer.Exit(_print_changeset(view, as_json=as_json))


def _print_changeset(view: dict[str, Any], *, as_json: bool) -> int:
    """The change set's answer; the exit status (1 when a dry run would not verify)."""
    holds = all(f["holds"] for f in view["fabrics"])
    if as_json:
        output.print_json(view)
    else:
        verb = "would apply" if view["dry_run"] else "applied"
        typer.echo(f"{verb} {len(view['results'])} operations")
        output.table(view["fabrics"], OUTCOME_COLUMNS)
    return 0 if holds else 1
