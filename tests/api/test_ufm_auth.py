"""Who may call the UFM-compatible API, in which of UFM's styles, and the route x role table.

Every route of api/ufm/routes.py `ROUTES`, with and without its trailing slash, under every base
path (/ufmRest with HTTP Basic, /ufmRestV3 with ``Authorization: Basic <token>``, /ufmRestV2 after
``POST /dologin``, each also under /fabrics/ib-east), for each role: an orchestrator bound to a
tenant, a fabric-wide orchestrator and an operator act (exactly 200 with JSON, but where the
table says otherwise); tenant roles, auditors, billing and agents are 403; no or bad credentials
401 with ``WWW-Authenticate: Basic``; /ufmRestKrb 501. Then /v1 for orchestrators (their scope's
partitions, read on their own fabric, and nothing else), the /dologin session (its cookie, what it
does not authorize, its end with its token), child tokens of ``POST /app/tokens``, and who may
mint an orchestrator token. The requests are built so that every write is a no-op after its first
call (the table does not depend on its order), on one service built once for the module.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.app import create_app
from api.ufm.auth import SESSION_COOKIE
from api.ufm.routes import ROUTES
from api.ui.session import SESSION_COOKIE as CONSOLE_COOKIE
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tests.api.test_authz_matrix import MATRIX, send, url_for
from tests.api.ufm_support import (
    ACME_KEY,
    ON_FABRIC,
    PORTS,
    STYLES,
    Style,
    access_token,
    basic,
    mint,
    session,
    session_cookie,
    sign_in,
    ufm_error,
    ufm_ok,
)
from tests.builders import (
    FABRIC,
    LOCAL_URL,
    PKEY_RANGE,
    TEXT_PLAIN,
    Dump,
    FakeClock,
    Onboarded,
    created,
    dump_database,
    generated_topology,
    ok,
)
from tests.conftest import LOOPBACK_CLIENT
from tests.keys import key_settings
from tests.ui.test_console_session import sign_in as console_sign_in

WEST = "ib-west"
JOBS = "0x200"  # acme's additional partition, its members gpu0001's two ports
GPU1, GPU2 = PORTS["gpu0001"], PORTS["gpu0002"]
ACTING = ("bound", "wide", "operator")
# Each acting role's own keys: one `pkeys/add` asks for (free in the pool) and one it deletes
# (an acme partition made at setup), so that no role's call changes another's answer.
FREE_KEY = {"bound": "0x210", "wide": "0x211", "operator": "0x212"}
DOOMED_KEY = {"bound": "0x220", "wide": "0x221", "operator": "0x222"}
REFUSED = ("tenant-admin", "tenant-viewer", "auditor", "billing", "agent")


def call(role: str, method: str, path: str) -> tuple[str, str, Any]:
    """(path with its parameters, query, JSON body) of the request `role` sends on a route."""
    jobs = {"pkey": JOBS}
    target, query, body = {
        "/app/ufm_version": (path, "", None),
        "/app/smconf": (path, "", None),
        "/app/tokens": (path, "", None),
        "/resources/ports": (path, "?sys_type=Computer", None),
        "/resources/pkeys": (path, "?guids_data=true", jobs | {"guids": list(GPU1)}),
        "/resources/pkeys/last_updated": (path, "", None),
        "/resources/pkeys/add": (path, "", {"pkey": FREE_KEY[role]}),
        "/resources/pkeys/qos_conf": (path, "", jobs | {"mtu_limit": 4, "service_level": 3}),
        "/resources/pkeys/hosts": (path, "", jobs | {"hosts_names": ["gpu0001"]}),
        "/actions/remove_guids_from_pkey": (path, "", jobs | {"guids": [GPU2[0]]}),
        "/resources/pkeys/{pkey}/guids/{guids}": (
            f"/resources/pkeys/{JOBS}/guids/{','.join(GPU2)}",
            "",
            None,
        ),
        "/resources/pkeys/{pkey}/hosts/{hosts}": (
            f"/resources/pkeys/{JOBS}/hosts/gpu0002",
            "",
            None,
        ),
        "/resources/pkeys/{pkey}": (
            f"/resources/pkeys/{DOOMED_KEY[role] if method == 'DELETE' else JOBS}",
            "?guids_data=true",
            None,
        ),
    }[path]
    return (target, query, None) if method == "GET" else (target, "", body)


# The route x role table: the status of `call`'s request. A fabric-wide caller (a fabric-wide
# orchestrator, an operator) cannot create a P_Key: it does not say for which tenant.
#                                                      bound  wide  operator
TABLE: dict[tuple[str, str], tuple[int, int, int]] = {
    ("GET", "/app/ufm_version"): (200, 200, 200),
    ("GET", "/app/smconf"): (200, 200, 200),
    ("POST", "/app/tokens"): (200, 200, 200),
    ("GET", "/resources/ports"): (200, 200, 200),
    ("GET", "/resources/pkeys"): (200, 200, 200),
    ("GET", "/resources/pkeys/last_updated"): (200, 200, 200),
    ("POST", "/resources/pkeys"): (200, 200, 200),
    ("PUT", "/resources/pkeys"): (200, 200, 200),
    ("POST", "/resources/pkeys/add"): (200, 400, 400),
    ("PUT", "/resources/pkeys/qos_conf"): (200, 200, 200),
    ("POST", "/resources/pkeys/hosts"): (200, 200, 200),
    ("POST", "/actions/remove_guids_from_pkey"): (200, 200, 200),
    ("DELETE", "/resources/pkeys/{pkey}/guids/{guids}"): (200, 200, 200),
    ("DELETE", "/resources/pkeys/{pkey}/hosts/{hosts}"): (200, 200, 200),
    ("GET", "/resources/pkeys/{pkey}"): (200, 200, 200),
    ("DELETE", "/resources/pkeys/{pkey}"): (200, 200, 200),
}


@dataclass
class World:
    """One service for the module: ib-east onboarded, ib-west with acme's west01, tokens."""

    client: TestClient
    engine: Engine
    settings: Settings
    clock: FakeClock
    onboarded: Onboarded
    secrets: dict[str, str]
    ids: dict[str, str]
    victims: dict[str, str]


