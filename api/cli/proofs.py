"""`isofabric proof issue|verify`: isolation proofs (DSSE, in-toto), issued and checked offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli.options import DbOption, FabricOption, open_uow

proof_app = typer.Typer(help="Isolation proofs (DSSE, in-toto).", no_args_is_help=True)


@proof_app.command("issue")
def proof_issue(
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant name")],
    fabric: FabricOption,
    db: DbOption = None,
) -> None:
    """Issue (and store) an isolation proof; print {"id", "envelope"}."""
    from tenancy import proofs

    proof = proofs.issue(open_uow(db), tenant_name=tenant, fabric_name=fabric)
    typer.echo(json.dumps(proof.model_dump(mode="json", by_alias=True), indent=2))


@proof_app.command("verify")
def proof_verify(
    proof: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    key: Annotated[
        list[Path], typer.Option("--key", exists=True, dir_okay=False, help="Public key PEM")
    ],
    artifacts: Annotated[
        Path | None,
        typer.Option("--artifacts", exists=True, file_okay=False, help="Rendered artifacts dir"),
    ] = None,
) -> None:
    """Check a proof's signature and, with --artifacts, its subjects and reachability claims."""
    from policies.errors import ValidationError
    from policies.evidence.audit_log import load_public_key
    from policies.evidence.proofs import verify_envelope

    try:
        document = json.loads(proof.read_text())
        envelope = document.get("envelope", document) if isinstance(document, dict) else {}
        keys = [load_public_key(path.read_text()) for path in key]
        statement = verify_envelope(envelope, keys)
        typer.echo("signature: OK")
        if artifacts is not None:
            _check_artifacts(statement, artifacts)
    except (ValidationError, ValueError, KeyError, TypeError, AttributeError) as error:
        reason = getattr(error, "detail", None) or str(error)
        typer.echo(f"proof verification FAILED: {reason}", err=True)
        raise typer.Exit(1) from error
    predicate = statement["predicate"]
    typer.echo(f"proof OK: tenant {predicate.get('tenant')} on fabric {predicate.get('fabric')}")


def _check_artifacts(statement: dict[str, Any], artifacts: Path) -> None:
    """Check the Statement's subjects against the rendered files, then re-derive its claims."""
    from policies.evidence.proofs import check_claims

    files = {s["name"]: _artifact_bytes(artifacts, s["name"]) for s in statement["subject"]}
    reach = check_claims(statement, files)
    typer.echo(f"subjects: OK ({len(files)} file(s) match)")
    typer.echo("reachability: OK (" + ", ".join(f"{o}@{s}" for o, s in sorted(reach)) + ")")


def _artifact_bytes(directory: Path, name: str) -> bytes:
    path = (directory / name).resolve()
    if directory.resolve() not in path.parents:
        raise ValueError(f"subject '{name}' is outside the artifacts directory")
    if not path.is_file():
        raise ValueError(f"artifact '{name}' is missing from {directory}")
    return path.read_bytes()
