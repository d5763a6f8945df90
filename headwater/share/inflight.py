"""In-flight records of a share-partition: one state per batch, split per offset on demand.

A fetch hands out whole producer batches, and most acknowledgements cover exactly what
was handed out, so the common case needs one `InFlightState` per batch (Kafka's
`InFlightBatch.batchState`). Only when the offsets of a batch diverge (an acknowledgement
or acquisition that covers part of it, per-offset acknowledge types, a batch the start
offset moved into) is the batch split into one state per offset (`offsetState`). A split
batch whose offsets all end up equal again is merged back.

States are immutable values, so the leader can save a batch's state before an operation
and put it back (see `SharePartition.rollback`) with a shallow copy.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from .record_state import DeadLetterReason, RecordState


class InFlightState(NamedTuple):
    """One record's (or a whole batch's) state. `member_id` and `deadline_ms` (the
    acquisition lock's expiry) are set only while ACQUIRED; `reason` only while
    ARCHIVING, and only when known (it is not persisted)."""

    state: RecordState
    delivery_count: int
    member_id: str | None = None
    deadline_ms: int | None = None
    reason: DeadLetterReason | None = None


AVAILABLE_NEW = InFlightState(RecordState.AVAILABLE, 0)


@dataclass(slots=True)
class InFlightBatch:
    """Offsets `first_offset..last_offset` (inclusive): `whole` is their common state
    until the batch is split; then `offsets[i]` is the state of `first_offset + i`."""

    first_offset: int
    last_offset: int
    whole: InFlightState | None
    offsets: list[InFlightState] | None = None

    def __len__(self) -> int:
        return self.last_offset - self.first_offset + 1

    @property
    def is_split(self) -> bool:
        return self.offsets is not None

    def state_at(self, offset: int) -> InFlightState:
        if self.offsets is None:
            assert self.whole is not None
            return self.whole
        return self.offsets[offset - self.first_offset]

    def split(self) -> None:
        if self.offsets is None:
            self.offsets = [self.whole] * len(self)  # type: ignore[list-item]
            self.whole = None

    def set(self, offset: int, value: InFlightState) -> None:
        if self.offsets is None:
            self.split()
        self.offsets[offset - self.first_offset] = value  # type: ignore[index]

    def maybe_merge(self) -> None:
        """Back to one state when every offset has the same one."""
        if self.offsets is not None:
            head = self.offsets[0]
            if all(s == head for s in self.offsets):
                self.whole, self.offsets = head, None

    def runs(self, first: int | None = None, last: int | None = None
             ) -> Iterator[tuple[int, int, InFlightState]]:
        """Maximal ranges of equal state within [first, last] ∩ the batch."""
        lo = self.first_offset if first is None else max(first, self.first_offset)
        hi = self.last_offset if last is None else min(last, self.last_offset)
        if lo > hi:
            return
        if self.offsets is None:
            assert self.whole is not None
            yield lo, hi, self.whole
            return
        start, current = lo, self.offsets[lo - self.first_offset]
        for offset in range(lo + 1, hi + 1):
            value = self.offsets[offset - self.first_offset]
            if value != current:
                yield start, offset - 1, current
                start, current = offset, value
        yield start, hi, current

    def first_not_terminal(self) -> int | None:
        """The first offset whose state is not ACKNOWLEDGED/ARCHIVED, if any (ARCHIVING
        is not finished)."""
        for lo, _hi, value in self.runs():
            if not value.state.is_terminal:
                return lo
        return None

    def saved(self) -> tuple[InFlightState | None, list[InFlightState] | None]:
        return self.whole, None if self.offsets is None else list(self.offsets)

    def restore(self, saved: tuple[InFlightState | None, list[InFlightState] | None]) -> None:
        self.whole, self.offsets = saved