@pytest.fixture(scope="module")
def world(sqlite_seeds, tmp_path_factory) -> Iterator[World]:
    engine = make_engine("sqlite://")
    sqlite_seeds.restore("onboarded", engine)
    keys = tmp_path_factory.mktemp("ufm-auth-keys")
    settings = key_settings(Settings(database_url="sqlite://", ufm_fabric=FABRIC), copy_to=keys)
    clock = FakeClock()
    app = create_app(settings, engine=engine, clock=clock)
    with TestClient(app, client=LOOPBACK_CLIENT, base_url=LOCAL_URL) as client:
        prepare(client)  # in open mode, before the first token
        secrets, ids = {}, {}
        for role, spec in {
            "bound": ("orchestrator", "acme", FABRIC, None),
            "wide": ("orchestrator", None, FABRIC, None),
            "west": ("orchestrator", None, WEST, None),
            "west-acme": ("orchestrator", "acme", WEST, None),
            "operator": ("operator", None, None, None),
            "tenant-admin": ("tenant-admin", "acme", None, None),
            "tenant-viewer": ("tenant-viewer", "acme", None, None),
            "auditor": ("auditor", None, None, None),
            "billing": ("billing", None, None, None),
            "agent": ("agent", None, FABRIC, "sm-a"),
        }.items():
            made = mint(client, spec[0], spec[1], spec[2], spec[3], name=f"m-{role}")
            secrets[role], ids[role] = made.token, made.id
        victims = {
            t: mint(client, "tenant-viewer", t, name="victim").id for t in ("acme", "globex")
        }
        onboarded = sqlite_seeds.results["onboarded"]
        yield World(client, engine, settings, clock, onboarded, secrets, ids, victims)
    engine.dispose()


