"""Verification timings reach the observers installed for the engine
(tenancy/store/observers.py)."""

from __future__ import annotations

import gc

from tenancy.gate.full_check import full_check
from tenancy.store.observers import FULL, observe_verifications
from tests.builders import FABRIC


class Recorder:
    def __init__(self, calls: list[tuple[str, str, float]]) -> None:
        self.calls = calls

    def observe(self, fabric: str, check: str, seconds: float) -> None:
        self.calls.append((fabric, check, seconds))


def test_a_full_check_reports_its_duration_to_the_engines_observer(uow, onboarded):
    calls: list[tuple[str, str, float]] = []
    recorder = Recorder(calls)
    observe_verifications(uow.engine, recorder.observe)

    full_check(uow, fabric_name=FABRIC)

    ((fabric, check, seconds),) = calls
    assert (fabric, check) == (FABRIC, FULL) and seconds > 0


def test_an_observer_is_held_weakly_and_one_that_fails_changes_nothing(uow, onboarded):
    calls: list[tuple[str, str, float]] = []
    recorder = Recorder(calls)
    observe_verifications(uow.engine, recorder.observe)

    def broken(_fabric: str, _check: str, _seconds: float) -> None:
        raise RuntimeError("a metrics bug")

    observe_verifications(uow.engine, broken)
    del recorder
    gc.collect()

    assert full_check(uow, fabric_name=FABRIC).matches  # the failing observer is only logged
    assert calls == []  # the recorder is gone: nothing holds it but the registry
