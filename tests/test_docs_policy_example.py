"""docs/operators/policy.md "Internal and external operation" replayed against the app.

The requests are the section's own curl commands and its policy.yaml, parsed from that page, and
sent in order to the in-process app (open mode: an operator); the assertions are what the
section's `# ->` comments claim. Editing a request on the page changes what this test sends;
a request the test does not expect there, or one missing, fails it.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2
from fastapi.testclient import TestClient

from tests.builders import REPO, Dump, assert_problem, created, ok

SECTION = "## Internal and external operation"
FABRIC_PATH = "/v1/fabrics/ib-rail"
PARTITIONS_CONF = f"{FABRIC_PATH}/artifacts/opensm/partitions.conf"
PEER_PARTITION = "peer_datapipe_research"
GUID_MEMBERSHIP = re.compile(r"(0x[0-9a-f]{16})=(full|limited)")
# What the section's comments say each allocation gets, and the peering's P_Key.
NODES = {
    "acme": ["gpu0001", "gpu0002"],
    "globex": ["gpu0005", "gpu0006"],
    "research": ["gpu0009", "gpu0010"],
    "datapipe": ["gpu0011", "gpu0012"],
}
PEERING_PKEY = "0x0106"
QUOTA_MESSAGE = (
    "tenant:acme (external) holds 5 nodes across all fabrics, more than the external quota of 4"
)
VISIBILITY_MESSAGE = (
    "tenant:acme (external) is granted service:telemetry, which the policy makes visible to "
    "internal tenants only"
)


def readme_section() -> str:
    text = (REPO / "docs" / "operators" / "policy.md").read_text()
    return text.split(f"\n{SECTION}\n", 1)[1].split("\n## ", 1)[0]


def policy_yaml(section: str) -> str:
    """The policy the page writes with `cat > policy.yaml <<'EOF'` (its here-document)."""
    return section.split("cat > policy.yaml <<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0] + "\n"


def sh_block(section: str) -> str:
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


@dataclass(frozen=True)
class Request:
    """One curl command of the page: `$API` is the base URL, `@file` the file's text."""

    method: str
    target: str
    headers: dict[str, str] = field(default_factory=dict)
    data: str | None = None


def curl_requests(sh: str) -> list[Request]:
    lines = sh.replace("\\\n", " ").splitlines()
    return [
        parse_curl(shlex.split(line, comments=True)) for line in lines if line.startswith("curl")
    ]


def parse_curl(words: list[str]) -> Request:
    method, target, headers, data = "GET", "", {}, None
    options = iter(words[1:])
    for word in options:
        if word == "-X":
            method = next(options)
        elif word == "-H":
            name, value = next(options).split(":", 1)
            headers[name.strip().lower()] = value.strip()
        elif word in ("-d", "--data-binary"):
            data = next(options)
        elif word.startswith("$API"):
            target = word.replace("$API", "", 1)
        else:
            assert word == "-s", f"curl option the test does not know: {word}"
    return Request(method, target, headers, data)


class Replay:
    """The page's requests, sent one by one; each `send` names the request it expects next."""

    def __init__(self, client: TestClient, section: str) -> None:
        self.client = client
        self.requests = curl_requests(sh_block(section))
        self.files = {"policy.yaml": policy_yaml(section)}
        self.variables: dict[str, str] = {}

    def send(self, method: str, target: str) -> httpx2.Response:
        assert self.requests, f"the page has no more requests; expected {method} {target}"
        request = self.requests.pop(0)
        assert (request.method, request.target) == (method, target)
        for name, value in self.variables.items():
            target = target.replace(f"${name}", value)
        return self.client.request(
            method, target, headers=request.headers, content=self.body(request.data)
        )

    def body(self, data: str | None) -> str | None:
        if data is None or not data.startswith("@"):
            return data
        name = data[1:]
        return self.files[name] if name in self.files else (REPO / name).read_text()


# --- what the test reads besides the page's requests ---------------------------------------


def tenant_nodes(client: TestClient, tenant: str) -> list[dict[str, Any]]:
    body = ok(client.get(f"{FABRIC_PATH}/nodes", params={"tenant": tenant}))
    nodes: list[dict[str, Any]] = body["data"]
    return nodes


def switches(nodes: list[dict[str, Any]]) -> set[str]:
    return {port["switch"] for node in nodes for port in node["ports"]}


def guids(nodes: list[dict[str, Any]]) -> set[str]:
    return {port["guid"] for node in nodes for port in node["ports"]}


def leaf_group(group: int) -> set[str]:
    return {f"leaf-g{group}-r{rail}" for rail in range(4)}