def prepare(client: TestClient) -> None:
    """ib-west (acme holds its one host), sm-a, acme's partitions 0x200 (jobs) and 0x22x."""
    body = {"name": WEST, "kind": "infiniband", "pkey_range": PKEY_RANGE}
    created(client.post("/v1/fabrics", json=body))
    topology = generated_topology(["west01"])
    ok(client.put(f"/v1/fabrics/{WEST}/topology", content=topology, headers=TEXT_PLAIN))
    created(client.post("/v1/tenants/acme/allocations", json={"fabric": WEST, "nodes": ["west01"]}))
    created(client.put(f"/v1/fabrics/{FABRIC}/targets/sm-a", json={"kind": "opensm"}))
    members = [{"guid": f"0x{g}", "membership": "full"} for g in GPU1]
    for name, pkey in [("jobs", JOBS), *((f"doomed-{k[-1]}", k) for k in DOOMED_KEY.values())]:
        partition = {"fabric": FABRIC, "name": name, "pkey": pkey}
        created(client.post("/v1/tenants/acme/partitions", json=partition))
    path = f"/v1/tenants/acme/partitions/jobs/members?fabric={FABRIC}"
    ok(client.put(path, json={"members": members}))


@pytest.fixture
def db_dump_world(world: World) -> Callable[[], Dump]:
    return lambda: dump_database(world.engine)


def headers_for(world: World, style: Style, role: str) -> dict[str, str]:
    response_headers = style.headers(world.client, world.secrets[role])
    world.client.cookies.clear()  # the jar would send the cookie too: the test sends it itself
    return response_headers


def test_the_table_has_every_route():
    assert set(TABLE) == {(method, path) for method, path, _ in ROUTES}


@pytest.mark.parametrize("style", STYLES, ids=lambda s: s.name)
@pytest.mark.parametrize("role", ACTING)
def test_every_route_answers_each_acting_role_as_the_table_says(world, style, role):
    client = world.client
    headers = headers_for(world, style, role)
    seen = {}
    for method, template, _handler in ROUTES:
        path, query, body = call(role, method, template)
        for slash in ("", "/"):
            response = client.request(
                method, f"{style.base}{path}{slash}{query}", headers=headers, json=body
            )
            seen[(method, template, slash)] = response.status_code
            if response.status_code == 200:
                ufm_ok(response)  # exactly 200, with a JSON body
            else:
                ufm_error(response, response.status_code)

    expected = {
        (method, template, slash): TABLE[(method, template)][ACTING.index(role)]
        for method, template, _ in ROUTES
        for slash in ("", "/")
    }
    assert seen == expected


@pytest.mark.parametrize("role", REFUSED)
def test_other_roles_are_refused_403_on_every_route_and_at_sign_in(world, role):
    client, secret = world.client, world.secrets[role]
    for style in STYLES:
        if "ufmRestV2" in style.base:
            prefix = style.base.removesuffix("/ufmRestV2")
            assert ufm_error(sign_in(client, secret, prefix), 403)["reason"] == "forbidden"
            continue
        headers = style.headers(client, secret)
        for method, template, _ in ROUTES:
            path, query, body = call("bound", method, template)
            response = client.request(
                method, f"{style.base}{path}{query}", headers=headers, json=body
            )
            assert role in ufm_error(response, 403)["error"], (style.name, method, path)


def unauthenticated(world: World) -> list[tuple[str, dict[str, str]]]:
    """(base, headers) of requests with no credentials or bad ones, in every style."""
    secret, wrong = world.secrets["bound"], "isf_" + "x" * 43
    cases = []
    for style in STYLES:
        if "ufmRestV2" in style.base:
            cases += [(style.base, {}), (style.base, session("isfs_" + "x" * 43))]
            cases += [(style.base, basic(secret)), (style.base, access_token(secret))]
            continue
        cases += [(style.base, {}), (style.base, {"Authorization": f"Bearer {secret}"})]
        cases += [(style.base, basic(wrong)), (style.base, access_token(wrong))]
        if style.base.endswith("ufmRest"):
            cases += [
                (style.base, access_token(secret)),
                (style.base, {"Authorization": "Basic %%"}),
            ]
            cases += [(style.base, {"Authorization": "Basic dXNlcg=="})]  # "user", no password
        else:
            cases += [(style.base, basic(secret))]  # /ufmRestV3 takes the token itself
    return cases


