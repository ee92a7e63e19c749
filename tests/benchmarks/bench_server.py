"""The service under uvicorn in a child process, for benchmarks that talk to it over HTTP.

The child runs `api.app.create_app` with the settings of its environment (``ISOFABRIC_*``, as
``isofabric serve`` reads them) on 127.0.0.1, on a port the kernel picks, and prints the port.
It adds one route of its own, ``GET /v1/bench/bytes/{size}``: a pre-built bytes object of
`size` bytes, behind the same dependencies as every /v1 route (bearer token, RBAC, JSON body
check), so a benchmark can compare a route's time with that of sending its answer's bytes alone.

    python -m tests.benchmarks.bench_server   # the child; `running_server` starts it
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache

import httpx2
from fastapi import FastAPI, Response

BYTES_ROUTE = "/v1/bench/bytes/{size}"
START_TIMEOUT_SECONDS = 120.0
STOP_TIMEOUT_SECONDS = 30.0


@cache
def prebuilt(size: int) -> bytes:
    """`size` bytes, built on the first request for that size and kept."""
    return b"x" * size


def add_bytes_route(app: FastAPI) -> None:
    """Mount ``GET /v1/bench/bytes/{size}?media=...`` with the /v1 routes' dependencies."""
    from api.deps import authorized_router
    from api.mounting import serve_routes

    router = authorized_router()

    # `def`, not `async def`, like the fabric routes: both answer from the thread pool.
    @router.get(BYTES_ROUTE, include_in_schema=False)
    def bench_bytes(size: int, media: str = "application/json") -> Response:
        return Response(prebuilt(size), media_type=media)

    serve_routes(app, router)


def serve() -> None:
    """Child process: run the app under uvicorn on an ephemeral loopback port; print the port."""
    import uvicorn

    from api.app import create_app
    from tenancy.store.settings import load_settings

    logging.getLogger("isofabric.api").setLevel(logging.ERROR)
    app = create_app(load_settings())
    add_bytes_route(app)
    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that name it (else Nagle and the
    # peer's delayed ACK add 40 ms to every keep-alive response).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.bind(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, proxy_headers=False)
    uvicorn.Server(config).run(sockets=[listener])


def server_environment(settings: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without its ``ISOFABRIC_*`` variables, plus `settings`.

    A developer's own ISOFABRIC_ADMIN_TOKEN or database URL must not leak into the benchmark.
    """
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("ISOFABRIC_")}
    return inherited | dict(settings)


@contextmanager
def running_server(settings: Mapping[str, str]) -> Iterator[str]:
    """Start the child with `settings` (``ISOFABRIC_*`` variables); yield its base URL."""
    command = [sys.executable, "-m", "tests.benchmarks.bench_server"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, text=True, env=server_environment(settings)
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.strip():
            raise RuntimeError(f"the server did not start (exit status {process.wait()})")
        base_url = f"http://127.0.0.1:{int(line)}"
        _wait_healthy(base_url, process)
        yield base_url
    finally:
        _stop(process)


def _wait_healthy(base_url: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        try:
            httpx2.get(f"{base_url}/healthz", timeout=1.0)
            return
        except httpx2.TransportError:
            time.sleep(0.05)
    raise RuntimeError("the server did not answer /healthz")


def _stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL: a handler still working (a timed-out request) must not hang us."""
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


if __name__ == "__main__":
    serve()
