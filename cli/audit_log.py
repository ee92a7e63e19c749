"""`isofabric audit export|verify`: the tamper-evident audit log, offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from cli.options import DbOption, open_uow

audit_app = typer.Typer(help="The tamper-evident audit log.", no_args_is_help=True)


@audit_app.command("export")
def audit_export(db: DbOption = None) -> None:
    """Print the audit log as JSON Lines (one entry per line, with its leaf hash)."""
    from tenancy.record import audit_log

    for line in audit_log.export_lines(open_uow(db)):
        typer.echo(line)


@audit_app.command("verify")
def audit_verify(
    log: Annotated[Path | None, typer.Option("--log", help="An exported log (JSON Lines)")] = None,
    checkpoint: Annotated[
        Path | None, typer.Option("--checkpoint", help="A checkpoint note you kept earlier")
    ] = None,
    key: Annotated[
        Path | None, typer.Option("--key", help="The one public key PEM to trust (else --keyring)")
    ] = None,
    keyring: Annotated[
        Path | None,
        typer.Option(
            "--keyring",
            help="Keyring of trusted public keys (default: ISOFABRIC_KEYRING_FILE, or the one "
            "beside the SQLite database)",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Recompute the Merkle tree, check stored checkpoints and a kept one; exit 1 if tampered.

    Signatures are checked with the keys you give (--key, or the keyring), never with the keys
    the database lists: whoever can change rows could list their own.
    """
    from policies.errors import IsofabricError
    from tenancy.record import audit_log

    try:
        report = audit_log.verify(
            open_uow(db),
            log_text=log.read_text() if log else None,
            kept=_note_of(checkpoint) if checkpoint else None,
            key_pem=key.read_text() if key else None,
            keyring=keyring,
        )
    except IsofabricError as error:
        typer.echo(f"error: {error.detail}", err=True)
        raise typer.Exit(2) from error
    for problem in report.problems:
        typer.echo(f"FAIL: {problem}")
    if report.ok and report.checkpoints == 0:
        typer.echo(
            f"OK: {report.size} entries are consistent, but no signed checkpoint covers them "
            "yet (GET /v1/audit/checkpoint signs one)"
        )
        return
    if report.ok:
        typer.echo(f"OK: {report.size} entries verify against every checkpoint")
        return
    typer.echo(f"first bad index: {report.first_bad_index}")
    raise typer.Exit(1)


def _note_of(path: Path) -> str:
    """A kept checkpoint: the note itself, or the JSON GET /v1/audit/checkpoint returned."""
    raw = path.read_text()
    if raw.lstrip().startswith("{"):
        note: str = json.loads(raw)["note"]
        return note
    return raw
