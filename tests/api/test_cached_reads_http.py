"""The verdict and the artifacts over HTTP from the read cache: today's JSON byte for byte, ETags
and 304s answered without loading the snapshot, fresh content after a change."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tenancy.gate import cached_reads, verification
from tenancy.schemas import VerificationView
from tenancy.store.uow import UnitOfWork
from tests.builders import created, ok, sha256_hex

VERIFICATION = "/v1/fabrics/ib-east/verification"
PARTITIONS = "/v1/fabrics/ib-east/artifacts/opensm/partitions.conf"
REACHABILITY = "/v1/tenants/acme/reachability"


def uncached_verification_body(uow: UnitOfWork) -> bytes:
    """What the route served before the cache: the uncached view through FastAPI's serializer."""
    reference = FastAPI()

    @reference.get("/verification")
    def get() -> VerificationView:
        return verification.verify_fabric(uow, fabric_name="ib-east")

    with TestClient(reference) as client:
        return client.get("/verification").content


def refuse_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(session: Any, fabric: Any) -> Any:
        raise AssertionError("a cached read loaded the snapshot")

    monkeypatch.setattr(cached_reads, "load_snapshot", refuse)


def test_the_verdict_is_todays_json_byte_for_byte(client, onboarded, uow):
    response = client.get(VERIFICATION)

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.content == uncached_verification_body(uow)


def test_the_verdict_carries_its_sha256_as_etag_and_a_match_is_a_304(client, onboarded):
    first = client.get(VERIFICATION)
    etag = first.headers["etag"]

    again = client.get(VERIFICATION, headers={"If-None-Match": etag})

    assert etag == f'"{sha256_hex(first.content)}"'
    assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", etag)


def test_reads_of_an_unchanged_fabric_load_no_snapshot(client, onboarded, monkeypatch):
    body = client.get(VERIFICATION).content
    partitions = client.get(PARTITIONS)
    reachability = ok(client.get(REACHABILITY))
    refuse_loading(monkeypatch)

    assert client.get(VERIFICATION).content == body
    assert client.get(PARTITIONS).content == partitions.content
    not_modified = client.get(PARTITIONS, headers={"If-None-Match": partitions.headers["etag"]})
    assert not_modified.status_code == 304
    assert ok(client.get(REACHABILITY)) == reachability


def test_a_change_is_served_at_once_and_old_etags_get_the_new_body(client, onboarded, uow):
    old_verdict, old_partitions = client.get(VERIFICATION), client.get(PARTITIONS)
    created(
        client.post("/v1/tenants/globex/grants", json={"fabric": "ib-east", "service": "storage"})
    )

    verdict = client.get(VERIFICATION, headers={"If-None-Match": old_verdict.headers["etag"]})
    partitions = client.get(PARTITIONS, headers={"If-None-Match": old_partitions.headers["etag"]})

    assert (verdict.status_code, partitions.status_code) == (200, 200)
    assert verdict.content == uncached_verification_body(uow)
    assert (
        partitions.content
        == verification.get_artifact(uow, fabric_name="ib-east", path="opensm/partitions.conf")[
            0
        ].content
    )
    assert "tenant:globex" in verdict.text
