"""Our own redis-server for the RoCE lab (roce_lab.py re-exports `RedisServer`).

Never the machine's shared Redis: a Unix socket in a tmp dir, no TCP port, no persistence.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import redis

from .harness import _spawn, stop_process, wait_until

LAB_TIMEOUT = 30.0


class RedisServer:
    """Our own redis-server on a Unix socket in `workdir`; stopped by PID on exit."""

    def __init__(self, workdir: Path, redis_server: str = "redis-server") -> None:
        self.workdir = workdir
        self.socket = workdir / "redis.sock"
        self._argv = [
            redis_server, "--port", "0", "--unixsocket", str(self.socket),
            "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
            "--dir", str(workdir),
        ]  # fmt: skip
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> RedisServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._proc = _spawn(
            self._argv, env=dict(os.environ), log=self.workdir / "redis.log", cwd=self.workdir
        )
        wait_until(self._answers, timeout=LAB_TIMEOUT, what="redis-server", alive=self._alive)
        return self

    def __exit__(self, *exc_info: object) -> None:
        stop_process(self._proc)

    def url(self, db: int, *, user: str | None = None, password: str | None = None) -> str:
        """``unix:///…/redis.sock?db=N``, with ``user:password@`` for an ACL user."""
        auth = f"{user}:{password}@" if user is not None else ""
        return f"unix://{auth}{self.socket}?db={db}"

    def client(self, db: int) -> redis.Redis:
        """A client of database `db` as the default user (decoded strings)."""
        return redis.Redis.from_url(self.url(db), decode_responses=True)

    def add_user(self, name: str, password: str, rules: Sequence[str]) -> None:
        """``ACL SETUSER name on >password <rules…>``, e.g. rules ``["~*", "+@read"]``."""
        self.client(0).execute_command(  # type: ignore[no-untyped-call]
            "ACL", "SETUSER", name, "reset", "on", f">{password}", *rules
        )

    def _answers(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            return bool(self.client(0).ping())
        except redis.ConnectionError:
            return False

    def _alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise AssertionError(f"redis-server exited: {(self.workdir / 'redis.log').read_text()}")
