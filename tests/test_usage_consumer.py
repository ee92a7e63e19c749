"""examples/usage_consumer.py against the app: restarts and crashes lose and double nothing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.builders import ok

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "usage_consumer.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("usage_consumer", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("usage_consumer", module)
    spec.loader.exec_module(module)
    return module


consumer = _load()


class CrashError(Exception):
    pass


def fetcher(client, limit: int = 2, crash_after: int | None = None):
    calls = {"n": 0}

    def fetch(cursor: str | None) -> dict[str, Any]:
        calls["n"] += 1
        if crash_after is not None and calls["n"] > crash_after:
            raise CrashError
        params = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        return ok(client.get("/v1/usage/events", params=params))

    return fetch


@pytest.fixture
def hours_pass(client, clock, onboarded):
    """Onboarded at 12:00 (acme 2 nodes x 2 ports + storage, research and globex 2 nodes each);
    acme releases its nodes at 13:30; now is 15:10 (12:00-15:00 are final)."""
    clock.advance(90 * 60)
    assert client.delete(f"/v1/tenants/acme/allocations/{onboarded.allocation_ids['acme']}")
    clock.advance(100 * 60)
    return client


EXPECTED = {
    # acme: nodes 12:00-13:30 (2 x 1.5 h), 2 ports each; storage granted 12:00-15:00 (final part)
    "acme": {"node_seconds": 2 * 5400, "port_seconds": 4 * 5400, "access_seconds": 3 * 3600},
    "globex": {"node_seconds": 2 * 3 * 3600, "port_seconds": 4 * 3 * 3600, "access_seconds": 0},
    "research": {"node_seconds": 2 * 3 * 3600, "port_seconds": 4 * 3 * 3600, "access_seconds": 0},
}


def test_consume_twice_counts_each_event_once(hours_pass, clock, tmp_path):
    state_path = tmp_path / "state.json"

    first = consumer.consume(fetcher(hours_pass), state_path)
    assert first["totals"] == EXPECTED
    second = consumer.consume(fetcher(hours_pass), state_path)  # a restart: nothing new
    assert second["totals"] == EXPECTED and second["events"] == first["events"]

    clock.advance(3600)  # 15:00-16:00 becomes final
    third = consumer.consume(fetcher(hours_pass), state_path)
    assert third["totals"]["research"]["node_seconds"] == 2 * 4 * 3600
    assert third["totals"]["acme"]["access_seconds"] == 4 * 3600
    report = consumer.report(third)
    assert "research" in report and "8.000000" in report


@pytest.mark.parametrize("crash_after", [1, 2, 3, 5])
def test_a_crash_mid_run_loses_and_doubles_nothing(hours_pass, tmp_path, crash_after):
    state_path = tmp_path / "state.json"

    with pytest.raises(CrashError):
        consumer.consume(fetcher(hours_pass, limit=1, crash_after=crash_after), state_path)
    resumed = consumer.consume(fetcher(hours_pass, limit=3), state_path)

    assert resumed["totals"] == EXPECTED
    assert not list(tmp_path.glob(".state.json.*")), "no temporary file is left behind"


def test_the_cli_pulls_over_http_with_the_bearer_token(hours_pass, tmp_path, monkeypatch, capsys):
    requests = []

    class Response:
        def __init__(self, body: bytes) -> None:
            self.body = body

        def __enter__(self) -> Response:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def read(self, *args: Any) -> bytes:
            return self.body

    def urlopen(request, timeout):
        requests.append(request)
        path = request.full_url.removeprefix("http://isofabric.example")
        return Response(hours_pass.get(path).content)

    monkeypatch.setattr(consumer.urllib.request, "urlopen", urlopen)
    argv = ["--url", "http://isofabric.example/", "--token", "s3cret", "--state"]
    assert consumer.main([*argv, str(tmp_path / "s.json"), "--limit", "4"]) == 0

    assert requests[0].full_url == "http://isofabric.example/v1/usage/events?limit=4"
    assert requests[0].get_header("Authorization") == "Bearer s3cret"
    out = capsys.readouterr().out
    assert "acme" in out and "3.000000" in out and "events: " in out
