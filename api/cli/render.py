"""The `isofabric` command line: serve the API, migrate, render, verify, check files."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from tenancy.bootstrap import prepare_database
from tenancy.db import make_engine
from tenancy.settings import Settings, load_settings
from tenancy.uow import UnitOfWork

app = typer.Typer(
    help="isofabric: multi-tenant isolation for InfiniBand fabrics.", no_args_is_help=True
)
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
app.add_typer(db_app, name="db")
audit_app = typer.Typer(help="The tamper-evident audit log.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")
token_app = typer.Typer(help="API tokens (role, tenant scope, expiry).", no_args_is_help=True)
app.add_typer(token_app, name="token")

REPO_ROOT = Path(__file__).resolve().parents[1]
DEMO_TOPOLOGY = REPO_ROOT / "examples" / "ib-east.ibnetdiscover"
DEMO_ROCE_INVENTORY = REPO_ROOT / "examples" / "roce-west.json"
DbOption = Annotated[str | None, typer.Option("--db", help="SQLAlchemy URL (default: settings)")]
FabricOption = Annotated[str, typer.Option("--fabric", help="Fabric name")]


def _settings(db: str | None) -> Settings:
    settings = load_settings()
    return replace(settings, database_url=db) if db else settings


def _uow(db: str | None) -> UnitOfWork:
    settings = _settings(db)
    engine = make_engine(settings.database_url)
    prepare_database(engine)
    return UnitOfWork(engine, settings)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    db: DbOption = None,
    demo: Annotated[bool, typer.Option(help="Load the demo fabric and tenants")] = False,
) -> None:
    """Run the REST API (migrations are applied on start)."""
    import uvicorn

    from api.app import create_app
    from tenancy.demo import load_demo

    settings = _settings(db)
    application = create_app(settings)
    uow = application.state.uow
    if demo and load_demo(
        uow,
        topology_text=DEMO_TOPOLOGY.read_text(),
        roce_inventory_text=DEMO_ROCE_INVENTORY.read_text(),
    ):
        typer.echo(
            "loaded demo data: fabrics ib-east (InfiniBand) and roce-west (RoCE), "
            "tenants acme, research, globex"
        )
    typer.echo(
        f"isofabric API on http://{host}:{port}/v1  (interactive docs: http://{host}:{port}/docs)"
    )
    uvicorn.run(application, host=host, port=port, log_level="info")


@db_app.command("upgrade")
def db_upgrade(db: DbOption = None) -> None:
    """Apply every migration and seed the QoS classes."""
    _uow(db)
    typer.echo("database is at the latest schema")


@app.command()
def render(
    fabric: FabricOption,
    out: Annotated[Path, typer.Option("--out", help="Directory to write the files into")],
    db: DbOption = None,
) -> None:
    """Write the fabric's verified OpenSM files and a manifest.json into OUT."""
    from tenancy.lookups import fabric_named
    from tenancy.verification import render_fabric

    uow = _uow(db)
    with uow.transaction() as tx:
        snapshot, files = render_fabric(tx, fabric_named(tx.session, fabric))
    listed = []
    for artifact in files:
        _write_atomically(out / artifact.path, artifact.content)
        listed.append(
            {"path": artifact.path, "sha256": artifact.sha256, "bytes": len(artifact.content)}
        )
    manifest = {"fabric": fabric, "snapshot_digest": snapshot.digest, "files": listed}
    _write_atomically(out / "manifest.json", (json.dumps(manifest, indent=2) + "\n").encode())
    typer.echo(f"wrote {len(files)} files for snapshot {snapshot.digest} to {out}")


def _write_atomically(path: Path, content: bytes) -> None:
    # OpenSM re-reads partitions.conf at every heavy sweep: never let it see a half-written file.
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(content)
    if path.name == "opensm.conf":
        temporary.chmod(0o600)  # it holds the subnet's management keys
    temporary.replace(path)