def test_no_or_bad_credentials_are_401_with_www_authenticate_basic(world, db_dump_world):
    client = world.client
    before = db_dump_world()
    for base, headers in unauthenticated(world):
        for method, template, _ in ROUTES:
            path, query, body = call("bound", method, template)
            response = client.request(method, f"{base}{path}{query}", headers=headers, json=body)
            where = (base, headers, method, path)
            assert ufm_error(response, 401)["reason"] == "unauthenticated", where
            assert response.headers["WWW-Authenticate"].startswith("Basic"), where
    for prefix in ("", ON_FABRIC):
        for form in ({}, {"httpd_password": "isf_" + "x" * 43}, {"httpd_username": "u"}):
            refused = client.post(f"{prefix}/dologin", data=form)
            assert ufm_error(refused, 401)["reason"] == "unauthenticated"
            assert refused.headers["WWW-Authenticate"].startswith("Basic")
            assert SESSION_COOKIE not in refused.headers.get("set-cookie", "")
    assert db_dump_world() == before


def test_kerberos_is_501_and_unknown_paths_are_a_ufm_shaped_404(world):
    client, bound = world.client, world.secrets["bound"]
    for base in ("/ufmRestKrb", f"{ON_FABRIC}/ufmRestKrb"):
        for method, template, _ in ROUTES:
            path, query, body = call("bound", method, template)
            for headers in ({}, basic(bound)):
                response = client.request(
                    method, f"{base}{path}{query}", headers=headers, json=body
                )
                assert ufm_error(response, 501)["reason"] == "not-implemented"
    for style in STYLES:
        for method, path in [
            ("GET", "/app/nothing"),
            ("GET", "/resources/systems?type=Computer"),
            ("POST", "/resources/pkeys/0x200/members"),
            ("PATCH", "/resources/pkeys"),
            ("GET", "/resources/pkeys/0x200/guids/x"),
        ]:
            response = client.request(method, f"{style.base}{path}")
            assert ufm_error(response, 404)["reason"] == "not-found", (style.name, path)


def test_a_fabric_in_the_path_must_be_the_orchestrators_own(world):
    client = world.client
    east, west = basic(world.secrets["wide"]), basic(world.secrets["west"])
    operator = basic(world.secrets["operator"])

    hidden = ufm_error(client.get(f"/fabrics/{WEST}/ufmRest/resources/pkeys", headers=east), 404)
    missing = ufm_error(client.get("/fabrics/nope/ufmRest/resources/pkeys", headers=east), 404)
    assert hidden["error"].replace(WEST, "F") == missing["error"].replace("nope", "F")
    ufm_error(
        client.get(
            f"{ON_FABRIC}/ufmRestV3/resources/pkeys", headers=access_token(world.secrets["west"])
        ),
        404,
    )
    ufm_error(client.get(f"{ON_FABRIC}/ufmRest/app/ufm_version", headers=west), 404)
    ufm_error(client.get("/fabrics/nope/ufmRest/resources/pkeys", headers=operator), 404)

    # without a fabric in the path: the token's own (its fabric's acme partition is 0x100,
    # beside the management partition every list holds)
    assert set(ufm_ok(client.get("/ufmRest/resources/pkeys", headers=west))) == {"0x100", "0x7fff"}
    assert set(
        ufm_ok(client.get(f"/fabrics/{WEST}/ufmRest/resources/pkeys", headers=operator))
    ) == {"0x100", "0x7fff"}
    assert ACME_KEY in ufm_ok(client.get("/ufmRest/resources/pkeys", headers=operator))


