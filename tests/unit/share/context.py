"""A test context for one share-partition: fake clock, and a fake share coordinator
that applies every state write as the real one would (ShareUpdate merged into the
snapshot), so a test can rebuild the partition from what was persisted at any step."""

from __future__ import annotations

from collections.abc import Sequence

from headwater.share import (
    AcknowledgementBatch,
    AcknowledgeResult,
    AcquireMode,
    AcquireResult,
    Outcome,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    ShareSnapshot,
    StateWrite,
    apply_update,
)
from headwater.share.records import combine

ACCEPT, RELEASE, REJECT, RENEW, GAP = 1, 2, 3, 4, 0


class ShareContext:
    def __init__(self, start_offset: int = 0, now: int = 1_000_000,
                 config: SharePartitionConfig | None = None) -> None:
        self.now = now
        self.partition = SharePartition(start_offset, config or SharePartitionConfig())
        # InitializeShareGroupState: the first snapshot holds the start offset only.
        self.persisted = ShareSnapshot(0, 0, 0, start_offset)
        self.writes: list[StateWrite] = []
        self.last_write: StateWrite | None = None

    # ---- driving ------------------------------------------------------------------------
    def _persist(self, outcome: Outcome) -> None:
        self.last_write = outcome.write
        if outcome.write is not None:
            self.writes.append(outcome.write)
            self.persisted = apply_update(self.persisted, outcome.write)

    def acquire(self, member: str, *batches: tuple[int, int], max_records: int = 500,
                mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED, batch_size: int | None = None,
                aborted: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int, int]]:
        result: AcquireResult = self.partition.acquire(
            member, list(batches), max_records, self.now, mode=mode, batch_size=batch_size,
            aborted=aborted)
        self._persist(result)
        return [tuple(r) for r in result.records]

    def ack(self, member: str, *batches: tuple[int, int, int | tuple[int, ...]]
            ) -> AcknowledgeResult:
        acks = [AcknowledgementBatch(f, last, t if isinstance(t, tuple) else (t,))
                for f, last, t in batches]
        result = self.partition.acknowledge(member, acks, self.now)
        self._persist(result)
        return result

    def release(self, member: str) -> int:
        result = self.partition.release_member(member, self.now)
        self._persist(result)
        return result.released

    def advance(self, ms: int) -> int:
        """Move the clock and fire due lock timers, as the caller's timer would."""
        self.now += ms
        result = self.partition.expire_locks(self.now)
        self._persist(result)
        return result.released

    # ---- looking ------------------------------------------------------------------------
    def state(self, offset: int) -> tuple[str, int, str | None] | None:
        v = self.partition.record(offset)
        return None if v is None else (v.state.name, v.delivery_count, v.member_id)

    def states(self, first: int, last: int) -> set[tuple[str, int, str | None] | None]:
        return {self.state(o) for o in range(first, last + 1)}

    def rebuilt(self) -> SharePartition:
        return SharePartition.from_persisted(self.persisted, self.partition.config)

    def check_replay(self) -> None:
        """What the coordinator holds equals the live partition's persisted view."""
        assert_replays(self.partition, self.persisted)


def assert_replays(live: SharePartition, persisted: ShareSnapshot) -> None:
    assert persisted.start_offset == live.start_offset
    implicit_dropped = tuple(b for b in combine((), persisted.state_batches, live.start_offset)
                             if not (b.delivery_state == RecordState.AVAILABLE
                                     and b.delivery_count == 0))
    assert combine((), implicit_dropped, live.start_offset) == live.persisted_batches()
    rebuilt = SharePartition.from_persisted(persisted, live.config)
    assert rebuilt.start_offset == live.start_offset
    assert rebuilt.persisted_batches() == live.persisted_batches()
    for offset in range(live.start_offset, live.end_offset):
        mine = live.record(offset)
        theirs = rebuilt.record(offset)
        expect = ((RecordState.AVAILABLE, max(mine.delivery_count - 1, 0))
                  if mine.state is RecordState.ACQUIRED else (mine.state, mine.delivery_count))
        got = (RecordState.AVAILABLE, 0) if theirs is None else (theirs.state,
                                                                  theirs.delivery_count)
        assert got == expect, (offset, mine, theirs)
