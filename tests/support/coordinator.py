"""A test context for coordinator shards: fake clock, fake timer, record capture.

Operations run exactly as under the real runtime (op -> records -> replay), minus
the log: tests assert on the records an operation produced and on the state that
replaying them yields, and can rebuild a fresh shard from the captured records to
check that replay gives the same state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from headwater.coordinator.record_codec import CoordinatorRecord, RecordCodec
from headwater.coordinator.runtime import Result


class FakeTimer:
    def __init__(self, context: ShardContext) -> None:
        self.context = context
        self.tasks: dict[str, tuple[int, Callable[[int], Result]]] = {}

    def schedule(self, key: str, delay_ms: int, op: Callable[[int], Result]) -> None:
        self.tasks[key] = (self.context.now + delay_ms, op)

    def cancel(self, key: str) -> None:
        self.tasks.pop(key, None)

    def is_scheduled(self, key: str) -> bool:
        return key in self.tasks


class ShardContext:
    """Drives one shard with a fake clock. `codec` round-trips every record."""

    def __init__(self, factory: Callable[[FakeTimer], Any], codec: RecordCodec,
                 now: int = 1_000_000) -> None:
        self.now = now
        self.codec = codec
        self.factory = factory
        self.timer = FakeTimer(self)
        self.shard = factory(self.timer)
        self.shard.on_loaded(now)  # as the runtime does after an (empty) load
        self.log: list[CoordinatorRecord] = []
        self.last_records: list[CoordinatorRecord] = []

    def write(self, op: Callable[[Any, int], Result]) -> Any:
        result = op(self.shard, self.now)
        self._append(result.records)
        return result.response

    def _append(self, records: list[CoordinatorRecord]) -> None:
        self.last_records = []
        for record in records:
            key, value = self.codec.encode(record)
            decoded = self.codec.decode(key, value)  # what a replay would see
            assert decoded is not None
            self.last_records.append(decoded)
            self.shard.replay(len(self.log), -1, -1, decoded)
            self.log.append(decoded)

    def advance(self, ms: int) -> list[CoordinatorRecord]:
        """Move the clock; fire due timers in deadline order; return records they wrote."""
        target = self.now + ms
        written: list[CoordinatorRecord] = []
        while True:
            due = [(deadline, key) for key, (deadline, _) in self.timer.tasks.items()
                   if deadline <= target]
            if not due:
                break
            deadline, key = min(due)
            _, op = self.timer.tasks.pop(key)
            self.now = max(self.now, deadline)
            result = op(self.now)
            self._append(result.records)
            written += self.last_records
        self.now = target
        return written

    def replayed(self) -> Any:
        """A fresh shard rebuilt from every record written so far."""
        fresh_timer = FakeTimer(self)
        shard = self.factory(fresh_timer)
        for offset, record in enumerate(self.log):
            shard.replay(offset, -1, -1, record)
        shard.on_loaded(self.now)
        return shard