def partition(conf: str, name: str) -> tuple[str, dict[str, str]]:
    """The header (`0x0106, ipoib`) and the members (guid -> full/limited) of one statement."""
    statement = conf.split(f"\n{name}=", 1)[1].split(";", 1)[0]
    header, members = statement.split(":", 1)
    return header.strip(), dict(GUID_MEMBERSHIP.findall(members))


def rules(problem: dict[str, Any]) -> list[str]:
    return [example["rule"] for example in problem["counterexamples"]]


# --- the section's steps ---------------------------------------------------------------------


def step_1_fabric(replay: Replay) -> None:
    created(replay.send("POST", "/v1/fabrics"))
    body = ok(replay.send("PUT", "/v1/fabrics/ib-rail/topology"))
    assert (body["switches"], body["nodes"], body["ports"]) == (19, 20, 68)
    assert body["missing"] == []
    for node in ("sm01", "stor01", "stor02"):
        ok(replay.send("PATCH", f"{FABRIC_PATH}/nodes/{node}"))
    storage = created(replay.send("POST", f"{FABRIC_PATH}/services"))
    telemetry = created(replay.send("POST", f"{FABRIC_PATH}/services"))
    assert (storage["name"], storage["nodes"]) == ("storage", ["stor01", "stor02"])
    assert (telemetry["name"], telemetry["nodes"]) == ("telemetry", ["tel01"])


def step_2_policy(replay: Replay, db_dump: Callable[[], Dump]) -> None:
    before = db_dump()
    dry = ok(replay.send("PUT", "/v1/policy?dry_run=true"))
    assert db_dump() == before
    assert (dry["dry_run"], dry["holds"]) == (True, True)
    assert [(f["fabric"], f["holds"], f["counterexamples"]) for f in dry["fabrics"]] == [
        ("ib-rail", True, [])
    ]
    assert ok(replay.client.get("/v1/policy"))["version"] == 0

    policy = ok(replay.send("PUT", "/v1/policy"))
    assert policy["version"] == 1 and policy["fingerprint"].startswith("sha256:")
    assert policy["kinds"]["external"]["isolation"] == "dedicated_leaf"
    assert policy["kinds"]["internal"]["default_grants"] == ["telemetry"]
    assert policy["services"] == {"storage": "all", "telemetry": "internal"}
    assert ok(replay.client.get("/v1/policy")) == policy


def step_3_customers(replay: Replay) -> None:
    created(replay.send("POST", "/v1/tenants"))
    created(replay.send("POST", "/v1/tenants"))
    acme = created(replay.send("POST", "/v1/tenants/acme/allocations"))
    globex = created(replay.send("POST", "/v1/tenants/globex/allocations"))
    assert (acme["nodes"], globex["nodes"]) == (NODES["acme"], NODES["globex"])
    assert switches(tenant_nodes(replay.client, "acme")) == leaf_group(1)
    listed = ok(replay.send("GET", f"{FABRIC_PATH}/nodes?tenant=globex"))
    assert switches(listed["data"]) == leaf_group(2)


def step_4_teams(replay: Replay) -> None:
    created(replay.send("POST", "/v1/tenants"))
    created(replay.send("POST", "/v1/tenants"))
    research = created(replay.send("POST", "/v1/tenants/research/allocations"))
    datapipe = created(replay.send("POST", "/v1/tenants/datapipe/allocations"))
    assert (research["nodes"], datapipe["nodes"]) == (NODES["research"], NODES["datapipe"])
    for team in ("research", "datapipe"):  # one leaf group, no customer's
        assert switches(tenant_nodes(replay.client, team)) == leaf_group(3)
    grants = ok(replay.send("GET", "/v1/tenants/research/grants"))
    assert [(g["fabric"], g["service"]) for g in grants["data"]] == [("ib-rail", "telemetry")]
    datapipe_grants = ok(replay.client.get("/v1/tenants/datapipe/grants"))["data"]
    assert [g["service"] for g in datapipe_grants] == ["telemetry"]


def step_5_refusals(replay: Replay, db_dump: Callable[[], Dump]) -> None:
    verdict = ok(replay.send("GET", f"{FABRIC_PATH}/verification"))
    assert (verdict["holds"], verdict["counterexamples"]) == (True, [])
    before = db_dump()
    grant = assert_problem(replay.send("POST", "/v1/tenants/acme/grants"), 409)
    quota = assert_problem(replay.send("POST", "/v1/tenants/acme/allocations"), 409)
    assert db_dump() == before
    for problem in (grant, quota):
        assert problem["type"].endswith("/isolation-violation")
    assert rules(grant) == ["policy-service-visibility"]
    assert grant["counterexamples"][0]["message"] == VISIBILITY_MESSAGE
    assert rules(quota) == ["policy-quota"]
    assert quota["counterexamples"][0]["message"] == QUOTA_MESSAGE