def test_an_operator_token_needs_a_fabric_in_the_path_or_the_ufm_fabric_setting(world):
    settings = dataclasses.replace(world.settings, ufm_fabric=None)
    app = create_app(settings, engine=world.engine, clock=world.clock)
    operator = basic(world.secrets["operator"])
    with TestClient(app, client=LOOPBACK_CLIENT, base_url=LOCAL_URL) as client:
        refused = ufm_error(client.get("/ufmRest/resources/pkeys", headers=operator), 400)
        assert refused["reason"] == "no-fabric" and "ISOFABRIC_UFM_FABRIC" in refused["error"]
        assert ACME_KEY in ufm_ok(
            client.get(f"{ON_FABRIC}/ufmRest/resources/pkeys", headers=operator)
        )
        assert ACME_KEY in ufm_ok(
            client.get("/ufmRest/resources/pkeys", headers=basic(world.secrets["wide"]))
        )


def test_smconf_gives_the_keys_to_the_operator_alone(world):
    client = world.client
    shown = {
        role: ufm_ok(client.get("/ufmRest/app/smconf", headers=basic(world.secrets[role])))
        for role in ACTING
    }

    assert shown["bound"] == shown["wide"]
    # present but empty: NICo's SmConfig requires the fields, only an operator gets values
    keys = ("m_key", "sm_key", "sa_key")
    assert {k: shown["bound"][k] for k in keys} == dict.fromkeys(keys, "")
    assert "m_key_lease_period" not in shown["bound"]
    assert shown["bound"]["m_key_enabled"] is True and shown["bound"]["m_key_per_port"] is False
    for key in keys:
        assert re.fullmatch(r"0x[0-9a-f]{16}", shown["operator"][key]), key
    assert {k: v for k, v in shown["operator"].items() if k not in keys} == {
        k: v for k, v in shown["bound"].items() if k not in keys
    } | {"m_key_lease_period": shown["operator"]["m_key_lease_period"]}


def test_a_tenant_bound_orchestrator_sees_its_tenants_keys_and_a_fabric_wide_one_every_tenants(
    world,
):
    client = world.client
    bound = ufm_ok(client.get("/ufmRest/resources/pkeys", headers=basic(world.secrets["bound"])))
    wide = ufm_ok(client.get("/ufmRest/resources/pkeys", headers=basic(world.secrets["wide"])))

    assert {"0x100", ACME_KEY, JOBS} <= set(bound) and not {"0x102", "0x103"} & set(bound)
    assert set(bound) | {"0x102", "0x103"} <= set(wide)


# --- /v1 -----------------------------------------------------------------------------------------


PARTITION_READS = {
    ("GET", "/v1/tenants/{tenant}/partitions"),
    ("GET", "/v1/tenants/{tenant}/partitions/{name}"),
}


def v1_expected(role: str, method: str, path: str, tenant: str | None) -> str:
    """'A' allowed, 'F' 403, 'N' 404 (another tenant, hidden) for an orchestrator on /v1."""
    names_tenant = "{tenant}" in path or (method, path) == ("POST", "/v1/tokens")  # its body
    if role == "bound" and names_tenant and tenant != "acme":
        return "N"
    return "A" if (method, path) in PARTITION_READS else "F"


@pytest.mark.parametrize("role", ["bound", "wide"])
def test_on_v1_an_orchestrator_reads_its_scopes_partitions_and_nothing_else(world, role):
    client, secret = world.client, world.secrets[role]
    seen, expected = {}, {}
    for (method, path), (_own, other) in MATRIX.items():
        for tenant in ("acme", "globex") if other is not None else (None,):
            url = url_for(path, tenant, world.onboarded, world.victims)
            response = send(client, method, path, tenant, secret, url)
            status = response.status_code
            seen[(method, path, tenant)] = {200: "A", 403: "F", 404: "N"}.get(status, str(status))
            expected[(method, path, tenant)] = v1_expected(role, method, path, tenant)

    assert seen == expected


