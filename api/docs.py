"""Interactive API docs that work on an isolated network: Swagger UI served from this package.

FastAPI's default /docs loads Swagger UI from cdn.jsdelivr.net and its favicon from
fastapi.tiangolo.com, so on a management network without internet access (where fabric
controllers live) the page stays blank. Here the page refers only to this
server: /openapi.json, the assets under /docs/assets (package data, api/static/swagger-ui/) and
the OAuth2 redirect page. ReDoc is not served: one UI is enough, and its standalone bundle would
add 2.3 MB of package data.

Why npm's swagger-ui-dist rather than PyPI's swagger-ui-bundle: swagger-ui-bundle 1.1.0 (the
latest) carries Swagger UI 4.15.5 of 2022, which does not render OpenAPI 3.1 (what FastAPI
emits), and it needs Jinja2; swagger-ui-dist is published by the Swagger UI maintainers with
every release (5.35.0, November 2026). Both are Apache-2.0. The copied files and their checksums
are listed in api/static/swagger-ui/SOURCE.txt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from api import problem_pages
from api.mounting import serve_routes
from api.openapi_responses import document_responses
from api.problem_pages import NO_FRAMING

ASSETS_DIR = Path(__file__).parent / "static" / "swagger-ui"
DOCS_URL = "/docs"
ASSETS_URL = "/docs/assets"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"
# Swagger UI asks validator.swagger.io for a badge unless validatorUrl is null
# (swagger-ui docs/usage/configuration.md, "validatorUrl"): never call out.
SWAGGER_UI_PARAMETERS: dict[str, Any] = {"validatorUrl": None}

OVERVIEW = """\
isofabric is the system of record and policy engine for sharing an AI compute fabric between
tenants. It proves that tenants are isolated **before** any change is committed (a change that
would break isolation is refused with `409 isolation-violation` and its counterexamples, and
nothing is written) and renders the files the fabric software consumes. Every verdict, artifact
and proof carries the digest of the snapshot it was computed from.

**InfiniBand.** A fabric is imported as `ibnetdiscover` prints it. Each tenant and shared
service gets a partition (an explicit P_Key from the fabric's range); a tenant's ports are full
members of its partition, granted services make them limited members of the service's. The
service renders OpenSM's `partitions.conf`, its QoS policy (service levels per QoS class) and
an `opensm.conf` snippet. A deploy agent (`isofabric agent opensm`) on each Subnet Manager host
pulls the signed manifest, installs the files, reads the P_Key tables back and reports
(`/v1/fabrics/{fabric}/targets`, `/sync`).

**RoCE (RoCEv2 over BGP EVPN-VXLAN).** A fabric is imported as a JSON or YAML inventory of
leaves, spines, links and host NICs. Each tenant gets a VRF with its L3VNI, a VLAN with its
L2VNI and a subnet; a granted service is an explicit, audited route leak. The service renders
SONiC `config_db.json` (VLANs, VXLAN tunnel maps, VRFs, QoS: DSCP maps, PFC, ECN) and FRR
`frr.conf` (BGP EVPN, route targets) per leaf.

**Authentication and roles.** Every `/v1` request carries `Authorization: Bearer <token>`
(`ISOFABRIC_ADMIN_TOKEN`, or a token from `isofabric token create` / `POST /v1/tokens`); until
the first token exists the service answers only clients on its own host. Roles: `operator`
(everything), `auditor` (reads everything but secrets), `billing` (tenants and usage),
`tenant-admin` and `tenant-viewer` (one tenant), `agent` (one fabric's deploy target). A caller
with no role in a tenant gets 404 for it, exactly like a tenant that does not exist. `/docs`,
`/openapi.json` and `/problems` need no token.

**Lists** return `{"data": [...], "count": TOTAL, "next": CURSOR_OR_NULL}`; pass `?limit=`
and `?cursor=` (the previous page's `next`) to page through them.

**Idempotency.** A `POST` under `/v1` with an `Idempotency-Key` header is done once: a retry
with the same key and request gets the first response again (`Idempotent-Replayed: true`) for
24 hours. Every response carries `X-Request-ID` (the client's, or a new one), which the audit log
records.

**Dry run.** Every mutating route except token management takes `?dry_run=true`: it answers
what the change would do (verdict, reachability delta, artifact sha256s and diffs) and writes
nothing.

**Errors** are RFC 9457 `application/problem+json` bodies whose `type` is one of these (each
link answers what it means, as HTML in a browser):

"""


DESCRIPTION = OVERVIEW + problem_pages.markdown_table()


def install_docs(app: FastAPI) -> None:
    """Serve /docs from the packaged assets, the problem type pages, and typed error responses.

    Build `app` with ``docs_url=None, redoc_url=None`` so that FastAPI adds no CDN page itself.
    """
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
    app.add_api_route(DOCS_URL, docs_page, methods=["GET", "HEAD"], include_in_schema=False)
    app.add_api_route(
        OAUTH2_REDIRECT_URL, oauth2_redirect_page, methods=["GET"], include_in_schema=False
    )
    serve_routes(app, problem_pages.router)
    document_responses(app)


async def docs_page(request: Request) -> HTMLResponse:
    """The Swagger UI page; every URL in it is on this server (under its root path, if any)."""
    root = request.scope.get("root_path", "").rstrip("/")
    page = get_swagger_ui_html(
        openapi_url=root + (request.app.openapi_url or "/openapi.json"),
        title=f"{request.app.title} - API docs",
        swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSETS_URL}/favicon-32x32.png",
        oauth2_redirect_url=root + OAUTH2_REDIRECT_URL,
        swagger_ui_parameters=SWAGGER_UI_PARAMETERS,
    )
    page.headers.update(NO_FRAMING)
    return page


async def oauth2_redirect_page() -> HTMLResponse:
    """Swagger UI's OAuth2 redirect page (FastAPI's, which has no external reference)."""
    page = get_swagger_ui_oauth2_redirect_html()
    page.headers.update(NO_FRAMING)
    return page
