"""What the benchmarks share: timing a step and printing it in one column layout."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def timed(label: str) -> Iterator[None]:
    """Print how long the block took, aligned with the other figures."""
    start = time.perf_counter()
    yield
    print(f"{label:<38} {time.perf_counter() - start:8.2f} s")


def measure(label: str, action: Callable[[], T]) -> T:
    """Run `action`, print its wall-clock time under `label`, return its result."""
    with timed(label):
        return action()


def print_peak_rss() -> None:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{'peak RSS':<38} {peak:8.0f} MB")
