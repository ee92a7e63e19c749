"""The deploy agent's loop: one cycle every ``--interval`` seconds, whatever a cycle raises."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from agent.cycle import CycleResult, Throttle


class Agent(Protocol):
    """What the loop runs: an agent's cycle (agent/opensm.py, agent/sonic.py)."""

    throttle: Throttle

    def cycle(self, *, coalesce: bool = False) -> CycleResult:
        """One cycle."""

    def say(self, line: str) -> None:
        """One line on stderr."""


def run_loop(
    agent: Agent,
    interval: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
    cycles: int | None = None,
) -> None:
    """Run cycles every `interval` seconds (sooner when a coalesced apply falls due), forever.

    No exception of a cycle ends the loop: it is said and the next cycle tries again. `cycles`
    bounds the loop (tests).
    """
    done = 0
    while cycles is None or done < cycles:
        try:
            result = agent.cycle(coalesce=True)
        except Exception as error:  # the loop must outlive any one cycle
            agent.say(f"cycle failed, tried again: {type(error).__name__}: {error}")
            result = CycleResult("failed", str(error))
        done += 1
        wait = interval
        if result.outcome == "waiting":
            wait = min(interval, max(agent.throttle.remaining(), 0.05))
        sleep(wait)
