"""A private redis-server on a Unix socket in a temporary directory (never the shared 6379).

Started with ``--port 0`` (no TCP), no persistence; stopped by its pid. A missing redis-server
skips the tests (fails with ISOFABRIC_REQUIRE_CONFORMANCE=1), like the other real-tool tests.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis

from tests.conformance.conftest import skip_or_fail

READER = "reader"
READER_PASSWORD = "reader-secret"
START_TIMEOUT = 10.0


@dataclass(frozen=True)
class RedisServer:
    """A running redis-server: its socket and process."""

    socket: Path
    process: subprocess.Popen[bytes]

    def url(self, db: int = 4) -> str:
        """The redis-py URL of database `db` (SONiC's CONFIG_DB is 4)."""
        return f"unix://{self.socket}?db={db}"

    def reader_url(self, db: int = 4) -> str:
        """The URL of an ACL user who may read and run transactions but not write."""
        return f"unix://{READER}@{self.socket}?db={db}&password={READER_PASSWORD}"

    def client(self, db: int = 4) -> redis.Redis:
        """An administrator's client (decoded replies)."""
        return redis.Redis(unix_socket_path=str(self.socket), db=db, decode_responses=True)


@contextmanager
def running_redis(directory: Path) -> Iterator[RedisServer]:
    """Start redis-server in `directory`; stop it (by pid) when done."""
    binary = shutil.which("redis-server")
    if binary is None:
        skip_or_fail("redis-server is not installed")
    socket = directory / "redis.sock"
    argv = [binary, "--port", "0", "--unixsocket", str(socket), "--unixsocketperm", "700"]
    argv += ["--save", "", "--appendonly", "no", "--dir", str(directory)]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        server = RedisServer(socket, process)
        _wait_ready(server)
        # A user without write rights: every write command is refused with NOPERM.
        server.client().acl_setuser(
            READER,
            enabled=True,
            passwords=[f"+{READER_PASSWORD}"],
            keys=["*"],
            commands=["+@read", "+@transaction", "+@connection", "-@write"],
        )
        yield server
    finally:
        process.terminate()
        process.wait(timeout=10)


def _wait_ready(server: RedisServer) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            server.client().ping()
            return
        except redis.ConnectionError:
            if time.monotonic() > deadline or server.process.poll() is not None:
                raise
            time.sleep(0.02)
