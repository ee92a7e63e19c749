"""`isofabric render`, `verify` and `check-partitions`: the OpenSM files, the verdict, a lint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from cli import rest_counterparts as rest
from cli.client import JsonOption, QuietOption, TokenOption, UrlOption, fail
from cli.options import DbOption, FabricOption, open_uow
from policies.artifacts import manifest


def render(
    fabric: FabricOption,
    out: Annotated[Path, typer.Option("--out", help="Directory to write the files into")],
    db: DbOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    quiet: QuietOption = False,
) -> None:
    """Write the fabric's verified artifacts and a manifest.json into OUT.

    With --url: download them from the service (each file checked against its manifest).
    """
    from tenancy.store.lookups import fabric_named

    if rest.exclusive(url, db):
        rest.download(str(url), token, fabric, out, quiet)
        return
    from tenancy.gate.verification import render_fabric

    uow = open_uow(db)
    with uow.transaction() as tx:
        snapshot, files = render_fabric(tx, fabric_named(tx.session, fabric))
    for artifact in files:
        _write_atomically(out / artifact.path, artifact.content)
    document = manifest(fabric, snapshot.digest, files)
    _write_atomically(out / "manifest.json", (json.dumps(document, indent=2) + "\n").encode())
    typer.echo(f"wrote {len(files)} files for snapshot {snapshot.digest} to {out}")


def _write_atomically(path: Path, content: bytes) -> None:
    # OpenSM re-reads partitions.conf at every heavy sweep: never let it see a half-written file.
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(content)
    if path.name == "opensm.conf":
        temporary.chmod(0o600)  # it holds the subnet's management keys
    temporary.replace(path)


def verify(
    fabric: FabricOption,
    db: DbOption = None,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Re-verify the whole fabric and compare verdict and digest with the committed "
            "ones (the incremental gate's reference check); exit 1 on any disagreement.",
        ),
    ] = False,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print the fabric's verdict (JSON; over REST a table, or --json); exit 1 if it fails."""
    from tenancy.gate.full_check import full_check
    from tenancy.gate.verification import verify_fabric

    if rest.exclusive(url, db):
        if full:
            fail("--full re-verifies on the database: run it where --db reaches", 2)
        rest.verify(str(url), token, fabric, as_json)

    if full:
        check = full_check(open_uow(db), fabric_name=fabric)
        typer.echo(check.model_dump_json(indent=2))
        raise typer.Exit(0 if check.matches and check.holds else 1)
    view = verify_fabric(open_uow(db), fabric_name=fabric)
    typer.echo(view.model_dump_json(indent=2, by_alias=True))
    raise typer.Exit(0 if view.holds else 1)


def check_partitions(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
) -> None:
    """Report constructs on which OpenSM fails open or changes meaning; exit 1 on any hazard."""
    from policies.findings import Severity
    from policies.infiniband.parse_partitions import parse_partitions_conf

    parsed = parse_partitions_conf(file.read_text(encoding="utf-8", errors="replace"))
    for finding in parsed.findings:
        where = f"line {finding.line}" if finding.line else "file"
        typer.echo(f"{file}:{where}: {finding.severity.value}: {finding.code}: {finding.message}")
    critical = [f for f in parsed.findings if f.severity is Severity.CRITICAL]
    typer.echo(
        f"{len(parsed.partitions)} partition(s), {len(parsed.findings)} finding(s), "
        f"{len(critical)} critical"
    )
    raise typer.Exit(1 if critical else 0)
