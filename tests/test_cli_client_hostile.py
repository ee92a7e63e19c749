"""The REST client against servers that are not (quite) the isofabric API (issue 14, item 7).

A proxy's HTML error page, a captive portal answering 200 with HTML, an empty or non-page JSON
answer, a download cut mid-file: each is one line on stderr and an exit status, never a
traceback, and a cut download leaves no file behind. A tiny stdlib HTTP server plays the part.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from typer.testing import CliRunner

from cli import app, client

TOKEN = "hostile-client-token-value"
runner = CliRunner()


@dataclass
class Canned:
    """What the fake server answers: per path, (status, content type, body, declared length)."""

    answers: dict[str, tuple[int, str, bytes, int | None]] = field(default_factory=dict)
    default: tuple[int, str, bytes, int | None] = (404, "text/plain", b"no", None)
    paths: list[str] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def fake() -> Iterator[Canned]:
    canned = Canned()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.partition("?")[0]
            canned.paths.append(path)
            status, kind, body, length = canned.answers.get(path, canned.default)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body) if length is None else length))
            self.send_header("X-Snapshot-Digest", "d1")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    canned.url = f"http://127.0.0.1:{server.server_port}/prefix/"  # a path prefix, trailing /
    try:
        yield canned
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def run(canned: Canned, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, [*args, "--url", canned.url], env={"ISOFABRIC_TOKEN": TOKEN})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


COMMANDS = [("fabrics", "list"), ("tenants", "list"), ("tokens", "list"), ("fabrics", "show", "f")]
NOT_THE_API = [
    (200, "text/html", b"<html><body>Sign in to the guest network</body></html>"),
    (200, "application/json", b""),
    (204, "application/json", b""),
    (200, "application/json", b"[1, 2]"),
    (200, "application/json", b"{not json"),
]


@pytest.mark.parametrize("answer", NOT_THE_API, ids=lambda a: f"{a[0]}-{a[2][:12]!r}")
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_success_that_is_no_json_object_is_one_line_and_exit_6(fake, command, answer):
    fake.default = (*answer, None)

    status, stdout, stderr = run(fake, *command)

    assert status == client.UNAVAILABLE
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    assert "is http://127.0.0.1" in stderr and "the isofabric API?" in stderr
    assert "Traceback" not in stdout + stderr and TOKEN not in stdout + stderr
    assert all(path.startswith("/prefix/v1/") for path in fake.paths), fake.paths


@pytest.mark.parametrize("command", COMMANDS[:3], ids=" ".join)
def test_a_json_object_that_is_no_page_is_one_line_and_exit_6(fake, command):
    fake.default = (200, "application/json", b'{"data": "nope", "count": 1}', None)

    status, _, stderr = run(fake, *command)

    assert status == client.UNAVAILABLE
    assert "answered no page of items" in stderr and stderr.count("\n") == 1, stderr


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_proxys_html_502_is_one_line_and_exit_6(fake, command):
    fake.default = (502, "text/html", b"<html>\n<h1>502 Bad Gateway</h1>\n</html>", None)

    status, stdout, stderr = run(fake, *command)

    assert (status, stderr) == (client.UNAVAILABLE, "error: HTTP 502 Bad Gateway\n")
    assert "Traceback" not in stdout


def test_a_problem_with_malformed_counterexamples_is_still_one_line(fake):
    problem = {"title": "Refused", "detail": "no", "counterexamples": "not a list"}
    fake.default = (409, "application/problem+json", json.dumps(problem).encode(), None)

    status, _, stderr = run(fake, "fabrics", "list")

    assert (status, stderr) == (client.REFUSED, "error: Refused: no\n")


def test_a_download_cut_mid_file_leaves_no_file_behind(fake, tmp_path):
    content = b"x" * 5000
    digest = hashlib.sha256(content).hexdigest()
    files = [{"path": "opensm/partitions.conf", "bytes": 5000, "sha256": digest}]
    manifest = {"snapshot_digest": "d1", "files": files}
    fake.answers["/prefix/v1/fabrics/f/artifacts"] = (
        200,
        "application/json",
        json.dumps(manifest).encode(),
        None,
    )
    # Declares 5,000 bytes, sends 100 and closes: the connection drops mid-file.
    fake.answers["/prefix/v1/fabrics/f/artifacts/opensm/partitions.conf"] = (
        200,
        "text/plain",
        content[:100],
        5000,
    )
    out = tmp_path / "bundle"

    status, _, stderr = run(fake, "render", "--fabric", "f", "--out", str(out), "--quiet")

    assert status == client.UNAVAILABLE, stderr
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    assert [p for p in out.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("answer", [(200, "text/html", b"<html>portal</html>", None), None])
def test_a_password_in_the_url_is_never_printed(fake, answer):
    if answer is None:  # nobody listens: the unreachable-server message
        fake.url = "http://operator:s3cr3t-pw@127.0.0.1:9/"
    else:
        fake.default = answer
        fake.url = fake.url.replace("http://", "http://operator:s3cr3t-pw@")

    status, stdout, stderr = run(fake, "fabrics", "list")

    assert status == client.UNAVAILABLE and stderr.startswith("error: "), stderr
    assert "s3cr3t" not in stdout + stderr and "***@127.0.0.1" in stderr


def test_a_problem_detail_cannot_drive_the_terminal(fake):
    detail = "bad\x1b]0;pwned\x07 thing\x1b[2J\x9b31m\r\nend"
    problem = {"title": "Conflict\x1b[8m", "detail": detail}
    fake.default = (409, "application/problem+json", json.dumps(problem).encode(), None)

    status, _, stderr = run(fake, "fabrics", "list")

    assert status == client.REFUSED
    assert stderr == "error: Conflict[8m: bad]0;pwned thing[2J31m end\n"


@pytest.mark.parametrize("command", [("fabrics", "list"), ("fabrics", "show", "f")], ids=" ".join)
def test_the_servers_strings_are_printed_literally_never_as_markup(fake, command):
    item = {"name": "[/x] [bold]b[/bold]\x1b[2J", "kind": "ib"}
    body = item if command[1] == "show" else {"data": [item], "count": 1, "next": None}
    fake.default = (200, "application/json", json.dumps(body).encode(), None)

    status, stdout, stderr = run(fake, *command)

    assert status == 0, stderr
    assert "[/x] [bold]b[/bold][2J" in stdout and "\x1b" not in stdout