@app.command()
def verify(fabric: FabricOption, db: DbOption = None) -> None:
    """Print the fabric's verdict as JSON; exit 1 if isolation does not hold."""
    from tenancy.verification import verify_fabric

    view = verify_fabric(_uow(db), fabric_name=fabric)
    typer.echo(view.model_dump_json(indent=2, by_alias=True))
    raise typer.Exit(0 if view.holds else 1)


@app.command("check-partitions")
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


@audit_app.command("export")
def audit_export(db: DbOption = None) -> None:
    """Print the audit log as JSON Lines (one entry per line, with its leaf hash)."""
    from tenancy import audit_log

    for line in audit_log.export_lines(_uow(db)):
        typer.echo(line)


@audit_app.command("verify")
def audit_verify(
    log: Annotated[Path | None, typer.Option("--log", help="An exported log (JSON Lines)")] = None,
    checkpoint: Annotated[
        Path | None, typer.Option("--checkpoint", help="A checkpoint note you kept earlier")
    ] = None,
    key: Annotated[Path | None, typer.Option("--key", help="Public key PEM to verify with")] = None,
    db: DbOption = None,
) -> None:
    """Recompute the Merkle tree, check stored checkpoints and a kept one; exit 1 if tampered."""
    from tenancy import audit_log

    report = audit_log.verify(
        _uow(db),
        log_text=log.read_text() if log else None,
        kept=_note_of(checkpoint) if checkpoint else None,
        key_pem=key.read_text() if key else None,
    )
    for problem in report.problems:
        typer.echo(f"FAIL: {problem}")
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


@token_app.command("create")
def token_create(
    role: Annotated[
        str, typer.Option("--role", help="operator|auditor|billing|tenant-admin|tenant-viewer")
    ],
    name: Annotated[str, typer.Option("--name", help="A label for the token")],
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="The tenant (tenant roles only)")
    ] = None,
    expires_in: Annotated[
        int | None, typer.Option("--expires-in", help="Lifetime in seconds (default: none)")
    ] = None,
    db: DbOption = None,
) -> None:
    """Mint an API token and print its secret (shown this once; only its hash is stored)."""
    from datetime import UTC, datetime, timedelta

    from pydantic import ValidationError

    from tenancy import tokens
    from tenancy.schemas import TokenCreate

    expires_at = datetime.now(UTC) + timedelta(seconds=expires_in) if expires_in else None
    try:
        spec = TokenCreate.model_validate(
            {"name": name, "role": role, "tenant": tenant, "expires_at": expires_at}
        )
    except ValidationError as error:
        typer.echo(f"invalid token request: {error}", err=True)
        raise typer.Exit(2) from error
    typer.echo(tokens.create_token(_uow(db), spec=spec).token)


@token_app.command("list")
def token_list(db: DbOption = None) -> None:
    """Print every token (never its secret) as JSON Lines."""
    from tenancy import tokens

    uow, cursor = _uow(db), None
    while True:
        page = tokens.list_tokens(uow, limit=1000, cursor=cursor)
        for view in page.data:
            typer.echo(view.model_dump_json())
        if page.next is None:
            return
        cursor = page.next


@token_app.command("revoke")
def token_revoke(token_id: Annotated[str, typer.Argument()], db: DbOption = None) -> None:
    """Revoke a token by id."""
    from tenancy import tokens

    tokens.revoke_token(_uow(db), token_id=token_id)
    typer.echo(f"revoked {token_id}")


def main() -> None:
    app()


# --- config audits and the collector (issue 5 items 4-5) --------------------------------------

_FORMAT_BY_SUFFIX = {".json": "config_db", ".conf": "partitions"}


def _audit_format(file: Path, given: str | None) -> str:
    if given:
        return given
    if file.name.startswith("frr"):
        return "frr"
    return _FORMAT_BY_SUFFIX.get(file.suffix, "partitions")