@pytest.mark.parametrize("role", ["bound", "wide"])
def test_on_v1_an_orchestrator_reads_partitions_of_its_own_fabric_only(world, role):
    client, headers = world.client, {"Authorization": f"Bearer {world.secrets[role]}"}
    operator = {"Authorization": f"Bearer {world.secrets['operator']}"}

    everywhere = ok(client.get("/v1/tenants/acme/partitions", headers=operator))["data"]
    own = ok(client.get("/v1/tenants/acme/partitions", headers=headers))["data"]

    assert {p["fabric"] for p in everywhere} == {FABRIC, WEST}
    assert own == [p for p in everywhere if p["fabric"] == FABRIC]
    for query in (f"?fabric={WEST}", "?fabric=nope"):
        for path in ("/v1/tenants/acme/partitions", "/v1/tenants/acme/partitions/default"):
            refused = client.get(f"{path}{query}", headers=headers)
            assert refused.status_code == 404 and "does not exist" in refused.json()["detail"]
    one = ok(client.get("/v1/tenants/acme/partitions/default", headers=headers))
    assert (one["fabric"], one["pkey"]) == (FABRIC, "0x0101")
    west = {"Authorization": f"Bearer {world.secrets['west-acme']}"}
    assert [
        p["fabric"] for p in ok(client.get("/v1/tenants/acme/partitions", headers=west))["data"]
    ] == [WEST]


def test_only_an_operator_mints_an_orchestrator_token(world):
    client = world.client
    body = {"name": "k8s", "role": "orchestrator", "tenant": "acme", "fabric": FABRIC}
    for role in ("tenant-admin", "bound", "wide", "auditor"):
        headers = {"Authorization": f"Bearer {world.secrets[role]}"}
        assert client.post("/v1/tokens", json=body, headers=headers).status_code == 403, role

    operator = {"Authorization": f"Bearer {world.secrets['operator']}"}
    made = created(client.post("/v1/tokens", json=body, headers=operator))
    assert (made["role"], made["tenant"], made["fabric"], made["target"]) == (
        "orchestrator",
        "acme",
        FABRIC,
        None,
    )
    wide = created(client.post("/v1/tokens", json=body | {"tenant": None}, headers=operator))
    assert wide["tenant"] is None
    for bad in ({"fabric": None}, {"target": "sm-a"}):
        assert client.post("/v1/tokens", json=body | bad, headers=operator).status_code == 422
    assert (
        client.post("/v1/tokens", json=body | {"fabric": "nope"}, headers=operator).status_code
        == 404
    )


def test_an_orchestrator_token_cannot_sign_in_to_the_console(world):
    app = world.client.app
    with TestClient(app, base_url=LOCAL_URL, follow_redirects=False) as browser:
        refused = console_sign_in(browser, world.secrets["bound"])
        assert refused.status_code == 403 and "acts for a machine" in refused.text
        assert CONSOLE_COOKIE not in refused.headers.get("set-cookie", "")
        browser.cookies.set(CONSOLE_COOKIE, world.secrets["wide"], path="/ui")
        assert browser.get("/ui").status_code == 303  # a hand-set cookie signs nobody in


# --- sessions and child tokens -------------------------------------------------------------------


def test_dologin_sets_a_strict_http_only_cookie_scoped_to_the_v2_base_path(world):
    client, secret = world.client, world.secrets["bound"]
    for prefix in ("", ON_FABRIC):
        answer = sign_in(client, secret, prefix)
        client.cookies.clear()
        assert ufm_ok(answer) == {}
        cookie = answer.headers["set-cookie"]
        attributes = {a.strip().lower() for a in cookie.split(";")[1:]}
        assert {"httponly", f"path={prefix.lower()}/ufmrestv2", "samesite=strict"} <= attributes
        assert "secure" not in attributes  # plain http
    with TestClient(world.client.app, base_url="https://127.0.0.1") as tls:
        cookie = sign_in(tls, secret).headers["set-cookie"]
        assert "secure" in {a.strip().lower() for a in cookie.split(";")[1:]}


