"""Client commands for a tenant's InfiniBand partitions and members, and a fabric's virtual GUIDs.

Each calls the REST API (api/routes/partitions.py; the fabric's virtual GUID setting and ledger
under /v1/fabrics/{fabric}) through `cli.client`. `partitions` names the tenant as an argument;
`--fabric` is needed where the tenant has a partition of that name on several fabrics.
`fabrics virtual-guids` and `fabrics set-virtual-guids` join the `fabrics` group
(cli/rest_commands.py registers them there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from cli import output
from cli.client import (
    TROUBLE,
    ApiClient,
    DryRunOption,
    IdempotencyKeyOption,
    JsonOption,
    LimitOption,
    TokenOption,
    UrlOption,
    fail,
)
from cli.fabric_commands import fabric_path, finish
from cli.tenant_commands import tenant_path

partitions_app = typer.Typer(
    help="A tenant's InfiniBand partitions (REST): list, show, create, delete, members.",
    no_args_is_help=True,
)
members_app = typer.Typer(
    help="A partition's members (REST): set the exact set, add one, remove one.",
    no_args_is_help=True,
)
partitions_app.add_typer(members_app, name="members")

TenantArg = Annotated[str, typer.Argument(help="Tenant name")]
PartitionArg = Annotated[str, typer.Argument(help="Partition name ('default' is the tenant's own)")]
GuidArg = Annotated[str, typer.Argument(help="Port GUID or virtual GUID, 0x and 1-16 hex digits")]
FabricArg = Annotated[str, typer.Argument(help="Fabric name")]
FabricChoice = Annotated[
    str | None,
    typer.Option("--fabric", help="The fabric (needed when the name is on several)"),
]
MEMBERSHIPS = ("full", "limited")
PARTITION_COLUMNS: output.Columns = (
    ("FABRIC", "fabric"),
    ("NAME", "name"),
    ("P_KEY", "pkey"),
    ("QOS", "qos_class"),
    ("IPOIB", "ipoib"),
    ("INDEX0", "index0"),
    ("MEMBERS", lambda p: len(p.get("members") or [])),
)
PARTITION_FIELDS = (
    "tenant",
    "fabric",
    "name",
    "pkey",
    "qos_class",
    "ipoib",
    "index0",
    "created_at",
)
MEMBER_COLUMNS: output.Columns = (
    ("GUID", "guid"),
    ("MEMBERSHIP", "membership"),
    ("KIND", "kind"),
    ("NODE", "node"),
)
VIRTUAL_GUID_COLUMNS: output.Columns = (
    ("GUID", "guid"),
    ("TENANT", "tenant"),
    ("STATE", "state"),
    ("PARTITIONS", "partitions"),
    ("BOUND", "bound_at"),
    ("RELEASED", "released_at"),
)


def partition_path(tenant: str, name: str | None = None, *rest: str) -> str:
    """``/v1/tenants/<tenant>/partitions[/<name>[/<rest>...]]``, each name percent-encoded."""
    return tenant_path(tenant, "partitions", *((name, *rest) if name is not None else ()))


def _fabric(fabric: str | None) -> dict[str, str]:
    return {} if fabric is None else {"fabric": fabric}


def show_partition(view: dict[str, Any], *, as_json: bool) -> None:
    """A partition: its fields, then a table of its members (or the server's JSON)."""
    if as_json:
        output.print_json(view)
        return
    output.record(view, as_json=False, fields=PARTITION_FIELDS)
    output.table(view.get("members") or [], MEMBER_COLUMNS, "members")


def _changed(answer: dict[str, Any] | None, *, as_json: bool, dry_run: bool) -> None:
    """A mutation's answer: the dry-run view (exit 1 when it would not hold) or the partition."""
    if dry_run and answer is not None:
        raise typer.Exit(output.dry_run(answer, as_json=as_json))
    if answer is not None:
        show_partition(answer, as_json=as_json)


@partitions_app.command("list")
def partitions_list(
    tenant: TenantArg,
    fabric: Annotated[str | None, typer.Option("--fabric", help="Only this fabric")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
) -> None:
    """The tenant's partitions: on each fabric its default one first, then by name."""
    with ApiClient(url, token, as_json=as_json) as api:
        page = api.pages(partition_path(tenant), _fabric(fabric), limit)
    output.listing(page, PARTITION_COLUMNS, as_json=as_json)


@partitions_app.command("show")
def partitions_show(
    tenant: TenantArg,
    name: PartitionArg,
    fabric: FabricChoice = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """One partition and its members."""
    with ApiClient(url, token, as_json=as_json) as api:
        view = api.json("GET", partition_path(tenant, name), params=_fabric(fabric))
    show_partition(view, as_json=as_json)


@partitions_app.command("create")
def partitions_create(
    tenant: TenantArg,
    name: PartitionArg,
    fabric: Annotated[str, typer.Option("--fabric", help="The InfiniBand fabric")],
    pkey: Annotated[
        str | None, typer.Option("--pkey", help="A free P_Key of the fabric's range, e.g. 0x0200")
    ] = None,
    qos_class: Annotated[
        str | None, typer.Option("--qos-class", help="Default: the tenant's class")
    ] = None,
    ipoib: Annotated[
        bool, typer.Option("--ipoib/--no-ipoib", help="An IPoIB broadcast group (OpenSM 'ipoib')")
    ] = True,
    index0: Annotated[
        bool,
        typer.Option("--index0", help="Its P_Key at index 0 of its members' tables ('indx0')"),
    ] = False,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
    idempotency_key: IdempotencyKeyOption = None,
) -> None:
    """Create an additional partition (empty; its P_Key from the fabric's pool)."""
    body: dict[str, Any] = {"fabric": fabric, "name": name, "ipoib": ipoib, "index0": index0}
    body |= {k: v for k, v in {"pkey": pkey, "qos_class": qos_class}.items() if v is not None}
    with ApiClient(url, token, as_json=as_json) as api:
        answer = api.json(
            "POST",
            partition_path(tenant),
            json=body,
            dry_run=dry_run,
            idempotency_key=idempotency_key,
        )
    _changed(answer, as_json=as_json, dry_run=dry_run)


@partitions_app.command("delete")
def partitions_delete(
    tenant: TenantArg,
    name: PartitionArg,
    fabric: FabricChoice = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
) -> None:
    """Delete an additional partition: its members leave, its P_Key goes into quarantine."""
    with ApiClient(url, token, as_json=as_json) as api:
        path = partition_path(tenant, name)
        answer = api.json("DELETE", path, params=_fabric(fabric), dry_run=dry_run)
    if answer is not None:  # a dry run's view
        raise typer.Exit(output.dry_run(answer, as_json=as_json))
    typer.echo(f"deleted partition {name} of tenant {tenant}")


@members_app.command("set")
def members_set(
    tenant: TenantArg,
    name: PartitionArg,
    member: Annotated[
        list[str] | None,
        typer.Option(
            "--member", help="GUID, or GUID=full|limited (default full); repeat for each member"
        ),
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file",
            exists=True,
            dir_okay=False,
            help='JSON or YAML: {"members": [{"guid", "membership"}]} ([] empties it)',
        ),
    ] = None,
    fabric: FabricChoice = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
) -> None:
    """Replace the partition's members with exactly this set (verified before commit)."""
    if bool(member) == (file is not None):
        fail("give the members with --member (repeated) or with --file, one of the two", TROUBLE)
    members = _from_file(file) if file is not None else [_member(text) for text in member or []]
    with ApiClient(url, token, as_json=as_json) as api:
        answer = api.json(
            "PUT",
            partition_path(tenant, name, "members"),
            json={"members": members},
            params=_fabric(fabric),
            dry_run=dry_run,
        )
    _changed(answer, as_json=as_json, dry_run=dry_run)


def _member(text: str) -> dict[str, str]:
    """``GUID`` or ``GUID=full|limited`` as a member of the PUT body."""
    guid, equals, membership = text.partition("=")
    membership = membership.strip().lower() or ("" if equals else "full")
    if membership not in MEMBERSHIPS:
        fail(f"--member {text[:80]}: the membership is full or limited", TROUBLE)
    return {"guid": guid.strip(), "membership": membership}


def _from_file(path: Path) -> list[Any]:
    """The members a file lists: the PUT body (a mapping with "members") or the bare list."""
    import yaml  # JSON is YAML; loaded only by this command

    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        fail(f"{path}: not UTF-8 text (a JSON or YAML members file)", TROUBLE)
    except yaml.YAMLError as error:
        fail(f"{path}: {' '.join(str(error).split())}", TROUBLE)
    members = document.get("members") if isinstance(document, dict) else document
    if not isinstance(members, list):
        fail(f'{path}: expected {{"members": [...]}} or a list of members', TROUBLE)
    return [_member(item) if isinstance(item, str) else item for item in members]


@members_app.command("add")
def members_add(
    tenant: TenantArg,
    name: PartitionArg,
    guid: GuidArg,
    limited: Annotated[
        bool, typer.Option("--limited", help="A limited member (talks to full members only)")
    ] = False,
    fabric: FabricChoice = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
    idempotency_key: IdempotencyKeyOption = None,
) -> None:
    """Add a member (full unless --limited), or change a member's membership."""
    with ApiClient(url, token, as_json=as_json) as api:
        answer = api.json(
            "POST",
            partition_path(tenant, name, "members", guid),
            json={"membership": "limited" if limited else "full"},
            params=_fabric(fabric),
            dry_run=dry_run,
            idempotency_key=idempotency_key,
        )
    _changed(answer, as_json=as_json, dry_run=dry_run)


@members_app.command("remove")
def members_remove(
    tenant: TenantArg,
    name: PartitionArg,
    guid: GuidArg,
    fabric: FabricChoice = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
) -> None:
    """Remove a member (exit 3 when it is not one)."""
    with ApiClient(url, token, as_json=as_json) as api:
        path = partition_path(tenant, name, "members", guid)
        answer = api.json("DELETE", path, params=_fabric(fabric), dry_run=dry_run)
    _changed(answer, as_json=as_json, dry_run=dry_run)


# --- the fabric's virtual GUIDs: registered as `fabrics virtual-guids|set-virtual-guids` -------


def virtual_guids(
    fabric: FabricArg,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
) -> None:
    """The fabric's virtual GUID ledger: each GUID's tenant, state and partitions."""
    with ApiClient(url, token, as_json=as_json) as api:
        page = api.pages(fabric_path(fabric, "virtual-guids"), {}, limit)
    output.listing(page, VIRTUAL_GUID_COLUMNS, as_json=as_json)


def set_virtual_guids(
    fabric: FabricArg,
    enabled: Annotated[
        bool,
        typer.Option("--enable/--disable", help="Whether partitions may list virtual GUIDs"),
    ],
    ranges: Annotated[
        list[str] | None,
        typer.Option(
            "--range", help="0x<first>-0x<last>, inclusive; repeat for each (the whole list)"
        ),
    ] = None,
    sm: Annotated[
        str, typer.Option("--sm", help="The SM that enforces them (only 'nvidia')")
    ] = "nvidia",
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
) -> None:
    """Replace the fabric's virtual GUID setting (PATCH): enabled, every range, the SM."""
    setting = {"enabled": enabled, "ranges": list(ranges or []), "sm": sm}
    with ApiClient(url, token, as_json=as_json) as api:
        answer = api.json(
            "PATCH", fabric_path(fabric), json={"virtual_guids": setting}, dry_run=dry_run
        )
    finish(answer, as_json=as_json, dry_run=dry_run)
