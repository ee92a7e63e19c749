"""`isofabric proof issue|verify`: isolation proofs (DSSE, in-toto), issued and checked offline."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli import rest_counterparts as rest
from cli.client import TROUBLE, TokenOption, UrlOption, fail
from cli.options import DbOption, FabricOption, open_uow, settings_for

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from policies.evidence.keyring import KeyringEntry

proof_app = typer.Typer(help="Isolation proofs (DSSE, in-toto).", no_args_is_help=True)


class ProofViewOption(StrEnum):
    """Whom a proof is for (`policies.evidence.proofs`, "Views")."""

    FULL = "full"
    TENANT = "tenant"


@proof_app.command("issue")
def proof_issue(
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant name")],
    fabric: FabricOption,
    db: DbOption = None,
    view: Annotated[
        ProofViewOption,
        typer.Option("--view", help="full names every member; tenant counts other tenants' ports"),
    ] = ProofViewOption.FULL,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Issue (and store) an isolation proof; print {"id", "view", "envelope"}.

    With --url the service issues it; the view follows the token's role (a tenant role gets the
    tenant view), so --view is refused there.
    """
    from tenancy.usecases import proofs

    if rest.exclusive(url, db):
        if view is not ProofViewOption.FULL:
            fail("over REST the view follows the token's role: drop --view", 2)
        rest.proof_issue(str(url), token, tenant, fabric)
        return

    uow = open_uow(db)
    proof = proofs.issue(uow, tenant_name=tenant, fabric_name=fabric, view=view.value)
    typer.echo(json.dumps(proof.model_dump(mode="json", by_alias=True), indent=2))


@proof_app.command("verify")
def proof_verify(
    proof: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    key: Annotated[
        list[Path] | None,
        typer.Option("--key", exists=True, dir_okay=False, help="A public key PEM to trust"),
    ] = None,
    keyring: Annotated[
        Path | None,
        typer.Option(
            "--keyring",
            dir_okay=False,
            help="Keyring of trusted public keys (default without --key: ISOFABRIC_KEYRING_FILE, "
            "or the one beside the SQLite database)",
        ),
    ] = None,
    artifacts: Annotated[
        Path | None,
        typer.Option("--artifacts", exists=True, file_okay=False, help="Rendered artifacts dir"),
    ] = None,
) -> None:
    """Check a proof's signature and, with --artifacts, its subjects and reachability claims.

    Only the keys given (--key, --keyring) are trusted; a proof signed by any other key fails
    (exit 1), as does a subject file that differs from the proof's. A subject file missing from
    --artifacts is not checked, which is no failure: exit 2 (the check could not be done).
    """
    from policies.errors import InvalidValueError
    from policies.evidence.keyring import verify_proof

    try:
        document = json.loads(proof.read_text())
        envelope = document.get("envelope", document) if isinstance(document, dict) else {}
        statement = verify_proof(envelope, *_trusted_keys(key or [], keyring))
        typer.echo("signature: OK")
        if artifacts is not None:
            _check_artifacts(statement, artifacts)
    except _MissingArtifactError as missing:
        fail(str(missing), TROUBLE)
    except (InvalidValueError, ValueError, KeyError, TypeError, AttributeError) as error:
        reason = getattr(error, "detail", None) or str(error)
        typer.echo(f"proof verification FAILED: {reason}", err=True)
        raise typer.Exit(1) from error
    predicate = statement["predicate"]
    view = predicate.get("view", "full")
    typer.echo(
        f"proof OK: tenant {predicate.get('tenant')} on fabric {predicate.get('fabric')} "
        f"({view} view)"
    )


class _MissingArtifactError(Exception):
    """A subject file the verifier was not given: evidence unavailable, nothing found altered."""


