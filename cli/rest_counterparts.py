"""The REST side of the commands that also run on the local database: one command, two places.

`token create|list|revoke`, `proof issue`, `verify` and `render` work on the database (``--db``)
unless a server is named (``--url`` or ``ISOFABRIC_URL``); then the command calls the functions
here, which do the same job over the API. `proof list` and `proof show` exist over REST only.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

import typer

from cli import output
from cli.client import CHECK_FAILED, DONE, REFUSED, TROUBLE, ApiClient, fail
from cli.fabric_commands import fabric_path
from cli.tenant_commands import tenant_path

TOKEN_COLUMNS: output.Columns = (
    ("ID", "id"),
    ("NAME", "name"),
    ("ROLE", "role"),
    ("TENANT", "tenant"),
    ("FABRIC", "fabric"),
    ("CREATED", "created_at"),
    ("EXPIRES", "expires_at"),
    ("REVOKED", "revoked_at"),
)
PROOF_COLUMNS: output.Columns = (
    ("ID", "id"),
    ("TENANT", "tenant"),
    ("FABRIC", "fabric"),
    ("VIEW", "view"),
    ("CREATED", "created_at"),
)
COUNTEREXAMPLE_COLUMNS: output.Columns = (
    ("RULE", "rule"),
    ("SEGMENT", "partition"),
    ("MESSAGE", "message"),
)
EDGE_COLUMNS: output.Columns = (
    ("FROM", "from"),
    ("TO", "to"),
    ("SEGMENT", "segment"),
    ("ALLOWED", "allowed"),
)
# Local `render` writes opensm.conf 0600 too: it holds the subnet's management keys.
SECRET_FILES = frozenset({"opensm.conf"})


def exclusive(url: str | None, db: str | None) -> str | None:
    """The server's URL when the command is to go over REST; exit 2 if --db names a database too.

    An empty ``ISOFABRIC_URL`` counts as unset, so ``ISOFABRIC_URL= isofabric verify --db …``
    works where the variable is exported.
    """
    if url and db:
        fail("--db and --url (or ISOFABRIC_URL) name two places: give one", TROUBLE)
    return url or None


# --- token ------------------------------------------------------------------------------------


def token_create(
    url: str, token: str | None, spec: dict[str, Any], expires_in: int | None, as_json: bool
) -> None:
    """POST /v1/tokens; print the secret (shown this once), or the whole answer with --json."""
    if expires_in:
        spec["expires_at"] = (datetime.now(UTC) + timedelta(seconds=expires_in)).isoformat()
    body = {key: value for key, value in spec.items() if value is not None}
    with ApiClient(url, token, as_json=as_json) as api:
        created = api.json("POST", "/v1/tokens", json=body)
    if as_json:
        output.print_json(created)
    else:
        typer.echo(created["token"])


def token_list(url: str, token: str | None, as_json: bool, limit: int | None) -> None:
    """GET /v1/tokens, every page: a table, or the JSON."""
    with ApiClient(url, token, as_json=as_json) as api:
        page = api.pages("/v1/tokens", {}, limit)
    output.listing(page, TOKEN_COLUMNS, as_json=as_json)


def token_revoke(url: str, token: str | None, token_id: str) -> None:
    """DELETE /v1/tokens/{id}."""
    with ApiClient(url, token) as api:
        api.request("DELETE", f"/v1/tokens/{quote(token_id, safe='')}")
    typer.echo(f"revoked {token_id}")


def token_reissue(url: str, token: str | None, token_id: str, as_json: bool) -> None:
    """POST /v1/tokens/{id}/reissue: the token, now a child of this command's token."""
    with ApiClient(url, token, as_json=as_json) as api:
        view = api.json("POST", f"/v1/tokens/{quote(token_id, safe='')}/reissue")
    if as_json:
        output.print_json(view)
    else:
        typer.echo(f"reissued {token_id} under {view['parent'] or 'no parent (a root)'}")


# --- proof ------------------------------------------------------------------------------------


def proof_issue(url: str, token: str | None, tenant: str, fabric: str) -> None:
    """POST /v1/tenants/{tenant}/isolation-proofs; print ``{"id", "view", "envelope"}``.

    The server picks the view from the token's role (tenant roles get the tenant view).
    """
    with ApiClient(url, token, as_json=True) as api:
        proof = api.json("POST", tenant_path(tenant, "isolation-proofs"), json={"fabric": fabric})
    output.print_json(proof)


def proof_list(
    url: str | None,
    token: str | None,
    filters: dict[str, str | None],
    as_json: bool,
    limit: int | None,
) -> None:
    """GET /v1/proofs: stored proofs, oldest first."""
    with ApiClient(url, token, as_json=as_json) as api:
        page = api.pages("/v1/proofs", filters, limit)
    output.listing(page, PROOF_COLUMNS, as_json=as_json)


