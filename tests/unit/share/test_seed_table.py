"""Seed 001's worked table as a story: after every row, the SPSO, SPEO, every record's
state and delivery count, and the WriteShareGroupState payload are the table's.

Two rows differ in the write payload, not in the state (both replay to the same state;
docs/architecture.md gives the reasons):
* "Acknowledge 119": the seed also writes 111-118 as Available/0, filling the range up
  to 119; we write only 119, since offsets missing from the persisted state are
  Available/0 anyway (Kafka's gap window).
* "Acknowledge 110": the seed writes StartOffset -1 and 110 Acknowledged; we write the
  new SPSO (111) and no batch, as the seed itself does in the "Acknowledge 100-109"
  and "Acknowledge 111, 112" rows.
"""

from __future__ import annotations

from headwater.share import StateBatch
from tests.unit.share.context import ACCEPT, RELEASE, ShareContext

AVAILABLE, ACKED = 0, 2


def window(c: ShareContext) -> dict[int, tuple[str, int]]:
    p = c.partition
    return {o: (v.state.name, v.delivery_count)
            for o in range(p.start_offset, p.end_offset) if (v := p.record(o)) is not None}


def expect(c: ShareContext, spso: int, speo: int, records: dict[tuple[int, int], tuple[str, int]],
           write: tuple[int, list[StateBatch]] | None) -> None:
    assert (c.partition.start_offset, c.partition.end_offset) == (spso, speo)
    want = {o: value for (first, last), value in records.items() for o in range(first, last + 1)}
    assert window(c) == want
    if write is None:
        assert c.last_write is None
    else:
        assert c.last_write is not None
        assert (c.last_write.start_offset, list(c.last_write.state_batches)) == write
    c.check_replay()


def test_seed_001_worked_table():
    t0 = 1_000_000
    c = ShareContext(start_offset=100, now=t0)
    # Starting state of topic-partition with latest offset 100
    expect(c, 100, 100, {}, None)
    assert c.persisted.start_offset == 100 and c.persisted.state_batches == ()

    # Fetch records 100-109
    assert c.acquire("c1", (100, 109)) == [(100, 109, 1)]
    expect(c, 100, 110, {(100, 109): ("ACQUIRED", 1)}, None)

    # Acknowledge 100-109
    c.ack("c1", (100, 109, ACCEPT))
    expect(c, 110, 110, {}, (110, []))

    # Fetch records 110-119: consumer 1 gets 110-112, 2 gets 113-118, 3 gets 119
    log = [(110, 112), (113, 118), (119, 119)]
    assert c.acquire("c1", *log, max_records=3) == [(110, 112, 1)]
    c.now = t0 + 1_000
    assert c.acquire("c2", *log, max_records=6) == [(113, 118, 1)]
    assert c.acquire("c3", *log, max_records=1) == [(119, 119, 1)]
    expect(c, 110, 120, {(110, 119): ("ACQUIRED", 1)}, None)

    # Release 110 (consumer 1)
    c.ack("c1", (110, 110, RELEASE))
    expect(c, 110, 120, {(110, 110): ("AVAILABLE", 1), (111, 119): ("ACQUIRED", 1)},
           (-1, [StateBatch(110, 110, AVAILABLE, 1)]))

    # Acknowledge 119 (consumer 3) -- seed also writes 111-118 Available/0 (see above)
    c.ack("c3", (119, 119, ACCEPT))
    expect(c, 110, 120, {(110, 110): ("AVAILABLE", 1), (111, 118): ("ACQUIRED", 1),
                         (119, 119): ("ACKNOWLEDGED", 1)},
           (-1, [StateBatch(119, 119, ACKED, 1)]))

    # Fetch records 110, 120 (consumer 1)
    c.now = t0 + 2_000
    assert c.acquire("c1", *log, (120, 120)) == [(110, 110, 2), (120, 120, 1)]
    expect(c, 110, 121, {(110, 110): ("ACQUIRED", 2), (111, 118): ("ACQUIRED", 1),
                         (119, 119): ("ACKNOWLEDGED", 1), (120, 120): ("ACQUIRED", 1)}, None)

    # Lock timeout elapsed 111, 112 (consumer 1's records)
    assert c.advance(t0 + 30_000 - c.now) == 2
    expect(c, 110, 121, {(110, 110): ("ACQUIRED", 2), (111, 112): ("AVAILABLE", 1),
                         (113, 118): ("ACQUIRED", 1), (119, 119): ("ACKNOWLEDGED", 1),
                         (120, 120): ("ACQUIRED", 1)},
           (-1, [StateBatch(111, 112, AVAILABLE, 1)]))

    # Acknowledge 113-118 (consumer 2)
    c.ack("c2", (113, 118, ACCEPT))
    expect(c, 110, 121, {(110, 110): ("ACQUIRED", 2), (111, 112): ("AVAILABLE", 1),
                         (113, 119): ("ACKNOWLEDGED", 1), (120, 120): ("ACQUIRED", 1)},
           (-1, [StateBatch(113, 118, ACKED, 1)]))

    # Fetch records 111, 112 (consumer 3)
    assert c.acquire("c3", *log, (120, 120)) == [(111, 112, 2)]
    expect(c, 110, 121, {(110, 112): ("ACQUIRED", 2), (113, 119): ("ACKNOWLEDGED", 1),
                         (120, 120): ("ACQUIRED", 1)}, None)

    # Acknowledge 110 (consumer 1) -- seed writes -1 and 110 Acknowledged/2 (see above)
    c.ack("c1", (110, 110, ACCEPT))
    expect(c, 111, 121, {(111, 112): ("ACQUIRED", 2), (113, 119): ("ACKNOWLEDGED", 1),
                         (120, 120): ("ACQUIRED", 1)}, (111, []))

    # Acknowledge 111, 112 (consumer 3)
    c.ack("c3", (111, 112, ACCEPT))
    expect(c, 120, 121, {(120, 120): ("ACQUIRED", 1)}, (120, []))