def step_6_peering_request(replay: Replay) -> str:
    requested = created(replay.send("POST", "/v1/tenants/research/peerings"))
    assert (requested["fabric"], requested["requester"], requested["peer"]) == (
        "ib-rail",
        "research",
        "datapipe",
    )
    assert requested["state"] == "requested" and requested["segment"] is None
    pending = ok(replay.send("GET", "/v1/tenants/datapipe/peering-requests"))
    assert [(p["id"], p["state"]) for p in pending["data"]] == [(requested["id"], "requested")]
    peering_id: str = requested["id"]
    replay.variables["PEERING"] = peering_id
    return peering_id


def step_6_peering_accepted(replay: Replay) -> None:
    accepted = ok(replay.send("POST", "/v1/tenants/datapipe/peering-requests/$PEERING/accept"))
    assert accepted["state"] == "accepted"
    assert accepted["segment"] == {"kind": "ib_partition", "pkey": PEERING_PKEY}
    verdict = ok(replay.send("GET", f"{FABRIC_PATH}/verification"))
    assert verdict["holds"] is True
    edge = {"from": "tenant:datapipe", "to": "tenant:research", "segment": PEERING_PKEY}
    assert {**edge, "allowed": True} in verdict["reachability"]

    conf = replay.send("GET", PARTITIONS_CONF)
    assert conf.status_code == 200, conf.text
    header, members = partition(conf.text, PEER_PARTITION)
    teams = tenant_nodes(replay.client, "research") + tenant_nodes(replay.client, "datapipe")
    assert header == f"{PEERING_PKEY}, ipoib"
    assert members == dict.fromkeys(guids(teams), "full") and len(members) == 16


def step_6_customers_may_not_peer_and_the_peering_ends(replay: Replay) -> None:
    refused = assert_problem(replay.send("POST", "/v1/tenants/acme/peerings"), 409, "/conflict")
    assert refused["rule"] == "policy-peering"
    assert ok(replay.client.get("/v1/tenants/acme/peerings"))["count"] == 0

    ended = replay.send("DELETE", "/v1/tenants/datapipe/peerings/$PEERING")
    assert ended.status_code == 204, ended.text
    conf = replay.client.get(PARTITIONS_CONF).text
    assert f"\n{PEER_PARTITION}=" not in conf
    assert "\ntenant_research=" in conf and "\ntenant_datapipe=" in conf


def test_the_readme_policy_example_does_what_its_comments_say(client, db_dump):
    replay = Replay(client, readme_section())

    step_1_fabric(replay)
    step_2_policy(replay, db_dump)
    step_3_customers(replay)
    step_4_teams(replay)
    step_5_refusals(replay, db_dump)
    peering_id = step_6_peering_request(replay)
    step_6_peering_accepted(replay)
    step_6_customers_may_not_peer_and_the_peering_ends(replay)

    assert replay.requests == [], "the page's requests the test did not replay"
    peerings = ok(client.get("/v1/tenants/research/peerings", params={"state": "all"}))
    assert [(p["id"], p["state"]) for p in peerings["data"]] == [(peering_id, "ended")]
    # "gpu0003/4 stay acme's to grow into": up to its quota of 4, on its own leaf group.
    grown = created(
        client.post("/v1/tenants/acme/allocations", json={"fabric": "ib-rail", "count": 2})
    )
    assert grown["nodes"] == ["gpu0003", "gpu0004"]


def test_the_section_parses_into_curl_requests_and_a_policy():
    section = readme_section()

    requests = curl_requests(sh_block(section))

    assert policy_yaml(section).startswith("kinds:\n  external:")
    assert all(request.target.startswith("/v1/") for request in requests)
    assert sum(request.data == "@policy.yaml" for request in requests) == 2


def test_the_sections_comments_state_what_the_replay_asserts():
    sh = sh_block(readme_section())
    compact = {tenant: json.dumps(nodes, separators=(",", ":")) for tenant, nodes in NODES.items()}

    assert '{"switches":19,"nodes":20,"ports":68,' in sh
    assert '"version":1,' in sh
    for tenant, nodes in compact.items():
        assert f'"nodes":{nodes}' in sh, tenant
    for message in (VISIBILITY_MESSAGE, QUOTA_MESSAGE):
        assert f'"message":"{message}"' in sh
    for rule in ("policy-service-visibility", "policy-quota", "policy-peering"):
        assert f'"rule":"{rule}"' in sh
    assert f'"segment":{{"kind":"ib_partition","pkey":"{PEERING_PKEY}"}}' in sh
    assert f"{PEER_PARTITION}={PEERING_PKEY}, ipoib" in sh
