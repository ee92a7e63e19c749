"""Evidence pages: isolation proofs listed and read, and verified in the browser.

- /ui/evidence: the stored proofs, filtered by tenant and fabric, paged: the same handler as
  GET /v1/proofs (api/routes/proofs.py), so a tenant principal lists only its tenant's tenant
  views, exactly as over the API.
- /ui/evidence/proofs/{proof_id}: one proof's claims in readable form (proof_claims.py) and a
  "Verify in the browser" button (static/evidence.js): the DSSE signature with the published
  keys (GET /v1/keys' use case), then each subject artifact's SHA-256.
- /ui/evidence/verify: the same check on an envelope an auditor pastes in.
- /ui/evidence/fabrics/{fabric}/snapshots/{digest}/artifacts/{path}: a file of a snapshot, for
  that check; whoever may read it over GET /v1/fabrics/{fabric}/snapshots/{digest}/artifacts/
  {path} (the API's rule, decided here again: an auditor never gets opensm.conf).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from api.access_rules import decide, object_for
from api.deps import ListParams
from api.routes import proofs as proof_routes
from api.ui.deps import ConsolePrincipal, ConsoleUow, console_router
from api.ui.pages.proof_claims import keys_for_browser, readable_claims, signer_rows, statement_of
from api.ui.render import SECURITY_HEADERS, render
from policies.authz import GLOBAL_DOMAIN, Decision
from policies.errors import ForbiddenError
from tenancy.schemas import SNAPSHOT_DIGEST_PATTERN
from tenancy.store.pagination import DEFAULT_LIMIT
from tenancy.store.uow import Principal
from tenancy.usecases import signing_keys, snapshot_history

router = console_router()

ARTIFACT_ROUTE = "/v1/fabrics/{fabric}/snapshots/{digest}/artifacts/{path:path}"
NO_ARTIFACTS = (
    "not checked: your role does not read the fabric's files (nor does it over the API); "
    "check them with `isofabric proof verify --artifacts` on the files your operator gives you"
)
Filter = Annotated[str | None, Query(max_length=63)]
Cursor = Annotated[str | None, Query(max_length=512)]
Digest = Annotated[str, Path(pattern=SNAPSHOT_DIGEST_PATTERN)]


@router.get("/evidence")
async def evidence_page(
    request: Request,
    uow: ConsoleUow,
    principal: ConsolePrincipal,
    tenant: Filter = None,
    fabric: Filter = None,
    cursor: Cursor = None,
) -> Response:
    """The proofs the principal may read (as GET /v1/proofs), filtered, a page at a time."""
    listing = ListParams(DEFAULT_LIMIT, cursor or None)
    tenant, fabric = tenant or None, fabric or None
    page = await run_in_threadpool(
        proof_routes.list_proofs, uow, listing, principal, tenant, fabric, None
    )
    rows = [
        {
            "id": proof.id,
            "tenant": proof.tenant,
            "fabric": proof.fabric,
            "view": proof.view,
            "created_at": proof.created_at,
            "keyids": [s.keyid for s in proof.envelope.signatures],
        }
        for proof in page.data
    ]
    context = {
        "active": "evidence",
        "proofs": rows,
        "count": page.count,
        "next": page.next,
        "tenant": tenant or "",
        "fabric": fabric or "",
        "tenant_fixed": principal.tenant,
    }
    return render(request, "evidence.html", context)


@router.get("/evidence/proofs/{proof_id}")
async def proof_page(
    request: Request, proof_id: str, uow: ConsoleUow, principal: ConsolePrincipal
) -> Response:
    """One proof: its claims, its signer, and the in-browser check (404 as GET /v1/proofs/{id})."""
    proof = await run_in_threadpool(proof_routes.get_proof, proof_id, uow, principal)
    keys = (await run_in_threadpool(signing_keys.list_keys, uow)).keys
    statement = statement_of(proof.envelope)
    context = {
        "active": "evidence",
        "proof": proof,
        "claims": None if statement is None else readable_claims(statement),
        "signers": signer_rows(proof.envelope, keys),
        "data": {
            "envelope": proof.envelope.model_dump(mode="json", by_alias=True),
            **browser_check(principal, keys),
        },
    }
    return render(request, "proof.html", context)


@router.get("/evidence/verify")
async def verify_page(request: Request, uow: ConsoleUow, principal: ConsolePrincipal) -> Response:
    """Verify an envelope pasted in (one an auditor holds) against the published keys."""
    keys = (await run_in_threadpool(signing_keys.list_keys, uow)).keys
    context = {
        "active": "evidence",
        "keys": keys,
        "data": {"envelope": None, **browser_check(principal, keys)},
    }
    return render(request, "verify_proof.html", context)


@router.get("/evidence/fabrics/{fabric}/snapshots/{digest}/artifacts/{path:path}")
async def snapshot_artifact(
    fabric: str, digest: Digest, path: str, uow: ConsoleUow, principal: ConsolePrincipal
) -> Response:
    """A file of a snapshot, byte for byte (the proof's subjects are hashed in the browser).

    Raises:
        ForbiddenError: the principal may not read this file over the API either.
        NotFoundError, NotRetainedError: as GET /v1/fabrics/{fabric}/snapshots/{digest}/...
    """
    if not may_read_artifact(principal, path):
        raise ForbiddenError(f"role '{principal.role}' may not read the file '{path}'")
    artifact = await run_in_threadpool(
        snapshot_history.snapshot_artifact, uow, fabric_name=fabric, digest=digest, path=path
    )
    headers = {**SECURITY_HEADERS, "ETag": f'"{artifact.sha256}"'}
    return Response(artifact.content, media_type="text/plain; charset=utf-8", headers=headers)


def may_read_artifact(principal: Principal, path: str) -> bool:
    """Whether the API's policy lets `principal` read the snapshot file `path`."""
    decision = decide(
        f"principal:{principal.name}", principal.role, principal.tenant, GLOBAL_DOMAIN,
        object_for(ARTIFACT_ROUTE, {"path": path}), "GET",
    )  # fmt: skip
    return decision is Decision.ALLOW


def browser_check(principal: Principal, keys: list[Any]) -> dict[str, Any]:
    """What static/evidence.js is given: the published keys, whether it may fetch artifacts."""
    artifacts = may_read_artifact(principal, "opensm/partitions.conf")
    return {
        "keys": keys_for_browser(keys),
        "artifacts": artifacts,
        "artifacts_reason": "" if artifacts else NO_ARTIFACTS,
    }
