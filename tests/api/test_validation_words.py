"""Invalid input is explained in words: what a field allows, never the pattern that checks it."""

from __future__ import annotations

from tests.builders import assert_problem

SLUG_WORDS = (
    "must be lower case letters, digits and '-', starting with a letter, at most 63 characters"
)
TIME_WORDS = "must be an ISO 8601 time such as 2026-12-06T10:00:00Z"


def test_a_bad_tenant_name_says_which_names_are_allowed(client):
    response = client.post("/v1/tenants", json={"name": "Bad Name", "kind": "external"})

    body = assert_problem(response, 422, "validation-error")
    assert body["errors"] == [{"pointer": "/body/name", "detail": SLUG_WORDS}]
    assert "^[a-z]" not in body["detail"] and SLUG_WORDS in body["detail"]


def test_a_bad_time_says_which_form_a_time_takes(client):
    response = client.get("/v1/usage/records", params={"from": "yesterday"})

    body = assert_problem(response, 422, "validation-error")
    assert [e["detail"] for e in body["errors"]] == [TIME_WORDS]


def test_an_error_of_a_field_without_words_keeps_pydantics_message(client):
    response = client.post("/v1/tenants", json={"name": "acme2", "kind": "neither"})

    body = assert_problem(response, 422, "validation-error")
    assert any("internal" in e["detail"] and "external" in e["detail"] for e in body["errors"])


def test_a_closed_set_of_words_is_listed(client):
    response = client.get(
        "/v1/usage/records", params={"from": "2026-12-01T00:00:00Z", "granularity": "week"}
    )

    body = assert_problem(response, 422, "validation-error")
    assert [e["detail"] for e in body["errors"]] == ["must be one of hour, day"]


def test_a_validators_own_sentence_reads_without_pydantics_prefix(client):
    body = {"virtual_guids": {"enabled": True, "ranges": ["0x02-0x01"]}}
    response = client.patch("/v1/fabrics/nowhere", json=body)

    assert response.status_code == 422
    assert "Value error" not in response.text and "must not be above" in response.text