def test_a_session_authorizes_nothing_but_the_v2_routes(world):
    client = world.client
    cookie = session_cookie(sign_in(client, world.secrets["wide"]))
    client.cookies.clear()
    headers = session(cookie)

    assert ufm_ok(client.get("/ufmRestV2/resources/pkeys", headers=headers))
    assert ufm_ok(client.get(f"{ON_FABRIC}/ufmRestV2/resources/pkeys", headers=headers))
    for base in ("/ufmRest", "/ufmRestV3", f"{ON_FABRIC}/ufmRest"):
        ufm_error(client.get(f"{base}/resources/pkeys", headers=headers), 401)
    assert client.get("/v1/tenants/acme/partitions", headers=headers).status_code == 401
    console = {"Cookie": f"{CONSOLE_COOKIE}={cookie}; {SESSION_COOKIE}={cookie}"}
    page = client.get("/ui/tenants/acme", headers=console, follow_redirects=False)
    assert page.status_code == 303 and "/ui/sign-in" in page.headers["location"]


def test_a_session_is_valid_on_every_replica_and_ends_with_its_token_or_its_lifetime(world):
    client, operator = world.client, {"Authorization": f"Bearer {world.secrets['operator']}"}
    made = mint(client, "orchestrator", "acme", FABRIC, name="short-lived")
    headers = session(session_cookie(sign_in(client, made.token)))
    client.cookies.clear()
    replica = create_app(world.settings, engine=world.engine, clock=world.clock)
    with TestClient(replica, client=LOOPBACK_CLIENT, base_url=LOCAL_URL) as other:
        assert ufm_ok(other.get("/ufmRestV2/app/ufm_version", headers=headers))

    later = mint(client, "orchestrator", "acme", FABRIC, name="expiring")
    expiring = session(session_cookie(sign_in(client, later.token)))
    client.cookies.clear()
    world.clock.advance(12 * 3600 + 1)
    try:
        ufm_error(client.get("/ufmRestV2/app/ufm_version", headers=expiring), 401)
    finally:
        world.clock.advance(-(12 * 3600 + 1))
    assert ufm_ok(client.get("/ufmRestV2/app/ufm_version", headers=expiring))

    assert client.delete(f"/v1/tokens/{made.id}", headers=operator).status_code == 204
    ufm_error(client.get("/ufmRestV2/app/ufm_version", headers=headers), 401)


def test_app_tokens_mints_a_child_of_the_same_scope_revoked_with_its_parent(world):
    client, operator = world.client, {"Authorization": f"Bearer {world.secrets['operator']}"}
    parent = mint(client, "orchestrator", "acme", FABRIC, name="parent")
    child = ufm_ok(client.post("/ufmRest/app/tokens", headers=basic(parent.token)))
    grandchild = ufm_ok(
        client.post("/ufmRestV3/app/tokens", headers=access_token(child["access_token"]))
    )

    assert child["role"] == grandchild["role"] == "orchestrator"
    listed = {t["id"]: t for t in ok(client.get("/v1/tokens?limit=1000", headers=operator))["data"]}
    assert (listed[child["id"]]["parent"], listed[child["id"]]["tenant"]) == (parent.id, "acme")
    assert listed[grandchild["id"]]["parent"] == child["id"]
    assert listed[child["id"]]["fabric"] == FABRIC
    by_parent = ufm_ok(client.get("/ufmRest/resources/pkeys", headers=basic(parent.token)))
    by_child = ufm_ok(
        client.get("/ufmRestV3/resources/pkeys", headers=access_token(child["access_token"]))
    )
    assert by_child == by_parent

    assert client.delete(f"/v1/tokens/{parent.id}", headers=operator).status_code == 204
    for secret in (child["access_token"], grandchild["access_token"]):
        ufm_error(client.get("/ufmRestV3/app/ufm_version", headers=access_token(secret)), 401)
    operators_child = ufm_ok(
        client.post("/ufmRest/app/tokens", headers=basic(world.secrets["operator"]))
    )
    assert operators_child["role"] == "operator"
