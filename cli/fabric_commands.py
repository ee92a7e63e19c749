"""Client commands for a fabric and what is on it: fabrics, topology, nodes, services, artifacts.

Each calls the REST API (api/routes/fabrics.py, topology.py, nodes.py, services.py,
verification.py) through `cli.client`; `render --url` (cli/rest_counterparts.py) is the
command that downloads the artifacts into a directory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer

from cli import output
from cli.client import (
    DONE,
    ApiClient,
    DryRunOption,
    IdempotencyKeyOption,
    JsonOption,
    LimitOption,
    QuietOption,
    TokenOption,
    UrlOption,
)
from policies.errors import InvalidValueError

fabrics_app = typer.Typer(
    help="Fabrics (REST): list, show, create; their virtual GUIDs.", no_args_is_help=True
)
topology_app = typer.Typer(help="A fabric's topology (REST): upload a discovery.")
nodes_app = typer.Typer(help="Nodes of a fabric (REST): list, show, set a role.")
services_app = typer.Typer(help="Shared services of a fabric (REST).", no_args_is_help=True)
artifacts_app = typer.Typer(
    help="Rendered artifacts (REST): the manifest, one file, `download` all (= `render`).",
    no_args_is_help=True,
)
FabricArg = Annotated[str, typer.Option("--fabric", help="Fabric name")]
NameArg = Annotated[str, typer.Argument(help="Name")]
CHUNK = 64 * 1024
FABRIC_COLUMNS: output.Columns = (
    ("NAME", "name"),
    ("KIND", "kind"),
    ("POOL", lambda f: _pool(f)),
    ("P_KEYS/PORT", "pkeys_per_port"),
)
NODE_COLUMNS: output.Columns = (
    ("NAME", "name"),
    ("ROLE", "role"),
    ("STATE", "state"),
    ("TENANT", "tenant"),
    ("SERVICE", "service"),
    ("PORTS", lambda n: len(n.get("ports") or n.get("nics") or [])),
)
SERVICE_COLUMNS: output.Columns = (
    ("NAME", "name"),
    ("FABRIC", "fabric"),
    ("SEGMENT", "segment"),
    ("NODES", "nodes"),
)
ARTIFACT_COLUMNS: output.Columns = (("PATH", "path"), ("BYTES", "bytes"), ("SHA256", "sha256"))
MEDIA_TYPES = {".json": "application/json", ".yaml": "application/yaml", ".yml": "application/yaml"}


def fabric_path(fabric: str, *rest: str) -> str:
    """``/v1/fabrics/<fabric>[/<rest>...]`` with each name percent-encoded."""
    return "/".join(["/v1/fabrics", quote(fabric, safe=""), *rest])


def read_document(path: Path) -> dict[str, Any]:
    """A JSON or YAML mapping from a file (YAML is a superset of JSON)."""
    import yaml

    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise InvalidValueError(f"{path}: {' '.join(str(error).split())}") from error
    if not isinstance(document, dict):
        raise InvalidValueError(f"{path}: not a JSON or YAML mapping")
    return document


def _pool(fabric: dict[str, Any]) -> str:
    pool = fabric.get("pkey_range") or fabric.get("vlan_range") or {}
    return f"{pool.get('first')}-{pool.get('last')}" if pool else ""


@fabrics_app.command("list")
def fabrics_list(
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
) -> None:
    """List fabrics by name."""
    with ApiClient(url, token, as_json=as_json) as api:
        output.listing(api.pages("/v1/fabrics", {}, limit), FABRIC_COLUMNS, as_json=as_json)


@fabrics_app.command("show")
def fabrics_show(
    name: NameArg, url: UrlOption = None, token: TokenOption = None, as_json: JsonOption = False
) -> None:
    """One fabric with its pools and limits."""
    with ApiClient(url, token, as_json=as_json) as api:
        output.record(api.json("GET", fabric_path(name)), as_json=as_json)


@fabrics_app.command("create")
def fabrics_create(
    name: NameArg,
    kind: Annotated[str, typer.Option("--kind", help="infiniband or roce")] = "infiniband",
    pkey_range: Annotated[
        str | None, typer.Option("--pkey-range", help="InfiniBand P_Keys, e.g. 0x0100-0x7ffe")
    ] = None,
    spec: Annotated[
        Path | None,
        typer.Option("--spec", exists=True, dir_okay=False, help="JSON/YAML body (RoCE pools…)"),
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
    idempotency_key: IdempotencyKeyOption = None,
) -> None:
    """Register a fabric; the options override what `--spec` holds."""
    body: dict[str, Any] = {**(read_document(spec) if spec else {}), "name": name, "kind": kind}
    if pkey_range is not None:
        first, _, last = pkey_range.partition("-")
        body["pkey_range"] = {"first": first.strip(), "last": last.strip()}
    with ApiClient(url, token, as_json=as_json) as api:
        answer = api.json(
            "POST", "/v1/fabrics", json=body, dry_run=dry_run, idempotency_key=idempotency_key
        )
    finish(answer, as_json=as_json, dry_run=dry_run)


def finish(answer: dict[str, Any], *, as_json: bool, dry_run: bool) -> None:
    """Print a mutation's answer: its dry-run view (exit 1 when it would not hold) or the record."""
    if dry_run:
        raise typer.Exit(output.dry_run(answer, as_json=as_json))
    output.record(answer, as_json=as_json)


