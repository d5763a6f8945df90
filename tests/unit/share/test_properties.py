"""Random sequences of operations (seeded) against the invariants of the leader:

* every offset in [SPSO, SPEO) is in exactly one state (the in-flight batches tile it);
* the SPSO is the first unfinished offset, and never moves backwards;
* no offset is acquired by two members (acquire only hands out AVAILABLE or new ones);
* the delivery count never exceeds the limit, and an AVAILABLE record is below it;
* an acquisition lock never outlives its deadline;
* the persisted state (every write merged as the share coordinator does) replays to
  the same state, and a restart from it loses nothing finished.
"""

from __future__ import annotations

import random

import pytest

from headwater.share import (
    AcknowledgementBatch,
    AcquireMode,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    apply_update,
)
from tests.unit.share.context import ShareContext, assert_replays

MEMBERS = ("m1", "m2", "m3")


def log_batches(rng: random.Random, end: int) -> list[tuple[int, int]]:
    out, offset = [], 0
    while offset < end:
        size = rng.randint(1, 8)
        out.append((offset, offset + size - 1))
        offset += size + (rng.randint(1, 3) if rng.random() < 0.05 else 0)  # compaction hole
    return out


def check_invariants(c: ShareContext, limit: int, rolled_back: bool = False) -> None:
    p = c.partition
    batches = p._batches
    if p.start_offset == p.end_offset:
        assert batches == []
    else:
        assert batches[0].first_offset <= p.start_offset
        assert batches[-1].last_offset == p.end_offset - 1
        for a, b in zip(batches, batches[1:], strict=False):
            assert a.last_offset + 1 == b.first_offset
        assert p._firsts == [b.first_offset for b in batches]
        assert not p.record(p.start_offset).state.is_terminal
    for first, last, v in p.runs():
        assert first >= p.start_offset and last < p.end_offset
        assert 0 <= v.delivery_count <= limit
        if v.state is RecordState.AVAILABLE:
            assert v.delivery_count < limit
            assert v.member_id is None
        if v.state is RecordState.ACQUIRED:
            assert v.member_id in MEMBERS
            # a rollback may restore a lock that is already due; the next call expires it
            assert rolled_back or v.deadline_ms > c.now
        elif v.deadline_ms is not None:
            raise AssertionError(v)


@pytest.mark.parametrize("seed", range(40))
def test_random_operations_keep_the_invariants(seed: int) -> None:
    rng = random.Random(seed)
    limit = rng.choice((2, 3, 5))
    config = SharePartitionConfig(record_lock_duration_ms=rng.choice((1_000, 5_000)),
                                  delivery_count_limit=limit,
                                  max_record_locks=rng.choice((20, 50, 200)))
    c = ShareContext(start_offset=0, config=config)
    log = log_batches(rng, 400)
    log_start = 0
    for _ in range(300):
        p = c.partition
        before = p.start_offset
        snapshot = (p.start_offset, p.end_offset, list(p.runs()))
        op = rng.random()
        if op < 0.35:
            member = rng.choice(MEMBERS)
            nfo = p.next_fetch_offset()
            read = [b for b in log if b[1] >= nfo][: rng.randint(0, 12)]
            held = {o: p.record(o) for b in read for o in range(b[0], b[1] + 1)}
            mode = rng.choice(list(AcquireMode))
            aborted = [rng.choice(read)] if read and rng.random() < 0.1 else []
            max_records = rng.randint(1, 30)
            result = p.acquire(member, read, max_records, c.now, mode=mode,
                               batch_size=rng.choice((None, 4, 16)), aborted=aborted)
            for first, last, count in result.records:
                assert 1 <= count <= limit
                for o in range(first, last + 1):
                    prior = held.get(o)
                    # never taken from another member (expired locks were released first)
                    assert prior is None or prior.state is not RecordState.ACQUIRED \
                        or prior.deadline_ms <= c.now, (o, prior)
            if mode is AcquireMode.RECORD_LIMIT:
                assert result.count <= max_records
            outcome = result
        elif op < 0.7:
            member = rng.choice(MEMBERS)
            acks = []
            for _ in range(rng.randint(1, 3)):
                first = rng.randint(max(p.start_offset - 3, 0), p.end_offset + 2)
                last = first + rng.randint(0, 6)
                if rng.random() < 0.5:
                    types = (rng.choice((0, 1, 2, 3, 4, 1, 2)),)
                else:
                    types = tuple(rng.choice((0, 1, 2, 3, 4)) for _ in range(last - first + 1))
                acks.append(AcknowledgementBatch(first, last, types))
            outcome = p.acknowledge(member, acks, c.now)
        elif op < 0.8:
            outcome = p.release_member(rng.choice(MEMBERS), c.now)
        elif op < 0.95:
            c.now += rng.randint(0, 2 * config.record_lock_duration_ms)
            outcome = p.expire_locks(c.now)
        else:
            log_start += rng.randint(0, 10)
            outcome = p.advance_log_start(log_start, c.now)
        rolled_back = outcome.write is not None and rng.random() < 0.1
        if rolled_back:
            p.rollback(outcome)  # the state write failed: exactly as before
            assert (p.start_offset, p.end_offset, list(p.runs())) == snapshot
        else:
            c._persist(outcome)
            assert p.start_offset >= before
        check_invariants(c, limit, rolled_back)
        assert_replays(p, c.persisted)
        if rng.random() < 0.03:  # restart: rebuild from what was persisted
            c.partition = SharePartition.from_persisted(c.persisted, config)
            assert c.partition.start_offset == p.start_offset
            check_invariants(c, limit)


def test_writes_replay_in_any_grouping() -> None:
    """Merging writes one by one or after a snapshot gives the same state (what a
    coordinator that snapshots every N updates relies on)."""
    rng = random.Random(7)
    c = ShareContext(config=SharePartitionConfig(delivery_count_limit=3))
    log = log_batches(rng, 200)
    for _ in range(200):
        p = c.partition
        if rng.random() < 0.5:
            c._persist(p.acquire(rng.choice(MEMBERS), log[:10], 10, c.now))
        else:
            first = rng.randint(p.start_offset, p.end_offset)
            c._persist(p.acknowledge(rng.choice(MEMBERS), [AcknowledgementBatch(
                first, first + rng.randint(0, 4), (rng.choice((1, 2, 3)),))], c.now))
        log = [b for b in log if b[1] >= p.next_fetch_offset()] or log
    split = len(c.writes) // 2
    snap = c.persisted.__class__(0, 0, 0, 0)
    for w in c.writes[:split]:
        snap = apply_update(snap, w)
    for w in c.writes[split:]:
        snap = apply_update(snap, w)
    assert snap == c.persisted
    assert_replays(c.partition, snap)
