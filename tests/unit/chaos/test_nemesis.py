"""The nemesis keeps each planned quiet gap after the actual heal (tests/chaos/faults.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.chaos.faults import Nemesis, Planned
from tests.chaos.history import Fault

pytestmark = pytest.mark.timeout(30)


class SlowPostgres:
    """A database whose restart (the heal) takes `restart_s`."""

    def __init__(self, restart_s: float) -> None:
        self.restart_s = restart_s

    def kill(self) -> None:
        pass

    def start(self) -> SlowPostgres:
        time.sleep(self.restart_s)
        return self


class FakeCluster:
    def __init__(self, restart_s: float) -> None:
        self.postgres = SlowPostgres(restart_s)
        self.brokers: dict[int, Any] = {}
        self.proxies = None


def test_a_slow_heal_is_followed_by_the_planned_gap_not_by_the_next_fault_at_once():
    plan = [Planned(0.0, "postgres", "postgres", 0.05),
            Planned(0.15, "postgres", "postgres", 0.05)]  # 0.1 s of quiet after the first
    faults: list[Fault] = []
    nemesis = Nemesis(FakeCluster(restart_s=0.6), plan, faults.append)  # type: ignore[arg-type]
    nemesis.start()
    deadline = time.monotonic() + 10
    while len(faults) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    nemesis.stop(timeout=5)
    first, second = faults
    assert first.end is not None and first.end - first.start >= 0.6  # the slow heal
    # the second fault waited its 0.1 s of quiet after the heal (its planned time, 0.15 s
    # after the start, had long passed)
    assert second.start - first.end >= 0.09
