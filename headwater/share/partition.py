"""The share-partition leader: the in-flight window of one (share group, topic-partition).

Theory of operation
-------------------
Records of the partition are handed out from a sliding window [SPSO, SPEO):

* **SPSO** (`start_offset`): the first offset not yet finished. Everything below it is
  ACKNOWLEDGED or ARCHIVED (or was never delivered because the log moved on).
* **SPEO** (`end_offset`, exclusive, as in KIP-932's worked state table): the first offset never
  brought into the window. Records at and after it are implicitly AVAILABLE with delivery
  count 0; they enter the window when a fetch acquires them.
* Every offset in the window has exactly one state (`record_state.py`), kept per batch
  and split per offset only when needed (`inflight.py`).

The window grows at SPEO by `acquire` (bounded by `share.partition.max.record.locks`:
new records are acquired only while SPEO - SPSO is below it; redelivery is not bounded)
and shrinks at SPSO whenever the leading records are finished. A stuck record at the SPSO
therefore throttles the partition, as in Kafka.

Operations (all sans-IO: time is the `now_ms` argument, effects are return values):

* `acquire` gives a member AVAILABLE records of the log batches the caller read from
  `next_fetch_offset()`, as offset ranges with delivery counts (ShareFetch's
  AcquiredRecords), arming an acquisition lock per range.
* `acknowledge` applies ACCEPT / RELEASE / REJECT / GAP / RENEW ranges of one member,
  all or nothing per call with Kafka's error codes.
* `dead_letters` lists the ARCHIVING records (KIP-1191) the caller must write to the
  group's dead-letter topic once the write that made them ARCHIVING is persisted;
  `dead_lettered` then finishes them (ARCHIVED). See `record_state.py`.
* `release_member` returns a leaving member's records; `expire_locks` returns records
  whose lock ran out (every operation also does this first, so the state is right at
  `now_ms` however late a timer fires); `advance_log_start` archives what retention or
  DeleteRecords removed. `next_deadline_ms()` says when to call `expire_locks`.

**Persistence.** Every operation that changes persisted state returns a `StateWrite`
(one partition of WriteShareGroupState: state epoch, start offset or -1, the changed
ranges with their delivery state and count). The caller must persist it before
answering the client and before the next operation on this partition; if the write
fails it calls `rollback(result)`, which puts the partition back exactly as it was (the
acknowledgement then fails, as Kafka's `rollbackOrProcessStateUpdates` does).
Acquisitions are not persisted: the persisted view of an ACQUIRED record is AVAILABLE
with the count before the acquisition, so `from_persisted` brings acquired records back
as AVAILABLE. Offsets missing from persisted state inside the window are AVAILABLE with
count 0 (Kafka's "gap window").
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from .config import AcquireMode, SharePartitionConfig
from .inflight import AVAILABLE_NEW, InFlightBatch, InFlightState
from .outcomes import (
    AcknowledgementBatch,
    AcknowledgeResult,
    AcquiredRecords,
    AcquireResult,
    DeadLetter,
    Outcome,
    ReleaseResult,
)
from .record_state import (
    ACK_EVENTS,
    AcknowledgeType,
    Event,
    RecordState,
    dead_letter_reason,
    inferred_reason,
    step,
)
from .records import UNCHANGED, ShareSnapshot, StateBatch, StateWrite

A = RecordState.AVAILABLE
Q = RecordState.ACQUIRED
ARCHIVING = RecordState.ARCHIVING


@dataclass(slots=True)
class _Undo:
    seq: int
    start: int
    end: int
    persisted_start: int
    batches: list[InFlightBatch]
    firsts: list[int]
    locks: list[tuple[int, int, int]]
    changed: int = 0  # length of `_changed` when saved
    saved: dict[int, tuple[InFlightBatch, tuple[InFlightState | None, list[InFlightState] | None]]] = field(default_factory=dict)


class _Take:
    """Acquired ranges of one `acquire` call, coalesced, and their count."""

    def __init__(self, member_id: str, max_records: int, mode: AcquireMode) -> None:
        self.member_id, self.max, self.mode = member_id, max_records, mode
        self.ranges: list[AcquiredRecords] = []
        self.count = 0

    def add(self, first: int, last: int, delivery_count: int) -> None:
        self.count += last - first + 1
        if self.ranges:
            prev = self.ranges[-1]
            if prev.last_offset + 1 == first and prev.delivery_count == delivery_count:
                self.ranges[-1] = prev._replace(last_offset=last)
                return
        self.ranges.append(AcquiredRecords(first, last, delivery_count))


class SharePartition:
    """The state of one share-partition on its leader. See the module docstring."""

    def __init__(self, start_offset: int, config: SharePartitionConfig | None = None, *,
                 state_epoch: int = 0, leader_epoch: int = 0) -> None:
        self.config = config or SharePartitionConfig()
        self.state_epoch = state_epoch
        self.leader_epoch = leader_epoch
        self._start = start_offset
        self._end = start_offset
        self._batches: list[InFlightBatch] = []
        self._firsts: list[int] = []  # first offsets of _batches, for bisect
        self._locks: list[tuple[int, int, int]] = []  # heap of (deadline, first, last)
        self._persisted_start = start_offset
        self._seq = 0
        self._undo: _Undo | None = None
        self._saves: list[_Undo] = []  # the undo point and any savepoints of this operation
        self._changed: list[tuple[int, int]] = []  # ranges the current operation changed
        self._expired = 0  # records the current operation's lock expiry released

    @classmethod
    def from_persisted(cls, snapshot: ShareSnapshot, config: SharePartitionConfig | None = None,
                       *, start_offset: int | None = None,
                       leader_epoch: int | None = None) -> SharePartition:
        """Rebuild from the share coordinator's state (ReadShareGroupState). A persisted
        start offset of -1 means "not initialized": `start_offset` (from
        `initial_start_offset`) is used, and written with the first state write."""
        start = snapshot.start_offset
        if start < 0:
            if start_offset is None:
                raise ValueError("no persisted start offset: pass start_offset")
            start = start_offset
        part = cls(start, config, state_epoch=snapshot.state_epoch,
                   leader_epoch=snapshot.leader_epoch if leader_epoch is None else leader_epoch)
        part._persisted_start = snapshot.start_offset
        cursor = start
        for batch in sorted(snapshot.state_batches, key=lambda b: b.first_offset):
            lo, hi = max(batch.first_offset, cursor), batch.last_offset
            if hi < lo:
                continue
            if lo > cursor:  # not persisted: never delivered
                part._append(InFlightBatch(cursor, lo - 1, AVAILABLE_NEW))
            state = RecordState(batch.delivery_state)
            part._append(InFlightBatch(lo, hi, InFlightState(
                A if state is Q else state, batch.delivery_count)))
            cursor = hi + 1
        part._end = cursor
        part._advance_start()
        return part

    # ---- reading --------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        """SPSO."""
        return self._start

    @property
    def end_offset(self) -> int:
        """SPEO (exclusive)."""
        return self._end

    @property
    def in_flight(self) -> int:
        return self._end - self._start

    def record(self, offset: int) -> InFlightState | None:
        """The state of `offset` if it is in the window."""
        if not self._start <= offset < self._end:
            return None
        return self._batches[bisect_right(self._firsts, offset) - 1].state_at(offset)

    def runs(self) -> Iterator[tuple[int, int, InFlightState]]:
        """The window as maximal (first, last, state) ranges per in-flight batch."""
        for batch in self._batches:
            yield from batch.runs(self._start, self._end - 1)

    def next_fetch_offset(self) -> int:
        """Where the caller should read the log for the next `acquire`: the first
        AVAILABLE offset in the window, else SPEO."""
        for first, _last, value in self.runs():
            if value.state is A:
                return first
        return self._end

    def can_acquire(self) -> bool:
        """Whether an `acquire` could hand out anything (else a fetch should wait)."""
        return (self.in_flight < self.config.max_record_locks
                or any(v.state is A for _f, _l, v in self.runs()))

    def next_deadline_ms(self) -> int | None:
        """The earliest acquisition-lock deadline (when to call `expire_locks`)."""
        while self._locks:
            deadline, first, last = self._locks[0]
            if any(v.state is Q and v.deadline_ms == deadline
                   for b in self._overlapping(first, last) for _f, _l, v in b.runs(first, last)):
                return deadline
            heapq.heappop(self._locks)  # stale: acknowledged, renewed or released
        return None

    def delivery_complete_count(self) -> int:
        """Finished (ACKNOWLEDGED/ARCHIVED) offsets in the window (KIP-1226 lag)."""
        return sum(last - first + 1 for first, last, v in self.runs() if v.state.is_terminal)

    def persisted_batches(self) -> tuple[StateBatch, ...]:
        """What the share coordinator holds for the window once every write is applied:
        ACQUIRED shown as AVAILABLE with its count before acquisition, and the implicit
        AVAILABLE/0 ranges left out."""
        out: list[StateBatch] = []
        for first, last, v in self.runs():
            state, count = _persisted(v)
            if state == A and count == 0:
                continue
            _push(out, first, last, state, count)
        return tuple(out)

    # ---- operations -----------------------------------------------------------------

    def acquire(self, member_id: str, batches_available: Sequence[tuple[int, int]],
                max_records: int, now_ms: int, *,
                mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED, batch_size: int | None = None,
                aborted: Sequence[tuple[int, int]] = ()) -> AcquireResult:
        """Acquire for `member_id` what is AVAILABLE in the log batches read from
        `next_fetch_offset()` (`batches_available`: (first, last) offsets in log order).

        BATCH_OPTIMIZED takes whole batches until `max_records` is reached (so it may
        exceed it); RECORD_LIMIT never exceeds it, cutting a batch. New records are put
        in in-flight batches of about `batch_size` records (ShareFetch BatchSize, default
        `max_records`) cut at log batch boundaries. `aborted` ranges (aborted
        transactions under read_committed) never become deliverable: they enter the
        window ARCHIVED. Holes between log batches (compaction) are handed out with
        their neighbours, and the client acknowledges them as GAP, as in Kafka.
        """
        self._begin(now_ms)
        take = _Take(member_id, max_records, mode)
        logs = [(max(f, self._start), last) for f, last in batches_available
                if last >= self._start]
        if logs and max_records > 0:
            stopped = self._acquire_cached(take, logs[0][0], min(logs[-1][1], self._end - 1),
                                           now_ms)
            new = [(max(f, self._end), last) for f, last in logs if last >= self._end]
            if not stopped and new:
                self._acquire_new(take, new, batch_size or max_records, aborted, now_ms)
        return AcquireResult(self._finish(), self._seq, tuple(take.ranges), take.count)

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch],
                    now_ms: int) -> AcknowledgeResult:
        """Apply a member's acknowledgements. Offsets below the SPSO are ignored (already
        finished). Errors, per batch: INVALID_REQUEST for an unknown type, a types list
        of the wrong length, or offsets past the window; INVALID_RECORD_STATE for an empty
        window or a record not ACQUIRED by this member (not acquired, acquired by another,
        lock expired, already acknowledged). Any error undoes the whole call."""
        self._begin(now_ms)
        savepoint = self._savepoint()  # after lock expiry, which stands either way
        errors = tuple(self._acknowledge_one(member_id, b, now_ms) for b in batches)
        error = next((e for e in errors if e != ErrorCode.none), ErrorCode.none)
        if error != ErrorCode.none:
            self._restore(savepoint)
        return AcknowledgeResult(self._finish(), self._seq, error, errors)

    def release_member(self, member_id: str, now_ms: int) -> ReleaseResult:
        """A member left the group or closed its share session: its ACQUIRED records go
        back to AVAILABLE with the delivery count kept (see `record_state.py`)."""
        self._begin(now_ms)

        def release(v: InFlightState) -> InFlightState | None:
            if v.state is Q and v.member_id == member_id:
                return self._next(v, Event.MEMBER_LEFT, now_ms)
            return None
        released = self._transition_all(release)
        return ReleaseResult(self._finish(), self._seq, released)

    def expire_locks(self, now_ms: int) -> ReleaseResult:
        """Return records whose acquisition lock expired to AVAILABLE (ARCHIVED at the
        delivery-count limit). Kafka applies this even if the state write fails."""
        self._begin(now_ms)
        return ReleaseResult(self._finish(), self._seq, self._expired)

    def advance_log_start(self, log_start_offset: int, now_ms: int) -> ReleaseResult:
        """Retention or DeleteRecords moved the log start: records below it can no longer
        be delivered, so they are archived (acquired ones too: their data is gone) and the
        SPSO moves to at least `log_start_offset`."""
        self._begin(now_ms)
        archived = 0
        if log_start_offset > self._start:
            hi = min(log_start_offset, self._end) - 1

            def archive(v: InFlightState) -> InFlightState | None:
                # ARCHIVING stays: its dead letter is still due (headers only, the
                # record's data being gone).
                return self._next(v, Event.ARCHIVE, now_ms) if v.state in (A, Q) else None
            for batch in list(self._overlapping(self._start, hi)):
                lo, top = max(self._start, batch.first_offset), min(hi, batch.last_offset)
                archived += self._transition(batch, lo, top, archive)
            if log_start_offset >= self._end:
                self._end = log_start_offset
        return ReleaseResult(self._finish(), self._seq, archived)

    def dead_letters(self) -> list[DeadLetter]:
        """The ARCHIVING records of the window, as ranges of one delivery count and
        reason (the reason of a record read back after a restart is inferred)."""
        out: list[DeadLetter] = []
        limit = self.config.delivery_count_limit
        for first, last, v in self.runs():
            if v.state is not ARCHIVING:
                continue
            reason = v.reason or inferred_reason(v.delivery_count, limit)
            prev = out[-1] if out else None
            if (prev is not None and prev.last_offset + 1 == first
                    and prev[2:] == (v.delivery_count, reason)):
                out[-1] = prev._replace(last_offset=last)
            else:
                out.append(DeadLetter(first, last, v.delivery_count, reason))
        return out

    def dead_lettered(self, letters: Sequence[DeadLetter], now_ms: int) -> ReleaseResult:
        """The dead letters of `letters` (from `dead_letters`) are written: those
        offsets, still ARCHIVING, become ARCHIVED, and the SPSO may move past them."""
        self._begin(now_ms)

        def done(v: InFlightState) -> InFlightState | None:
            return self._next(v, Event.DEAD_LETTERED, now_ms) if v.state is ARCHIVING else None
        finished = 0
        for letter in letters:
            for batch in list(self._overlapping(letter.first_offset, letter.last_offset)):
                lo = max(letter.first_offset, batch.first_offset, self._start)
                hi = min(letter.last_offset, batch.last_offset)
                if lo <= hi:
                    finished += self._transition(batch, lo, hi, done)
        return ReleaseResult(self._finish(), self._seq, finished)

    def rollback(self, outcome: Outcome) -> None:
        """Undo the operation that returned `outcome`, whose write failed. Only the last
        operation can be undone."""
        if self._undo is None or outcome.seq != self._seq or self._undo.seq != outcome.seq:
            raise RuntimeError("rollback must directly follow the operation it undoes")
        self._restore()

    # ---- acquisition ----------------------------------------------------------------

    def _acquire_cached(self, take: _Take, lo: int, hi: int, now_ms: int) -> bool:
        """Acquire AVAILABLE records already in the window; True: stop acquiring."""
        limit, throttle = self.config.delivery_count_limit, self.config.throttle_limit
        record_limit = take.mode is AcquireMode.RECORD_LIMIT
        for batch in list(self._overlapping(lo, hi)):
            if take.count >= take.max:
                return True
            a, b = max(lo, batch.first_offset), min(hi, batch.last_offset)
            counts = [v.delivery_count for _f, _l, v in batch.runs(a, b) if v.state is A]
            if not counts:
                continue
            throttled = max(counts) >= throttle
            if throttled and take.count > 0:
                return True  # isolate it: deliver it at the head of a later fetch
            remaining = take.max - take.count
            if (not batch.is_split and a == batch.first_offset and b == batch.last_offset
                    and not throttled and not (record_limit and len(batch) > remaining)):
                self._touch(batch)
                assert batch.whole is not None  # not split
                batch.whole = self._next(batch.whole, Event.ACQUIRE, now_ms, take.member_id)
                take.add(a, b, batch.whole.delivery_count)
                self._arm(batch.whole.deadline_ms, a, b)
                continue
            self._touch(batch)
            got, stop, cap = 0, False, None
            for offset in range(a, b + 1):
                v = batch.state_at(offset)
                if v.state is not A:
                    continue
                if limit > 2 and v.delivery_count == limit - 1 and take.count > 0:
                    stop = True  # its last delivery goes out alone
                    break
                if v.delivery_count >= throttle and cap is None:
                    # Halve the piece per attempt past the throttle limit (Kafka).
                    cap = max(1, len(batch) >> (v.delivery_count - throttle + 1))
                new = self._next(v, Event.ACQUIRE, now_ms, take.member_id)
                batch.set(offset, new)
                take.add(offset, offset, new.delivery_count)
                self._arm(new.deadline_ms, offset, offset)
                got += 1
                if limit > 2 and new.delivery_count == limit:
                    stop = True
                    break
                if (record_limit and got >= remaining) or (cap is not None and got >= cap):
                    break
            batch.maybe_merge()
            if stop or (throttled and got > 0):
                return True
        return False

    def _acquire_new(self, take: _Take, logs: list[tuple[int, int]], batch_size: int,  # noqa: C901
                     aborted: Sequence[tuple[int, int]], now_ms: int) -> None:
        """Bring new records (at and after SPEO) into the window, acquired."""
        first_new = logs[0][0]
        if first_new > self._end:  # nothing in the log in between (compaction, retention)
            if not self._batches:
                self._start = self._end = first_new
            else:
                self._append(InFlightBatch(self._end, first_new - 1,
                                           InFlightState(RecordState.ARCHIVED, 0)))
                self._changed.append((self._end, first_new - 1))
                self._end = first_new
        room = self.config.max_record_locks - self.in_flight
        remaining = take.max - take.count
        if room <= 0 or remaining <= 0:
            return
        if take.mode is AcquireMode.RECORD_LIMIT:
            pieces = [(self._end, min(logs[-1][1], self._end + min(room, remaining) - 1))]
        else:
            cap_last = self._start + self.config.max_record_locks - 1
            pieces, cursor, taken = [], self._end, 0
            for _first, last in logs:
                if taken >= remaining or cursor > cap_last:
                    break
                if last < cursor:
                    continue
                pieces.append((cursor, last))  # a hole before `first` goes with it
                taken += last - cursor + 1
                cursor = last + 1
        if not pieces:
            return
        lock = InFlightState(Q, 1, take.member_id, now_ms + self.config.record_lock_duration_ms)
        group_first, group_last = pieces[0]
        groups = []
        for first, last in pieces[1:]:
            if first - group_first >= batch_size:
                groups.append((group_first, group_last))
                group_first = first
            group_last = last
        groups.append((group_first, group_last))
        skip = _clip(aborted, pieces[0][0], group_last)
        for first, last in groups:
            batch = InFlightBatch(first, last, lock)
            self._append(batch)
            for a, b in skip:
                if a <= last and b >= first:
                    for offset in range(max(a, first), min(b, last) + 1):
                        batch.set(offset, InFlightState(RecordState.ARCHIVED, 0))
                    self._changed.append((max(a, first), min(b, last)))
            for a, b, v in batch.runs():
                if v.state is Q:
                    take.add(a, b, 1)
            self._arm(lock.deadline_ms, first, last)
        self._end = group_last + 1

    # ---- acknowledgement ----------------------------------------------------------------

    def _acknowledge_one(self, member_id: str, ack: AcknowledgementBatch, now_ms: int) -> int:
        types = ack.acknowledge_types
        size = ack.last_offset - ack.first_offset + 1
        if (size <= 0 or len(types) not in (1, size)
                or any(t not in ACK_EVENTS for t in types)):
            return ErrorCode.invalid_request
        if ack.last_offset < self._start:
            return ErrorCode.none
        if self._start == self._end:
            return ErrorCode.invalid_record_state
        if ack.first_offset >= self._end or ack.last_offset >= self._end:
            return ErrorCode.invalid_request
        first = max(ack.first_offset, self._start)
        all_renew = all(t == AcknowledgeType.RENEW for t in types)
        for batch in list(self._overlapping(first, ack.last_offset)):
            lo, hi = max(first, batch.first_offset), min(ack.last_offset, batch.last_offset)
            self._touch(batch)
            if len(types) == 1 and not batch.is_split and (lo, hi) == (
                    batch.first_offset, batch.last_offset):
                v = batch.whole
                assert v is not None  # not split
                if v.state is not Q or v.member_id != member_id:
                    return ErrorCode.invalid_record_state
                batch.whole = self._next(v, ACK_EVENTS[types[0]], now_ms)
            else:
                for offset in range(lo, hi + 1):
                    v = batch.state_at(offset)
                    if v.state is not Q or v.member_id != member_id:
                        return ErrorCode.invalid_record_state
                    kind = types[0] if len(types) == 1 else types[offset - ack.first_offset]
                    batch.set(offset, self._next(v, ACK_EVENTS[kind], now_ms))
                batch.maybe_merge()
            if AcknowledgeType.RENEW in types:
                self._arm(now_ms + self.config.record_lock_duration_ms, lo, hi)
            if not all_renew:
                self._changed.append((lo, hi))
        return ErrorCode.none

    # ---- machinery ----------------------------------------------------------------------

    def _next(self, v: InFlightState, event: Event, now_ms: int,
              member_id: str | None = None) -> InFlightState:
        found = step(v.state, event, v.delivery_count, self.config.delivery_count_limit,
                     self.config.dead_letter)
        assert found is not None, (v, event)  # callers check the state first
        count = max(v.delivery_count + found.count, 0)
        if found.state is Q:
            owner = member_id if event is Event.ACQUIRE else v.member_id
            return InFlightState(Q, count, owner, now_ms + self.config.record_lock_duration_ms)
        if found.state is ARCHIVING:
            return InFlightState(ARCHIVING, count, reason=dead_letter_reason(event))
        return InFlightState(found.state, count)

    def _savepoint(self) -> _Undo:
        save = _Undo(self._seq, self._start, self._end, self._persisted_start,
                     list(self._batches), list(self._firsts), list(self._locks),
                     changed=len(self._changed))
        self._saves.append(save)
        return save

    def _begin(self, now_ms: int) -> None:
        """Start an operation: save what `rollback` needs, then expire due locks."""
        self._seq += 1
        self._saves = []
        self._changed = []
        self._undo = self._savepoint()
        self._expired = 0
        while self._locks and self._locks[0][0] <= now_ms:
            _deadline, first, last = heapq.heappop(self._locks)

            def expire(v: InFlightState) -> InFlightState | None:
                if v.state is Q and v.deadline_ms is not None and v.deadline_ms <= now_ms:
                    return self._next(v, Event.LOCK_TIMEOUT, now_ms)
                return None
            for batch in list(self._overlapping(first, last)):
                lo, hi = max(first, batch.first_offset), min(last, batch.last_offset)
                self._expired += self._transition(batch, lo, hi, expire)

    def _finish(self) -> StateWrite | None:
        """End an operation: move the SPSO, and build the write for what changed."""
        self._advance_start()
        out: list[StateBatch] = []
        for lo, hi in _union(self._changed, self._start, self._end - 1):
            for batch in self._overlapping(lo, hi):
                for first, last, v in batch.runs(lo, hi):
                    _push(out, first, last, *_persisted(v))
        start = UNCHANGED if self._start == self._persisted_start else self._start
        if not out and start == UNCHANGED:
            return None
        self._persisted_start = self._start
        return StateWrite(self.state_epoch, self.leader_epoch, start,
                          self.delivery_complete_count(), tuple(out))

    def _restore(self, undo: _Undo | None = None) -> None:
        """Back to the operation's start (`rollback`) or to a savepoint within it."""
        undo = undo or self._undo
        assert undo is not None
        for batch, saved in undo.saved.values():
            batch.restore(saved)
        self._start, self._end, self._persisted_start = undo.start, undo.end, undo.persisted_start
        self._batches, self._firsts = list(undo.batches), list(undo.firsts)
        self._locks = list(undo.locks)
        del self._changed[undo.changed:]
        if undo is self._undo:
            self._undo = None

    def _touch(self, batch: InFlightBatch) -> None:
        """Save `batch` before its first change in every open savepoint."""
        for save in self._saves:
            if id(batch) not in save.saved:
                save.saved[id(batch)] = (batch, batch.saved())

    def _transition(self, batch: InFlightBatch, lo: int, hi: int,
                    fn: Callable[[InFlightState], InFlightState | None]) -> int:
        """Apply `fn` to the offsets lo..hi of `batch`; returns how many changed."""
        self._touch(batch)
        if not batch.is_split and lo == batch.first_offset and hi == batch.last_offset:
            assert batch.whole is not None  # not split
            new = fn(batch.whole)
            if new is None:
                return 0
            batch.whole = new
            self._changed.append((lo, hi))
            return hi - lo + 1
        changed = 0
        for offset in range(lo, hi + 1):
            new = fn(batch.state_at(offset))
            if new is not None:
                batch.set(offset, new)
                changed += 1
                if self._changed and self._changed[-1][1] == offset - 1:
                    self._changed[-1] = (self._changed[-1][0], offset)
                else:
                    self._changed.append((offset, offset))
        if changed:
            batch.maybe_merge()
        return changed

    def _transition_all(self, fn: Callable[[InFlightState], InFlightState | None]) -> int:
        return sum(self._transition(b, b.first_offset, b.last_offset, fn)
                   for b in list(self._batches))

    def _advance_start(self) -> None:
        """Move the SPSO past the finished prefix, dropping finished batches."""
        drop, start = 0, self._start
        for batch in self._batches:
            first = batch.first_not_terminal()
            if first is None:
                drop += 1
                start = batch.last_offset + 1
                continue
            start = max(start, first)
            break
        if drop:
            del self._batches[:drop]
            del self._firsts[:drop]
        if not self._batches:
            start = self._end
        self._start = max(self._start, start)

    def _append(self, batch: InFlightBatch) -> None:
        self._batches.append(batch)
        self._firsts.append(batch.first_offset)

    def _arm(self, deadline: int | None, first: int, last: int) -> None:
        if deadline is not None:
            heapq.heappush(self._locks, (deadline, first, last))

    def _overlapping(self, first: int, last: int) -> Iterator[InFlightBatch]:
        i = max(bisect_right(self._firsts, first) - 1, 0)
        batches = self._batches
        while i < len(batches) and batches[i].first_offset <= last:
            if batches[i].last_offset >= first:
                yield batches[i]
            i += 1


def _persisted(v: InFlightState) -> tuple[RecordState, int]:
    """The persisted view of a state: an acquisition is never written."""
    if v.state is Q:
        return A, max(v.delivery_count - 1, 0)
    return v.state, v.delivery_count


def _push(out: list[StateBatch], first: int, last: int, state: RecordState, count: int) -> None:
    if (out and out[-1].last_offset + 1 == first and out[-1].delivery_state == state
            and out[-1].delivery_count == count):
        out[-1] = StateBatch(out[-1].first_offset, last, int(state), count)
    else:
        out.append(StateBatch(first, last, int(state), count))


def _union(ranges: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    """Sorted, merged `ranges` clipped to [lo, hi]."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(_clip(ranges, lo, hi)):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _clip(ranges: Sequence[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    return [(max(a, lo), min(b, hi)) for a, b in ranges if b >= lo and a <= hi]
