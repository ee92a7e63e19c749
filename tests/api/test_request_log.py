"""The request log (issue 14, item 3): one structured line per request, text or JSON.

In process, the records of the ``isofabric.request`` logger carry the fields; the JSON format is
checked on those records and, end to end, on what a real `isofabric serve --log-format json`
writes to stderr.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import uvicorn
from typer.testing import CliRunner

from api.request_log import REQUEST_LOGGER, JsonFormatter
from cli import app as cli
from tenancy.schemas import TokenCreate
from tenancy.usecases import tokens
from tests.builders import assert_problem, ok
from tests.live_server import first_200, free_port

FIELDS = ("method", "route", "status", "duration_ms", "principal", "request_id")
START_TIMEOUT_SECONDS = 60.0


def request_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == REQUEST_LOGGER]


def test_each_request_logs_one_line_with_its_fields(client, onboarded, caplog):
    caplog.set_level(logging.INFO, logger=REQUEST_LOGGER)

    ok(client.get("/v1/tenants/acme", headers={"X-Request-ID": "req-42"}))

    (record,) = request_records(caplog)
    fields = {name: getattr(record, name) for name in FIELDS}
    assert fields["method"] == "GET" and fields["route"] == "/v1/tenants/{tenant}"
    assert fields["status"] == 200 and fields["request_id"] == "req-42"
    assert fields["principal"] == "anonymous"  # open mode, loopback client
    assert isinstance(fields["duration_ms"], float) and fields["duration_ms"] >= 0
    assert record.levelno == logging.INFO
    message = record.getMessage()
    assert message.startswith("GET /v1/tenants/{tenant} 200 ")
    assert "principal=anonymous request_id=req-42" in message


def test_a_token_principal_is_logged_by_its_id_and_a_refused_request_without_one(
    make_client, onboarded, caplog
):
    client = make_client(admin_token="log-admin")
    created = tokens.create_token(
        client.app.state.uow, spec=TokenCreate(name="ops", role="operator")
    )
    caplog.set_level(logging.INFO, logger=REQUEST_LOGGER)

    ok(client.get("/v1/tenants", headers={"Authorization": f"Bearer {created.token}"}))
    assert_problem(client.post("/v1/tenants", json={"name": "x"}), 401)

    first, second = request_records(caplog)
    assert first.principal == f"token:ops:{created.id}"  # type: ignore[attr-defined]
    assert second.principal is None  # type: ignore[attr-defined]
    assert (second.route, second.status) == ("/v1/tenants", 401)  # type: ignore[attr-defined]


def test_a_failed_request_logs_a_warning_line_with_status_500(make_client, onboarded, caplog):
    client = make_client(raise_server_exceptions=False)
    caplog.set_level(logging.INFO, logger=REQUEST_LOGGER)

    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("boom")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("api.routes.tenants.tenants.get_tenant", broken)
        response = client.get("/v1/tenants/acme", headers={"X-Request-ID": "req-500"})

    assert response.status_code == 500
    (record,) = request_records(caplog)
    assert record.levelno == logging.WARNING
    assert (record.status, record.request_id) == (500, "req-500")  # type: ignore[attr-defined]


def test_json_lines_carry_time_level_logger_message_and_the_fields(client, onboarded, caplog):
    caplog.set_level(logging.INFO, logger=REQUEST_LOGGER)
    ok(client.get("/v1/tenants/acme", headers={"X-Request-ID": "req-json"}))
    (record,) = request_records(caplog)

    line = JsonFormatter().format(record)

    assert "\n" not in line
    document = json.loads(line)
    assert document["level"] == "INFO" and document["logger"] == REQUEST_LOGGER
    assert document["time"].endswith("Z") and "T" in document["time"]
    assert document["message"] == record.getMessage()
    assert {k: document[k] for k in ("method", "route", "status", "request_id")} == {
        "method": "GET",
        "route": "/v1/tenants/{tenant}",
        "status": 200,
        "request_id": "req-json",
    }
    assert document["principal"] == "anonymous" and document["duration_ms"] >= 0


def test_json_keeps_an_app_records_exception_on_one_line():
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        record = logging.LogRecord("isofabric.api", logging.ERROR, __file__, 1, "failed", (), None)
        record.exc_info = sys.exc_info()

    document = json.loads(JsonFormatter().format(record))

    assert document["message"] == "failed" and document["level"] == "ERROR"
    assert "ValueError: bad" in document["exception"]


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """`serve` configures the root logger: put back what pytest had."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_serve_takes_the_format_from_the_environment_and_turns_uvicorns_access_log_off(
    monkeypatch, tmp_path, restored_logging
):
    runs: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda _app, **kwargs: runs.append(kwargs))
    monkeypatch.setenv("ISOFABRIC_LOG_FORMAT", "json")

    result = CliRunner().invoke(cli, ["serve", "--db", f"sqlite:///{tmp_path / 'x.db'}"])

    assert result.exit_code == 0, result.output
    (run,) = runs
    assert run["access_log"] is False and run["log_config"] is None
    assert [type(h.formatter) for h in logging.getLogger().handlers] == [JsonFormatter]


def test_serve_refuses_an_unknown_log_format():
    result = CliRunner().invoke(cli, ["serve", "--log-format", "xml"])

    assert result.exit_code == 2 and "xml" in result.output


# --- end to end: a real `isofabric serve --log-format json` -------------------------------------


def test_serve_log_format_json_writes_one_json_object_per_line(tmp_path: Path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISOFABRIC_")}
    command = [str(Path(sys.executable).with_name("isofabric")), "serve", "--port", str(port)]
    command += ["--db", f"sqlite:///{tmp_path / 'serve.db'}", "--log-format", "json"]
    server = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        first_200(f"{url}/healthz", server)
        paths = ("/v1/tenants", "/metrics", "/v1/nowhere", "/healthz")
        ids = [f"e2e-{n}" for n in range(len(paths))]
        for request_id, path in zip(ids, paths, strict=True):
            httpx2.get(f"{url}{path}", headers={"X-Request-ID": request_id})
    finally:
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=START_TIMEOUT_SECONDS)

    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    assert not any(line["logger"] == "uvicorn.access" for line in lines)
    assert any(line["logger"].startswith("uvicorn") for line in lines)  # its own records too
    logged = {line["request_id"]: line for line in lines if line["logger"] == REQUEST_LOGGER}
    assert sum(1 for line in lines if line.get("request_id") in ids) == len(ids)  # one each
    assert set(ids) <= logged.keys()
    assert [logged[i]["route"] for i in ids] == ["/v1/tenants", "/metrics", "unmatched", "/healthz"]
    assert [logged[i]["status"] for i in ids] == [200, 200, 404, 200]
    # open mode: the loopback client is the anonymous operator; /healthz takes no credentials
    assert [logged[i]["principal"] for i in ids] == ["anonymous"] * 3 + [None]
    assert all(isinstance(logged[i]["duration_ms"], float) for i in ids)