@topology_app.command("upload")
def topology_upload(
    fabric: FabricArg,
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    content_type: Annotated[
        str | None,
        typer.Option("--content-type", help="Default: by suffix (.json, .yaml), else text/plain"),
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
    dry_run: DryRunOption = False,
) -> None:
    """Reconcile the fabric with ibnetdiscover output (InfiniBand) or an inventory (RoCE)."""
    media = content_type or MEDIA_TYPES.get(file.suffix.lower(), "text/plain")
    with ApiClient(url, token, as_json=as_json) as api:
        answer = _upload(api, fabric_path(fabric, "topology"), file, media, quiet, dry_run)
    if dry_run or as_json:
        finish(answer, as_json=as_json, dry_run=dry_run)
        return
    counted = {k: len(v) if isinstance(v, list) else v for k, v in answer.items()}
    output.record(counted, as_json=False)


def _upload(
    api: ApiClient, path: str, file: Path, media: str, quiet: bool, dry_run: bool
) -> dict[str, Any]:
    """PUT `file` in chunks, advancing the progress bar as the body is sent."""
    size = file.stat().st_size
    # An explicit Content-Length: httpx2 then sends the generator as a plain body, not chunked.
    headers = {"Content-Type": media, "Content-Length": str(size)}
    with output.progress(f"upload {file.name}", size, quiet=quiet) as advance:
        answer: dict[str, Any] = api.json(
            "PUT", path, content=_chunks(file, advance), headers=headers, dry_run=dry_run
        )
    return answer


def _chunks(file: Path, advance: Callable[[int], None]) -> Iterator[bytes]:
    with file.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            advance(len(chunk))
            yield chunk


@nodes_app.command("list")
def nodes_list(
    fabric: FabricArg,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Held by this tenant")] = None,
    free: Annotated[bool | None, typer.Option("--free/--not-free", help="Free or not")] = None,
    role: Annotated[str | None, typer.Option("--role", help="compute|storage|management")] = None,
    state: Annotated[
        str | None, typer.Option("--state", help="free|allocated|absent|draining")
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
) -> None:
    """Nodes with their role, state and holder."""
    params = {"tenant": tenant, "free": free, "role": role, "state": state}
    if free is not None:
        params["free"] = "true" if free else "false"
    with ApiClient(url, token, as_json=as_json) as api:
        page = api.pages(fabric_path(fabric, "nodes"), params, limit)
    output.listing(page, NODE_COLUMNS, as_json=as_json)


@nodes_app.command("show")
def nodes_show(
    fabric: FabricArg,
    name: NameArg,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """One node and its ports (or NICs)."""
    with ApiClient(url, token, as_json=as_json) as api:
        node = api.json("GET", fabric_path(fabric, "nodes", quote(name, safe="")))
    output.record(node, as_json=as_json)


@nodes_app.command("update")
def nodes_update(
    fabric: FabricArg,
    name: NameArg,
    role: Annotated[str, typer.Option("--role", help="compute|storage|management")],
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
) -> None:
    """Set a node's role (the SM host is management, storage hosts storage)."""
    path = fabric_path(fabric, "nodes", quote(name, safe=""))
    with ApiClient(url, token, as_json=as_json) as api:
        answer = api.json("PATCH", path, json={"role": role}, dry_run=dry_run)
    finish(answer, as_json=as_json, dry_run=dry_run)


@services_app.command("list")
def services_list(
    fabric: FabricArg,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
) -> None:
    """Shared services of the fabric."""
    with ApiClient(url, token, as_json=as_json) as api:
        page = api.pages(fabric_path(fabric, "services"), {}, limit)
    output.listing(page, SERVICE_COLUMNS, as_json=as_json)


@services_app.command("show")
def services_show(
    fabric: FabricArg,
    name: NameArg,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """One shared service."""
    with ApiClient(url, token, as_json=as_json) as api:
        service = api.json("GET", fabric_path(fabric, "services", quote(name, safe="")))
    output.record(service, as_json=as_json)


@services_app.command("create")
def services_create(
    fabric: FabricArg,
    name: NameArg,
    nodes: Annotated[str, typer.Option("--nodes", help="Its hosts, comma-separated")],
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
    idempotency_key: IdempotencyKeyOption = None,
) -> None:
    """Create a shared service (its own segment; its hosts are full members)."""
    body = {"name": name, "nodes": split_names(nodes)}
    with ApiClient(url, token, as_json=as_json) as api:
        answer = api.json(
            "POST",
            fabric_path(fabric, "services"),
            json=body,
            dry_run=dry_run,
            idempotency_key=idempotency_key,
        )
    finish(answer, as_json=as_json, dry_run=dry_run)


def split_names(names: str) -> list[str]:
    """``"a, b,c"`` -> ``["a", "b", "c"]``."""
    return [name.strip() for name in names.split(",") if name.strip()]


@artifacts_app.command("list")
def artifacts_list(
    fabric: FabricArg, url: UrlOption = None, token: TokenOption = None, as_json: JsonOption = False
) -> None:
    """The manifest: each file's path, size and sha256, and the verified snapshot's digest."""
    with ApiClient(url, token, as_json=as_json) as api:
        manifest = api.json("GET", fabric_path(fabric, "artifacts"))
    if as_json:
        output.print_json(manifest)
        return
    typer.echo(f"snapshot {manifest['snapshot_digest']}")
    output.table(manifest["files"], ARTIFACT_COLUMNS)


@artifacts_app.command("get")
def artifacts_get(
    fabric: FabricArg,
    path: Annotated[str, typer.Argument(help="e.g. opensm/partitions.conf")],
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Print one rendered file, byte for byte, on stdout."""
    with ApiClient(url, token) as api:
        response = api.request("GET", fabric_path(fabric, "artifacts", quote(path)))
    typer.echo(response.content, nl=False)
    raise typer.Exit(DONE)
