"""Verification verdicts and rendered OpenSM artifacts: digests, ETags, determinism."""

from __future__ import annotations

import re

import pytest

from tests.builders import (
    ARTIFACT_PATHS,
    assert_problem,
    created,
    ok,
    sha256_hex,
)

VERIFICATION = "/v1/fabrics/ib-east/verification"
ARTIFACTS = "/v1/fabrics/ib-east/artifacts"
PARTITIONS = f"{ARTIFACTS}/opensm/partitions.conf"
DIGEST = re.compile(r"^v2:[0-9a-f]{64}$")


def test_the_onboarded_fabric_verifies_with_only_the_granted_edge(client, onboarded):
    verdict = ok(client.get(VERIFICATION))

    assert verdict["holds"] is True
    assert verdict["counterexamples"] == []
    assert DIGEST.fullmatch(verdict["snapshot_digest"])
    assert verdict["reachability"] == [
        {"from": "tenant:acme", "to": "service:storage", "segment": "0x0100", "allowed": True}
    ]


def test_the_manifest_lists_the_three_opensm_files_with_their_sha256_and_size(client, onboarded):
    manifest = ok(client.get(ARTIFACTS))

    assert sorted(f["path"] for f in manifest["files"]) == sorted(ARTIFACT_PATHS)
    for entry in manifest["files"]:
        body = client.get(f"{ARTIFACTS}/{entry['path']}").content
        assert entry["sha256"] == sha256_hex(body)
        assert entry["bytes"] == len(body)


def test_the_manifest_digest_is_the_verified_snapshot_digest(client, onboarded):
    manifest = ok(client.get(ARTIFACTS))

    assert manifest["snapshot_digest"] == ok(client.get(VERIFICATION))["snapshot_digest"]


@pytest.mark.parametrize("path", ARTIFACT_PATHS)
def test_an_artifact_carries_its_sha256_as_etag_and_the_snapshot_digest(client, onboarded, path):
    response = client.get(f"{ARTIFACTS}/{path}")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert response.headers["etag"] == f'"{sha256_hex(response.content)}"'
    assert response.headers["x-snapshot-digest"] == ok(client.get(VERIFICATION))["snapshot_digest"]


def test_an_artifact_with_a_matching_if_none_match_is_a_304_without_body(client, onboarded):
    etag = client.get(PARTITIONS).headers["etag"]

    response = client.get(PARTITIONS, headers={"If-None-Match": etag})

    assert response.status_code == 304
    assert response.content == b""
    assert response.headers["etag"] == etag


def test_an_if_none_match_list_containing_the_etag_is_a_304(client, onboarded):
    etag = client.get(PARTITIONS).headers["etag"]

    response = client.get(PARTITIONS, headers={"If-None-Match": f'"0000", {etag}'})

    assert response.status_code == 304


def test_an_if_none_match_with_the_weak_form_of_the_etag_is_a_304(client, onboarded):
    # RFC 9110 13.1.2: If-None-Match uses weak comparison; proxies that compress (nginx gzip)
    # hand the validator back as W/"...".
    etag = client.get(PARTITIONS).headers["etag"]

    assert client.get(PARTITIONS, headers={"If-None-Match": f"W/{etag}"}).status_code == 304


def test_an_if_none_match_star_is_a_304_for_an_existing_artifact(client, onboarded):
    # RFC 9110 13.1.2: "*" matches any current representation.
    assert client.get(PARTITIONS, headers={"If-None-Match": "*"}).status_code == 304


def test_a_stale_etag_gets_the_new_file_after_a_change(client, onboarded):
    old = client.get(PARTITIONS).headers["etag"]
    created(
        client.post("/v1/tenants/globex/grants", json={"fabric": "ib-east", "service": "storage"})
    )

    response = client.get(PARTITIONS, headers={"If-None-Match": old})

    assert response.status_code == 200
    assert response.headers["etag"] != old
    assert response.headers["etag"] == f'"{sha256_hex(response.content)}"'


def test_a_grant_rewrites_partitions_conf_only_and_no_file_names_the_snapshot(client, onboarded):
    before = {path: client.get(f"{ARTIFACTS}/{path}") for path in ARTIFACT_PATHS}
    created(
        client.post("/v1/tenants/globex/grants", json={"fabric": "ib-east", "service": "storage"})
    )
    after = {path: client.get(f"{ARTIFACTS}/{path}") for path in ARTIFACT_PATHS}

    for responses in (before, after):
        for response in responses.values():
            digest = response.headers["x-snapshot-digest"].removeprefix("v2:")
            assert digest not in response.text
    old, new = before["opensm/partitions.conf"], after["opensm/partitions.conf"]
    assert new.headers["x-snapshot-digest"] != old.headers["x-snapshot-digest"]
    assert new.headers["etag"] != old.headers["etag"]
    for path in ("opensm/opensm.conf", "opensm/qos-policy.conf"):
        assert after[path].content == before[path].content
        assert after[path].headers["etag"] == before[path].headers["etag"]


def test_two_renders_of_the_same_state_are_byte_identical(client, onboarded, make_client):
    other_replica = make_client()

    for path in ARTIFACT_PATHS:
        first = client.get(f"{ARTIFACTS}/{path}")
        assert client.get(f"{ARTIFACTS}/{path}").content == first.content
        second = other_replica.get(f"{ARTIFACTS}/{path}")
        assert second.content == first.content
        assert second.headers["etag"] == first.headers["etag"]


def test_an_unknown_artifact_path_is_a_404_problem_naming_it(client, onboarded):
    body = assert_problem(client.get(f"{ARTIFACTS}/opensm/ib-routing.conf"), 404, "not-found")

    assert "opensm/ib-routing.conf" in body["detail"]


@pytest.mark.parametrize("path", [VERIFICATION, ARTIFACTS, PARTITIONS])
def test_verification_and_artifacts_of_an_unknown_fabric_are_404(client, path):
    assert_problem(client.get(path.replace("ib-east", "ib-nowhere")), 404, "not-found")