def proof_show(url: str | None, token: str | None, proof_id: str, out: Path | None) -> None:
    """GET /v1/proofs/{id}: the JSON `proof verify` reads, on stdout or into `out`."""
    with ApiClient(url, token, as_json=True) as api:
        proof = api.json("GET", f"/v1/proofs/{quote(proof_id, safe='')}")
    text = json.dumps(proof, indent=2) + "\n"
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)
        typer.echo(f"wrote proof {proof_id} to {out}", err=True)


# --- verify -----------------------------------------------------------------------------------


def verify(url: str, token: str | None, fabric: str, as_json: bool) -> NoReturn:
    """GET /v1/fabrics/{fabric}/verification; exit 1 if isolation does not hold."""
    with ApiClient(url, token, as_json=as_json) as api:
        verdict = api.json("GET", fabric_path(fabric, "verification"))
    if as_json:
        output.print_json(verdict)
    else:
        holds = "holds" if verdict["holds"] else "does NOT hold"
        typer.echo(f"{fabric}: isolation {holds} (snapshot {verdict['snapshot_digest']})")
        if verdict.get("alarm"):
            typer.echo(f"alarm: {verdict['alarm']}")
        if verdict["counterexamples"]:
            output.table(verdict["counterexamples"], COUNTEREXAMPLE_COLUMNS, "counterexamples")
        output.table(verdict["reachability"], EDGE_COLUMNS, "reachability")
    raise typer.Exit(DONE if verdict["holds"] else CHECK_FAILED)


# --- render: download the verified artifacts ---------------------------------------------------


def download(url: str, token: str | None, fabric: str, out: Path, quiet: bool) -> None:
    """Write the fabric's artifacts into `out` with a manifest.json, each file checked.

    Each file's sha256 must be the manifest's and each file must come from the manifest's
    snapshot (its X-Snapshot-Digest): a change committed during the download exits 4 ("run
    again"), never leaving a mix of two snapshots presented as one.
    """
    with ApiClient(url, token) as api:
        manifest = api.json("GET", fabric_path(fabric, "artifacts"))
        total = sum(entry["bytes"] for entry in manifest["files"])
        with output.progress(f"{fabric} artifacts", total, quiet=quiet) as advance:
            for entry in manifest["files"]:
                _fetch(api, fabric, manifest["snapshot_digest"], entry, out, advance)
    document = (json.dumps(manifest, indent=2) + "\n").encode()
    _replace(out / "manifest.json", _staged(out / "manifest.json", document))
    digest = manifest["snapshot_digest"]
    typer.echo(f"downloaded {len(manifest['files'])} files for snapshot {digest} to {out}")


def _fetch(
    api: ApiClient, fabric: str, digest: str, entry: dict[str, Any], out: Path, advance: Any
) -> None:
    target = _inside(out, entry["path"])
    stream = api.stream("GET", fabric_path(fabric, "artifacts", quote(entry["path"])))
    with stream as response:
        served = response.headers.get("X-Snapshot-Digest")
        if served != digest:
            fail(
                f"the fabric changed during the download ({digest}, then {served}): run again",
                REFUSED,
            )
        sha, staged = hashlib.sha256(), _staging(target)
        try:
            with staged.open("wb") as file:
                for chunk in stream.chunks(response):
                    sha.update(chunk)
                    file.write(chunk)
                    advance(len(chunk))
        except BaseException:  # Ctrl-C or a dropped connection: leave no half-written file
            staged.unlink(missing_ok=True)
            raise
    if sha.hexdigest() != entry["sha256"]:
        staged.unlink()
        fail(f"{entry['path']}: sha256 {sha.hexdigest()} is not the manifest's", TROUBLE)
    _replace(target, staged)


def _inside(out: Path, name: str) -> Path:
    """`out/name`, refusing a name that would leave `out` (a manifest is never trusted blind)."""
    path = (out / name).resolve()
    if out.resolve() not in path.parents:
        fail(f"artifact path '{name}' is outside {out}", TROUBLE)
    return path


def _staging(path: Path) -> Path:
    # The agent and OpenSM read these files: never let them see a half-written one.
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.tmp")
    staged.touch(mode=0o600)
    staged.chmod(0o600 if path.name in SECRET_FILES else 0o644 & ~_umask())
    return staged


def _staged(path: Path, content: bytes) -> Path:
    staged = _staging(path)
    staged.write_bytes(content)
    return staged


def _replace(path: Path, staged: Path) -> None:
    staged.replace(path)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