def _trusted_keys(
    pems: list[Path], keyring: Path | None
) -> tuple[list[KeyringEntry], list[Ed25519PublicKey]]:
    """The keyring's entries (the default keyring when no --key) and each --key PEM's key."""
    from policies.errors import InvalidValueError
    from policies.evidence.audit_log import load_public_key
    from tenancy.store import key_store

    keys = [load_public_key(path.read_text()) for path in pems]
    path = keyring or (None if pems else settings_for(None).keyring_path)
    entries = key_store.read_keyring(path) if path is not None else []
    if not keys and not entries:
        raise InvalidValueError("no trusted key: pass --keyring FILE or --key PEM")
    return entries, keys


def _check_artifacts(statement: dict[str, Any], artifacts: Path) -> None:
    """Check the Statement's subjects against the rendered files, then re-derive its claims."""
    from policies.evidence.proofs import check_claims

    predicate = statement["predicate"]
    files = {
        s["name"]: _artifact_bytes(artifacts, s["name"], predicate) for s in statement["subject"]
    }
    reach = check_claims(statement, files)
    typer.echo(f"subjects: OK ({len(files)} file(s) match)")
    typer.echo("reachability: OK (" + ", ".join(f"{o}@{s}" for o, s in sorted(reach)) + ")")
    counted = [s for s in statement["predicate"].get("segments", []) if "others" in s]
    if statement["predicate"].get("view") == "tenant" and counted:
        # check_claims checked each segment's count against the file: say what they stand for.
        # A RoCE tenant view counts nothing (it names no other member), so it prints no line.
        others = ", ".join(f"{s['segment']}: {s['others']['count']}" for s in counted)
        typer.echo(f"others: OK ({others}; counted in the file, none reachable)")
    _echo_peerings(statement["predicate"])
    _echo_policy(statement["predicate"])


def _echo_peerings(predicate: dict[str, Any]) -> None:
    """Say what check_claims found of the peering claims (policies.evidence.peering_claims)."""
    if "peerings" not in predicate:
        typer.echo("peerings: not stated (issued before peerings were claimed; checked as before)")
        return
    found = [f"{p['peer']}@{p['segment']}" for p in predicate["peerings"]]
    where = "RT imported on every leaf" if predicate.get("kind") == "roce" else "shared partition"
    typer.echo(
        f"peerings: OK ({', '.join(found)}; intended edges, {where} in the artifacts)"
        if found
        else "peerings: none (the artifacts show the tenant reaching no other tenant)"
    )


def _echo_policy(predicate: dict[str, Any]) -> None:
    """Say what check_claims found of the policy claims (policies.evidence.policy_claims)."""
    policy = predicate.get("policy")
    if policy is None:
        typer.echo("policy: not stated (issued before policies existed; checked as before)")
        return
    stated = f"policy: version {policy['version']} ({policy['fingerprint']})"
    if "isolation" in policy:
        stated += f", tenant kind {policy['tenant_kind']}, isolation {policy['isolation']}"
    typer.echo(stated)
    topology = predicate.get("dedicated_leaf")
    if topology is not None:
        where = "VLAN members" if predicate.get("kind") == "roce" else "partition members"
        typer.echo(
            f"dedicated_leaf: OK ({len(topology['leaves'])} leaf switch(es), no other tenant's "
            f"port on any; the tenant's ports there are its {where} in the artifacts)"
        )


def _artifact_bytes(directory: Path, name: str, predicate: dict[str, Any]) -> bytes:
    """The subject file `name` in `directory`.

    Raises:
        ValueError: `name` leads outside `directory` (the proof fails).
        _MissingArtifactError: no such file; its message says where to fetch it.
    """
    path = (directory / name).resolve()
    if directory.resolve() not in path.parents:
        raise ValueError(f"subject '{name}' is outside the artifacts directory")
    if not path.is_file():
        digest, fabric = predicate.get("snapshot_digest"), predicate.get("fabric")
        raise _MissingArtifactError(
            f"artifact '{name}' is missing from {directory}: the subjects were not checked "
            f"(nothing was found altered); put the files of snapshot {digest} there (GET "
            f"/v1/fabrics/{fabric}/snapshots/{digest}/artifacts/{name}) and verify again"
        )
    return path.read_bytes()