@app.command("audit-config")
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

    Exit 1 if isolation does not hold or any finding is critical."""
    from tenancy.config_audits import audit_config as run_audit

    text = file.read_text(encoding="utf-8", errors="replace")
    view = run_audit(
        _uow(db), fabric_name=fabric, fmt=_audit_format(file, format), leaf=leaf, text=text
    )
    typer.echo(view.model_dump_json(indent=2))
    critical = any(f.severity == "critical" for f in view.findings)
    raise typer.Exit(0 if view.holds and not critical else 1)


collect_app = typer.Typer(help="Read a live fabric's state (run on an SM host).")
app.add_typer(collect_app, name="collect")


def _m_key(text: str | None) -> int | None:
    return int(text, 0) if text else None


@collect_app.command("ib")
def collect_ib_command(
    out: Annotated[Path | None, typer.Option("--out", help="Write here instead of stdout")] = None,
    m_key: Annotated[
        str | None,
        typer.Option("--m-key", "-y", envvar="ISOFABRIC_M_KEY", help="M_Key for smpquery -y"),
    ] = None,
) -> None:
    """Read ibnetdiscover and every CA port's P_Key table into an observation document."""
    from api.collect import CollectError, collect_ib

    try:
        document = collect_ib(m_key=_m_key(m_key))
    except CollectError as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(2) from error
    text = json.dumps(document, indent=2) + "\n"
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)


# --- signing keys and isolation proofs (issue 5) ------------------------------------------------

keys_app = typer.Typer(help="The service's Ed25519 signing keys.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")
proof_app = typer.Typer(help="Isolation proofs (DSSE, in-toto).", no_args_is_help=True)
app.add_typer(proof_app, name="proof")


@keys_app.command("create")
def keys_create(db: DbOption = None) -> None:
    """Create the active signing key unless one exists; print its public form."""
    from tenancy import signing_keys

    typer.echo(json.dumps(signing_keys.create(_uow(db)), indent=2))


@keys_app.command("rotate")
def keys_rotate(db: DbOption = None) -> None:
    """Make a new active key; the previous one is retired and stays published."""
    from tenancy import signing_keys

    typer.echo(json.dumps(signing_keys.rotate(_uow(db)), indent=2))


@keys_app.command("list")
def keys_list(db: DbOption = None) -> None:
    """Print every public key (keyid, PEM, JWK, status) as JSON."""
    from tenancy import signing_keys

    typer.echo(json.dumps(signing_keys.list_keys(_uow(db)), indent=2))


@proof_app.command("issue")
def proof_issue(
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant name")],
    fabric: FabricOption,
    db: DbOption = None,
) -> None:
    """Issue (and store) an isolation proof; print {"id", "envelope"}."""
    from tenancy import proofs

    typer.echo(json.dumps(proofs.issue(_uow(db), tenant_name=tenant, fabric_name=fabric), indent=2))


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
    from policies.evidence.proofs import check_claims, verify_envelope

    try:
        document = json.loads(proof.read_text())
        envelope = document.get("envelope", document) if isinstance(document, dict) else {}
        keys = [load_public_key(path.read_text()) for path in key]
        statement = verify_envelope(envelope, keys)
        typer.echo("signature: OK")
        if artifacts is not None:
            files = {s["name"]: _artifact_bytes(artifacts, s["name"]) for s in statement["subject"]}
            reach = check_claims(statement, files)
            typer.echo(f"subjects: OK ({len(files)} file(s) match)")
            typer.echo("reachability: OK (" + ", ".join(f"{o}@{s}" for o, s in sorted(reach)) + ")")
    except (ValidationError, ValueError, KeyError, TypeError, AttributeError) as error:
        reason = getattr(error, "detail", None) or str(error)
        typer.echo(f"proof verification FAILED: {reason}", err=True)
        raise typer.Exit(1) from error
    predicate = statement["predicate"]
    typer.echo(f"proof OK: tenant {predicate.get('tenant')} on fabric {predicate.get('fabric')}")


def _artifact_bytes(directory: Path, name: str) -> bytes:
    path = (directory / name).resolve()
    if directory.resolve() not in path.parents:
        raise ValueError(f"subject '{name}' is outside the artifacts directory")
    if not path.is_file():
        raise ValueError(f"artifact '{name}' is missing from {directory}")
    return path.read_bytes()
