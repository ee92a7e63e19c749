"""The agents' and the command line's token goes to the configured service's origin only.

Two loopback HTTP servers on different ports are two origins: "service" redirects every request
to "elsewhere", which records what it was sent. Agents read their token from --token-file or
ISOFABRIC_TOKEN; --token on the command line still works but warns (process lists show it).
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from typer.testing import CliRunner

from agent.client import SameOriginRedirects, ServerClient, ServerError
from agent.command import agent_app
from cli import app as cli_app

runner = CliRunner()
TOKEN = "isf_the-agents-secret"


@dataclass
class Origin:
    """A loopback HTTP server: 307 to `redirect_to` + path if set (but under /here), else 200."""

    redirect_to: str | None = None
    seen: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Authorization)
    url: str = ""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        origin = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                origin.seen.append((self.path, self.headers.get("Authorization")))
                if origin.redirect_to is not None and not self.path.startswith("/here"):
                    self.send_response(307)
                    self.send_header("Location", origin.redirect_to + self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


@pytest.fixture
def serve() -> Iterator[object]:
    servers: list[ThreadingHTTPServer] = []

    def start(origin: Origin) -> Origin:
        server = ThreadingHTTPServer(("127.0.0.1", 0), origin.handler())
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        origin.url = f"http://127.0.0.1:{server.server_address[1]}"
        return origin

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_an_agent_refuses_a_redirect_to_another_origin_and_sends_it_nothing(serve):
    elsewhere = serve(Origin())
    service = serve(Origin(redirect_to=elsewhere.url))

    with pytest.raises(ServerError, match="another origin"):
        ServerClient(service.url, TOKEN, "ib-east", "sm01").signed_manifest()

    assert [auth for _, auth in service.seen] == [f"Bearer {TOKEN}"]
    assert elsewhere.seen == []


def test_an_agent_follows_a_redirect_within_its_service(serve):
    service = serve(Origin())
    service.redirect_to = service.url + "/here"  # to itself

    assert ServerClient(service.url, TOKEN, "ib-east", "sm01").signed_manifest() == {}
    assert [auth for _, auth in service.seen] == [f"Bearer {TOKEN}"] * 2


@pytest.mark.parametrize(
    ("start", "to", "follows"),
    [
        ("https://svc.example/v1/x", "http://svc.example/v1/x", False),  # a downgrade
        ("https://svc.example/v1/x", "https://svc.example:8443/v1/x", False),
        ("https://svc.example/v1/x", "https://other.example/v1/x", False),
        ("https://svc.example/v1/x", "https://SVC.example:443/v1/y", True),
        ("http://10.0.0.5:8000/v1/x", "http://10.0.0.5:8000/v1/y", True),
    ],
)
def test_only_the_same_scheme_host_and_port_is_the_same_origin(start, to, follows):
    request = urllib.request.Request(start, headers={"Authorization": f"Bearer {TOKEN}"})
    handler = SameOriginRedirects()
    if follows:
        assert handler.redirect_request(request, None, 307, "", {}, to) is not None
    else:
        with pytest.raises(urllib.error.HTTPError):
            handler.redirect_request(request, None, 307, "", {}, to)


def test_the_command_line_never_follows_a_redirect_with_its_token(serve):
    elsewhere = serve(Origin())
    service = serve(Origin(redirect_to=elsewhere.url))

    result = runner.invoke(
        cli_app, ["tenants", "list", "--url", service.url], env={"ISOFABRIC_TOKEN": TOKEN}
    )

    assert result.exit_code != 0 and "Traceback" not in result.output
    assert elsewhere.seen == []


def against(base: list[str], url: str) -> list[str]:
    """The agent's argv (tests/agent/conftest.py) for one cycle against the service at `url`."""
    args = [*base, "--once"]
    args[args.index("--server") + 1] = url
    return args


def test_an_agent_reads_its_token_from_a_file(serve, base, tmp_path):
    service = serve(Origin())
    token_file = tmp_path / "token"
    token_file.write_text(f"{TOKEN}\n")

    result = runner.invoke(
        agent_app, [*against(base, service.url), "--token-file", str(token_file)]
    )

    assert result.exit_code == 1  # {} is no signed manifest
    assert service.seen and all(auth == f"Bearer {TOKEN}" for _, auth in service.seen)
    assert "warning" not in result.stderr


def test_a_token_on_the_command_line_works_but_warns(serve, base):
    service = serve(Origin())

    result = runner.invoke(agent_app, [*against(base, service.url), "--token", TOKEN])
    from_env = runner.invoke(agent_app, against(base, service.url), env={"ISOFABRIC_TOKEN": TOKEN})

    assert "--token on the command line shows in process lists" in result.stderr
    assert "warning" not in from_env.stderr
    assert all(auth == f"Bearer {TOKEN}" for _, auth in service.seen)


@pytest.mark.parametrize("content", [None, "", "  \n"])
def test_a_token_file_that_is_empty_or_beside_token_is_a_usage_error(base, tmp_path, content):
    token_file = tmp_path / "token"
    token_file.write_text(content or "")
    extra = ["--token", TOKEN] if content is None else []

    result = runner.invoke(
        agent_app,
        [*base, "--once", "--token-file", str(token_file), *extra],
    )

    assert result.exit_code == 2, result.output
    assert "--token" in result.stderr and "Traceback" not in result.output
