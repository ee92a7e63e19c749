"""One test per row of the error-to-problem table (api/problems.py, PROBLEM_TYPES).

Each domain error class is raised by a tiny route added to the real app (same middleware, same
handlers), and the whole problem+json body is compared with literal expectations: the slugs,
statuses and titles are part of the API contract, so they are spelled out here rather than read
back from the table. The cases are looked up by the table's own keys, so a new row without a case
fails. Framework errors (request validation, Starlette's HTTPException) and unexpected exceptions
follow, then the artifact-hazard row through real routes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import httpx2
import pydantic
import pytest
from fastapi import FastAPI, Query
from fastapi import HTTPException as FastApiHTTPException
from fastapi.testclient import TestClient
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.problem_types import PROBLEM_TYPES
from policies.errors import (
    ArtifactHazardError,
    AuthenticationError,
    ConflictError,
    DatabaseUnavailableError,
    DisruptiveChangeError,
    ForbiddenError,
    IdempotencyInProgressError,
    IdempotencyKeyReusedError,
    InputFormatError,
    InvalidValueError,
    IsofabricError,
    IsolationViolationError,
    KeyUnavailableError,
    NotFoundError,
    NotReadyError,
    NotRetainedError,
    PatchRefusedError,
    PoolExhaustedError,
    PoolShareExceededError,
    PortMovedError,
    SecretNotReplayedError,
    TooManyRequestsError,
    UnsupportedMediaTypeError,
)
from tests.builders import FABRIC, PROBLEM_JSON, dump_database

COUNTEREXAMPLE = {
    "rule": "cross-tenant-full-membership",
    "message": "gpu0001 (acme) and gpu0005 (globex) are both full members of 0x0101",
    "partition": "0x0101",
    "a": {"node": "gpu0001", "port_guid": "0x0000000000100003", "owner": "tenant:acme"},
    "b": {"node": "gpu0005", "port_guid": "0x0000000000100013", "owner": "tenant:globex"},
}
DIGEST = "sha256:" + "ab" * 32
INTERNAL_DETAIL = "the server failed to handle the request; nothing was changed"


@dataclass(frozen=True)
class Row:
    """A domain error as a use case raises it, and the problem the client must see."""

    error: IsofabricError
    status: int
    slug: str
    title: str
    detail: str
    extensions: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


ROWS: dict[type[IsofabricError], Row] = {
    NotRetainedError: Row(
        NotRetainedError(
            "the artifacts of snapshot sha256:ab are no longer retained",
            resource="snapshot",
            digest=DIGEST,
        ),
        410,
        "not-retained",
        "No longer retained",
        "the artifacts of snapshot sha256:ab are no longer retained",
        {"resource": "snapshot", "digest": DIGEST},
    ),
    IsolationViolationError: Row(
        IsolationViolationError(
            "the change would break isolation on fabric 'ib-east'",
            snapshot_digest=DIGEST,
            counterexamples=[COUNTEREXAMPLE],
        ),
        409,
        "isolation-violation",
        "Isolation violation",
        "the change would break isolation on fabric 'ib-east'",
        {"snapshot_digest": DIGEST, "counterexamples": [COUNTEREXAMPLE]},
    ),
    PoolExhaustedError: Row(
        PoolExhaustedError(
            "no free P_Key left in 0x0100-0x0100 on fabric 'ib-east'", fabric=FABRIC
        ),
        409,
        "pool-exhausted",
        "Identifier pool exhausted",
        "no free P_Key left in 0x0100-0x0100 on fabric 'ib-east'",
        {"fabric": FABRIC},
    ),
    PoolShareExceededError: Row(
        PoolShareExceededError(
            "tenant 'labs' already holds its share of fabric 'ib-east''s P_Keys",
            tenant="labs",
            fabric=FABRIC,
            pool="pkey",
            limit=4,
        ),
        409,
        "pool-share-exceeded",
        "Share of an identifier pool exceeded",
        "tenant 'labs' already holds its share of fabric 'ib-east''s P_Keys",
        {"tenant": "labs", "fabric": FABRIC, "pool": "pkey", "limit": 4},
    ),
    PortMovedError: Row(
        PortMovedError(
            "the import moves 1 known port(s) to another place",
            moved=[{"port": "0x0000000000100003", "from": "gpu0001", "to": "gpu0005"}],
        ),
        409,
        "port-moved",
        "Port claims another host",
        "the import moves 1 known port(s) to another place",
        {"moved": [{"port": "0x0000000000100003", "from": "gpu0001", "to": "gpu0005"}]},
    ),
    IdempotencyInProgressError: Row(
        IdempotencyInProgressError("a request with Idempotency-Key 'k-1' is in progress"),
        409,
        "idempotency-in-progress",
        "A request with this key is in progress",
        "a request with Idempotency-Key 'k-1' is in progress",
    ),
    SecretNotReplayedError: Row(
        SecretNotReplayedError(
            "the first request with Idempotency-Key 'k-1' created token 'tok-1'", token_id="tok-1"
        ),
        409,
        "secret-not-replayed",
        "Secret not replayed",
        "the first request with Idempotency-Key 'k-1' created token 'tok-1'",
        {"token_id": "tok-1"},
    ),
    IdempotencyKeyReusedError: Row(
        IdempotencyKeyReusedError("Idempotency-Key 'k-1' was used for another request"),
        422,
        "idempotency-key-reused",
        "Idempotency key used for another request",
        "Idempotency-Key 'k-1' was used for another request",
    ),
    PatchRefusedError: Row(
        PatchRefusedError(
            "refused: /PORT/Ethernet0/mtu (disruptive)",
            refused=[{"op": "replace", "path": "/PORT/Ethernet0/mtu", "reason": "disruptive"}],
        ),
        409,
        "patch-refused",
        "CONFIG_DB patch refused",
        "refused: /PORT/Ethernet0/mtu (disruptive)",
        {"refused": [{"op": "replace", "path": "/PORT/Ethernet0/mtu", "reason": "disruptive"}]},
    ),
    DisruptiveChangeError: Row(
        DisruptiveChangeError(
            "the patch changes declared keys: /SCHEDULER/scheduler.bronze",
            paths=["/SCHEDULER/scheduler.bronze"],
        ),
        409,
        "disruptive-change",
        "Disruptive change",
        "the patch changes declared keys: /SCHEDULER/scheduler.bronze",
        {"paths": ["/SCHEDULER/scheduler.bronze"]},
    ),
    ConflictError: Row(
        ConflictError("node 'sm01' is a management node", node="sm01"),
        409,
        "conflict",
        "Conflict with current state",
        "node 'sm01' is a management node",
        {"node": "sm01"},
    ),
    NotFoundError: Row(
        NotFoundError("tenant 'initech' does not exist", resource="tenant", name="initech"),
        404,
        "not-found",
        "Resource not found",
        "tenant 'initech' does not exist",
        {"resource": "tenant", "name": "initech"},
    ),
    InputFormatError: Row(
        InputFormatError("expected a port record, got 'garbage'", line=20),
        422,
        "invalid-document",
        "Document does not parse",
        "line 20: expected a port record, got 'garbage'",
        {"line": 20},
    ),
    UnsupportedMediaTypeError: Row(
        UnsupportedMediaTypeError(
            "fabric 'ib-east' is infiniband: its topology is text/plain, not 'application/json'"
        ),
        415,
        "unsupported-media-type",
        "Unsupported media type",
        "fabric 'ib-east' is infiniband: its topology is text/plain, not 'application/json'",
    ),
    InvalidValueError: Row(
        InvalidValueError("cursor is not valid", parameter="cursor"),
        422,
        "validation-error",
        "Invalid value",
        "cursor is not valid",
        {"parameter": "cursor"},
    ),
    AuthenticationError: Row(
        AuthenticationError("the request was not authenticated"),
        401,
        "unauthorized",
        "Authentication required",
        "the request was not authenticated",
        headers={"www-authenticate": "Bearer"},
    ),
    ForbiddenError: Row(
        ForbiddenError("role 'auditor' may not POST /v1/tenants"),
        403,
        "forbidden",
        "Forbidden",
        "role 'auditor' may not POST /v1/tenants",
    ),
    ArtifactHazardError: Row(
        ArtifactHazardError(
            "refusing to emit partitions.conf: line 3: carriage-return: 1 line(s) end with CR"
        ),
        500,
        "artifact-hazard",
        "Artifact failed its safety check",
        "refusing to emit partitions.conf: line 3: carriage-return: 1 line(s) end with CR",
    ),
    KeyUnavailableError: Row(
        KeyUnavailableError(
            "the signing key is missing: no key file at ./isofabric-signing.key; run "
            "`isofabric keys create`",
            missing=["isofabric-signing.key"],
        ),
        503,
        "key-unavailable",
        "Key not installed",
        "the signing key is missing: no key file at ./isofabric-signing.key; run "
        "`isofabric keys create`",
        {"missing": ["isofabric-signing.key"]},
    ),
    DatabaseUnavailableError: Row(
        DatabaseUnavailableError("the database is unavailable: connection refused; retry later"),
        503,
        "database-unavailable",
        "Database unavailable",
        "the database is unavailable: connection refused; retry later",
    ),
    NotReadyError: Row(
        NotReadyError(
            "not ready: database unreachable: connection refused",
            not_ready=["database unreachable: connection refused"],
        ),
        503,
        "not-ready",
        "Not ready",
        "not ready: database unreachable: connection refused",
        {"not_ready": ["database unreachable: connection refused"]},
    ),
    TooManyRequestsError: Row(
        TooManyRequestsError(
            "'token:ci:tok_1' already has 2 heavy requests in flight (at most 2)",
            retry_after=5,
            limit=2,
        ),
        429,
        "too-many-requests",
        "Too many requests",
        "'token:ci:tok_1' already has 2 heavy requests in flight (at most 2)",
        {"limit": 2},
        headers={"retry-after": "5"},
    ),
}


Raise = Callable[..., httpx2.Response]


@pytest.fixture
def app_client(make_client):
    """A client of the real app whose server errors come back as responses, not exceptions."""
    return make_client(raise_server_exceptions=False)


@pytest.fixture
def raising(app_client: TestClient) -> Raise:
    """``raising(error, path)``: GET `path` on a route added to the app that raises `error`."""
    app = cast(FastAPI, app_client.app)

    def request(error: BaseException, path: str = "/probe/error") -> httpx2.Response:
        def endpoint() -> None:
            raise error

        app.add_api_route(path, endpoint, methods=["GET"])
        return app_client.get(path)

    return request


def problem(response: httpx2.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
    body: dict[str, Any] = response.json()
    return body


def name_of(cls: type) -> str:
    return cls.__name__


# --- the domain rows -----------------------------------------------------------------------


def test_every_row_of_the_table_has_a_case_and_every_case_a_row():
    assert set(ROWS) == set(PROBLEM_TYPES)


def test_every_problem_type_has_its_own_slug():
    slugs = [kind.slug for kind in PROBLEM_TYPES.values()]

    assert len(set(slugs)) == len(slugs)


@pytest.mark.parametrize("error_class", list(PROBLEM_TYPES), ids=name_of)
def test_a_domain_error_becomes_its_problem_with_every_member(raising, error_class):
    row = ROWS.get(error_class)
    assert row is not None, f"{error_class.__name__} is in PROBLEM_TYPES but has no case here"
    assert type(row.error) is error_class
    path = f"/probe/{row.slug}"

    response = raising(row.error, path)

    assert problem(response, row.status) == {
        "type": f"/problems/{row.slug}",
        "title": row.title,
        "status": row.status,
        "detail": row.detail,
        "instance": path,
        **row.extensions,
    }
    for header, value in row.headers.items():
        assert response.headers[header] == value
    if "www-authenticate" not in row.headers:
        assert "www-authenticate" not in response.headers


@pytest.mark.parametrize("error_class", list(PROBLEM_TYPES), ids=name_of)
def test_a_subclass_outside_the_table_becomes_its_nearest_ancestors_problem(raising, error_class):
    row = ROWS[error_class]
    subclass = type(f"Special{error_class.__name__}", (error_class,), {})

    body = problem(raising(subclass("a more specific failure")), row.status)

    assert (body["type"], body["title"], body["detail"]) == (
        f"/problems/{row.slug}",
        row.title,
        "a more specific failure",
    )


def test_a_domain_error_without_a_row_is_an_internal_error_that_leaks_nothing(raising):
    body = problem(raising(IsofabricError("secret internals", table="audit_entry")), 500)

    assert (body["type"], body["title"], body["status"]) == (
        "/problems/internal-error",
        "Internal server error",
        500,
    )
    assert "secret" not in body["detail"]
    assert "table" not in body


# --- request validation (422) -------------------------------------------------------------


class ProbeBody(pydantic.BaseModel):
    name: str = pydantic.Field(min_length=1)
    count: int


class Wide(pydantic.BaseModel):
    a: int
    b: int
    c: int
    d: int
    e: int
    f: int


@pytest.fixture
def validating(app_client) -> Iterator[Callable[..., httpx2.Response]]:
    """POST /probe/validation: a JSON body `ProbeBody` and a query parameter limit >= 1."""
    app = cast(FastAPI, app_client.app)

    def endpoint(body: ProbeBody, limit: int = Query(1, ge=1)) -> dict[str, str]:
        return {"name": body.name}

    app.add_api_route("/probe/validation", endpoint, methods=["POST"])
    yield lambda **kwargs: app_client.post("/probe/validation", **kwargs)


def test_an_invalid_request_is_a_422_problem_with_a_pointer_per_error(validating):
    response = validating(params={"limit": "0"}, json={"name": ""})

    body = problem(response, 422)
    expected_errors = [
        {"pointer": "/query/limit", "detail": "Input should be greater than or equal to 1"},
        {"pointer": "/body/name", "detail": "String should have at least 1 character"},
        {"pointer": "/body/count", "detail": "Field required"},
    ]
    assert body == {
        "type": "/problems/validation-error",
        "title": "Invalid request",
        "status": 422,
        "detail": "; ".join(f"{e['pointer']}: {e['detail']}" for e in expected_errors),
        "instance": "/probe/validation",
        "errors": expected_errors,
    }


def test_a_valid_request_to_the_validation_probe_passes(validating):
    response = validating(params={"limit": "2"}, json={"name": "acme", "count": 1})

    assert (response.status_code, response.json()) == (200, {"name": "acme"})


def test_the_422_detail_summarises_at_most_five_errors(app_client):
    app = cast(FastAPI, app_client.app)

    def endpoint(body: Wide) -> None:
        return None

    app.add_api_route("/probe/wide", endpoint, methods=["POST"])

    body = problem(app_client.post("/probe/wide", json={}), 422)

    assert [e["pointer"] for e in body["errors"]] == [f"/body/{n}" for n in "abcdef"]
    assert body["detail"].count("Field required") == 5
    assert "/body/f" not in body["detail"]


def test_a_body_that_is_not_json_is_a_422_problem(validating):
    response = validating(content=b"{not json", headers={"content-type": "application/json"})

    body = problem(response, 422)
    assert body["type"] == "/problems/validation-error"
    assert [e["pointer"] for e in body["errors"]] == ["/body/1"]


def test_a_discriminated_union_tag_is_not_part_of_the_pointer(app_client):
    response = app_client.post(
        "/v1/fabrics", json={"name": "ib-east", "kind": "infiniband", "pkeys_per_port": "many"}
    )

    body = problem(response, 422)
    assert [e["pointer"] for e in body["errors"]] == ["/body/pkeys_per_port"]


# --- Starlette's HTTPException: unknown routes, wrong methods, raised by a route ---------------


def test_an_unknown_route_is_an_about_blank_404_problem(app_client):
    response = app_client.get("/probe/nowhere")

    assert problem(response, 404) == {
        "type": "about:blank",
        "title": "Not Found",
        "status": 404,
        "detail": "no route matches GET /probe/nowhere",
        "instance": "/probe/nowhere",
    }


def test_a_wrong_method_is_an_about_blank_405_problem_naming_the_allowed_methods(
    raising, app_client
):
    raising(ConflictError("only here to create the route"), "/probe/get-only")

    response = app_client.delete("/probe/get-only")

    assert problem(response, 405) == {
        "type": "about:blank",
        "title": "Method Not Allowed",
        "status": 405,
        "detail": "Method Not Allowed",
        "instance": "/probe/get-only",
    }
    assert response.headers["allow"] == "GET"


def test_an_http_exception_raised_by_a_route_keeps_its_status_detail_and_headers(raising):
    error = StarletteHTTPException(429, detail="slow down", headers={"Retry-After": "30"})

    response = raising(error, "/probe/busy")

    assert problem(response, 429) == {
        "type": "about:blank",
        "title": "Too Many Requests",
        "status": 429,
        "detail": "slow down",
        "instance": "/probe/busy",
    }
    assert response.headers["retry-after"] == "30"


def test_fastapis_http_exception_with_a_structured_detail_gets_the_status_description(raising):
    response = raising(FastApiHTTPException(409, detail={"why": "internal"}), "/probe/structured")

    body = problem(response, 409)
    assert (body["type"], body["title"]) == ("about:blank", "Conflict")
    assert body["detail"] == "Request conflict"
    assert "internal" not in response.text


# --- unexpected exceptions (500, nothing leaked) ------------------------------------------------


def _pydantic_error() -> pydantic.ValidationError:
    try:
        ProbeBody.model_validate({"name": "hunter2-secret"})
    except pydantic.ValidationError as error:
        return error
    raise AssertionError("ProbeBody accepted a body without count")


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("dsn postgresql://admin:hunter2-secret@db/isofabric"),
        KeyError("hunter2-secret"),
        ZeroDivisionError("hunter2-secret"),
        _pydantic_error(),
    ],
    ids=["runtime-error", "key-error", "zero-division", "pydantic-validation-error"],
)
def test_an_unexpected_exception_is_a_500_problem_that_leaks_nothing(raising, caplog, error):
    caplog.set_level(logging.ERROR, logger="isofabric.api")

    response = raising(error, "/probe/crash")

    assert problem(response, 500) == {
        "type": "/problems/internal-error",
        "title": "Internal server error",
        "status": 500,
        "detail": INTERNAL_DETAIL,
        "instance": "/probe/crash",
    }
    assert "hunter2" not in response.text
    assert type(error).__name__ not in response.text
    logged = [r for r in caplog.records if r.name == "isofabric.api"]
    assert [r.levelno for r in logged] == [logging.ERROR]
    assert logged[0].exc_info is not None and logged[0].exc_info[1] is error


# --- artifact-hazard through the real routes ----------------------------------------------------

HAZARDOUS_PARTITIONS = "Default=0x7fff : 0002c9=full ;\n"  # a GUID without 0x: OpenSM misreads it


@pytest.fixture
def hazardous_renderer(monkeypatch):
    """The InfiniBand renderer produces a partitions.conf OpenSM would misread."""
    from policies.infiniband import render

    monkeypatch.setattr(render, "render_partitions_conf", lambda _snapshot: HAZARDOUS_PARTITIONS)


@pytest.mark.parametrize(
    "path",
    [
        f"/v1/fabrics/{FABRIC}/artifacts",
        f"/v1/fabrics/{FABRIC}/artifacts/opensm/partitions.conf",
        f"/v1/fabrics/{FABRIC}/artifacts/opensm/opensm.conf",
    ],
)
def test_an_artifact_that_fails_its_safety_check_is_an_artifact_hazard_problem(
    app_client, onboarded, hazardous_renderer, path
):
    response = app_client.get(path)

    body = problem(response, 500)
    assert set(body) == {"type", "title", "status", "detail", "instance"}
    assert (body["type"], body["title"], body["instance"]) == (
        "/problems/artifact-hazard",
        "Artifact failed its safety check",
        path,
    )
    assert body["detail"].startswith("refusing to emit partitions.conf: line 1: ")


def test_a_proof_over_a_hazardous_artifact_is_refused_and_nothing_is_stored(
    app_client, onboarded, hazardous_renderer, engine
):
    before = dump_database(engine)

    response = app_client.post("/v1/tenants/acme/isolation-proofs", json={"fabric": FABRIC})

    assert problem(response, 500)["type"] == "/problems/artifact-hazard"
    assert dump_database(engine) == before


def test_the_same_routes_serve_the_artifacts_when_the_renderer_is_sound(app_client, onboarded):
    response = app_client.get(f"/v1/fabrics/{FABRIC}/artifacts/opensm/partitions.conf")

    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
