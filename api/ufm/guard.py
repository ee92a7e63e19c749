"""Guards of the UFM-compatible API against clients that retry for ever.

ib-kubernetes retries a failed write every 5 s without end, whatever the error
(pkg/daemon/daemon.go: the entry stays in its add map); NICo's reconciler every 60 s. An
identical refused write within `REFUSAL_TTL` seconds is therefore answered from a short cache
without verifying it again, and each principal is rate-limited (a token bucket): over the rate,
429 with ``Retry-After``. Both are per process: a retry that reaches another replica is verified
there, which changes nothing but the cost.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from fastapi.responses import JSONResponse

REFUSAL_TTL = 60.0
MAX_CACHED_REFUSALS = 4096
# Requests per second per principal, and the burst: a Slurm prolog for a large job or an
# ib-kubernetes resync sends a few hundred calls at once.
DEFAULT_RATE = 50.0
DEFAULT_BURST = 200.0


def request_key(principal: str, method: str, url: str, body: bytes) -> str:
    """What makes two requests identical: who, the method, the URL and the body's bytes."""
    digest = hashlib.sha256(body).hexdigest()
    return f"{principal}\n{method}\n{url}\n{digest}"


@dataclass
class RefusalCache:
    """Refused answers by request key, for `ttl` seconds."""

    ttl: float = REFUSAL_TTL
    clock: object = time.monotonic
    _answers: OrderedDict[str, tuple[float, JSONResponse]] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, key: str) -> JSONResponse | None:
        """The refusal this request got less than `ttl` seconds ago, if any."""
        with self._lock:
            found = self._answers.get(key)
            if found is None:
                return None
            if found[0] <= self._now():
                del self._answers[key]
                return None
            return found[1]

    def put(self, key: str, answer: JSONResponse) -> None:
        """Remember a refusal (a 4xx other than 401 and 429)."""
        with self._lock:
            self._answers[key] = (self._now() + self.ttl, answer)
            self._answers.move_to_end(key)
            while len(self._answers) > MAX_CACHED_REFUSALS:
                self._answers.popitem(last=False)

    def _now(self) -> float:
        return float(self.clock())  # type: ignore[operator]


@dataclass
class RateLimiter:
    """A token bucket per principal: `rate` requests a second, `burst` at once."""

    rate: float = DEFAULT_RATE
    burst: float = DEFAULT_BURST
    clock: object = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_for(self, principal: str) -> int:
        """0 if `principal` may go on now (taking a token); else whole seconds to wait."""
        now = float(self.clock())  # type: ignore[operator]
        with self._lock:
            tokens, then = self._buckets.get(principal, (self.burst, now))
            tokens = min(self.burst, tokens + (now - then) * self.rate)
            if tokens >= 1:
                self._buckets[principal] = (tokens - 1, now)
                return 0
            self._buckets[principal] = (tokens, now)
            return max(1, math.ceil((1 - tokens) / self.rate))
