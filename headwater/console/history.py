"""The console's memory of the last minutes: a sampler thread takes an offsets Snapshot
every interval and keeps the newest N in a ring, from which the charts draw throughput
(end offsets' growth per second) and lag over time. Kept in memory only: the console
holds no state of its own, a restart starts a new history."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .connection import Target
from .offsets import Snapshot, TopicPartition, take


class History:
    """The newest `size` snapshots, safe to read from request threads."""

    def __init__(self, size: int) -> None:
        self._ring: deque[Snapshot] = deque(maxlen=size)
        self._lock = threading.Lock()

    def add(self, snap: Snapshot) -> None:
        with self._lock:
            self._ring.append(snap)

    def snapshots(self) -> list[Snapshot]:
        with self._lock:
            return list(self._ring)

    def latest(self) -> Snapshot | None:
        with self._lock:
            return self._ring[-1] if self._ring else None

    def throughput(self) -> dict[str, Any]:
        """Records per second produced to each topic between consecutive snapshots:
        {"labels": [time, ...], "series": {topic: [rate or None, ...]}}."""
        snaps = [s for s in self.snapshots() if s.error is None or s.ends]
        labels: list[float] = []
        series: dict[str, list[float | None]] = {}
        for before, after in zip(snaps, snaps[1:], strict=False):
            dt = after.at - before.at
            if dt <= 0:
                continue
            totals: dict[str, int] = {}
            for (topic, _p), end in after.ends.items():
                if topic.startswith("__"):
                    continue
                prev = before.ends.get((topic, _p))
                if prev is not None:
                    totals[topic] = totals.get(topic, 0) + max(end - prev, 0)
            for topic in totals:
                series.setdefault(topic, [None] * len(labels))
            labels.append(after.at)
            for topic, values in series.items():
                values.append(round(totals[topic] / dt, 2) if topic in totals else None)
        return {"labels": labels, "series": series}

    def lag(self, pick: Callable[[Snapshot], dict[str, dict[TopicPartition, int]]],
            group: str | None = None) -> dict[str, Any]:
        """Lag over time: each group's total (group None), or one group's per partition.
        `pick` chooses consumer or share groups."""
        labels: list[float] = []
        series: dict[str, list[int | None]] = {}
        for snap in self.snapshots():
            if snap.error is not None and not snap.ends:
                continue
            lags = pick(snap)
            if group is None:
                values = {g: sum(parts.values()) for g, parts in lags.items()}
            else:
                values = {f"{t}-{p}": lag for (t, p), lag in lags.get(group, {}).items()}
            for name in values:
                series.setdefault(name, [None] * len(labels))
            labels.append(snap.at)
            for name, column in series.items():
                column.append(values.get(name))
        return {"labels": labels, "series": series}


class Sampler:
    """Takes a snapshot every `interval_s` on a daemon thread (a request never waits
    for the broker to be sampled)."""

    def __init__(self, target: Target, history: History, interval_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.target, self.history, self.interval_s = target, history, interval_s
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-sampler",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.history.add(take(self.target, self._clock()))
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
