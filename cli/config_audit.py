"""`isofabric audit-config`: audit a deployed config file against the fabric's intent."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.options import DbOption, FabricOption, open_uow

_FORMAT_BY_SUFFIX = {".json": "config_db", ".conf": "partitions"}


def _audit_format(file: Path, given: str | None) -> str:
    if given:
        return given
    if file.name.startswith("frr"):
        return "frr"
    return _FORMAT_BY_SUFFIX.get(file.suffix, "partitions")


def audit_config(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    fabric: FabricOption,
    format: Annotated[
        str | None,
        typer.Option("--format", help="partitions | config_db | frr (default: from the name)"),
    ] = None,
    leaf: Annotated[str | None, typer.Option("--leaf", help="Leaf switch (RoCE)")] = None,
    db: DbOption = None,
) -> None:
    """Audit a deployed config file against the fabric's intent; print the report as JSON.

    Exit 1 if isolation does not hold or any finding is critical.
    """
    from tenancy.usecases.config_audits import audit_config as run_audit

    text = file.read_text(encoding="utf-8", errors="replace")
    view = run_audit(
        open_uow(db), fabric_name=fabric, fmt=_audit_format(file, format), leaf=leaf, text=text
    )
    typer.echo(view.model_dump_json(indent=2))
    critical = any(f.severity == "critical" for f in view.findings)
    raise typer.Exit(0 if view.holds and not critical else 1)
