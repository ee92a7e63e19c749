"""A real uvicorn server in a thread, on an ephemeral loopback port.

For what TestClient cannot show: whether the server's event loop stays free while a handler
works (tests/api/test_event_loop.py, tests/benchmarks/bench_healthz.py).
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
import uvicorn
from starlette.types import ASGIApp

START_TIMEOUT_SECONDS = 30.0


@contextmanager
def live_server(app: ASGIApp, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve `app` on `host` (a port the kernel picks) until the block exits; yields its URL.

    On the default 127.0.0.1 clients connect from loopback, so a service in open mode answers
    them; another address of this host serves it as on a management network.
    """
    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that name it (else Nagle and the
    # peer's delayed ACK add 40 ms to every keep-alive response).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        _wait_started(server, thread)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=START_TIMEOUT_SECONDS)
        listener.close()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the kernel just handed out on `host`, for a server started as a process."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def first_200(url: str, process: subprocess.Popen[Any], timeout: float = 60.0) -> httpx2.Response:
    """Poll `url` until it answers 200 (a server started as `process`); that answer.

    Raises RuntimeError when the process exits first or nothing answers 200 in `timeout` s.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with status {process.returncode}")
        try:
            answer = httpx2.get(url, timeout=2)
            if answer.status_code == 200:
                return answer
        except httpx2.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer 200 within {timeout} s")


def _wait_started(server: uvicorn.Server, thread: threading.Thread) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
