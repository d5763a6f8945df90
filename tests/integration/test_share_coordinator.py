"""The share coordinator in a real broker, through Kafka's share-state APIs on the wire:
state written as deltas survives kill -9 exactly, stale writers are fenced, and the
load time of 100,000 delta records is measured (printed, not asserted)."""

from __future__ import annotations

import time

import pytest

from headwater.share.records import ShareSnapshot, StateBatch, StateWrite, apply_update
from tests.support.routing import broker_ports
from tests.support.share_state import (
    create_topic,
    initialize,
    load_times,
    read,
    read_when_loaded,
    write,
)
from tests.support.wire import RawClient

FENCED_STATE_EPOCH = 124
INVALID_REQUEST = 42
UNKNOWN_TOPIC_OR_PARTITION = 3


def client_for(broker) -> RawClient:
    return RawClient("127.0.0.1", broker.port, timeout=30)


def ack_write(i: int, state_epoch: int = 0) -> StateWrite:
    """A leader's i-th write: ten records acknowledged (every third one a release back
    to Available with count 2), and every tenth write the SPSO moves up."""
    first = 10 * i
    batches = (StateBatch(first, first + 9, 0 if i % 3 == 0 else 2, 2 if i % 3 == 0 else 1),)
    start = 10 * (i - 5) if i % 10 == 0 and i >= 5 else -1
    return StateWrite(state_epoch, 0, start, 10 * i, batches)


@pytest.mark.timeout(120)
def test_state_written_as_deltas_survives_kill_9(broker_factory, topic_name):
    b = broker_factory("--override", "share.coordinator.snapshot.update.records.per.snapshot=7")
    c = client_for(b)
    topic_id = create_topic(c, topic_name, partitions=3)
    group = f"{topic_name}-g"
    models: dict[int, ShareSnapshot] = {}
    for p in range(3):
        assert initialize(c, group, topic_id, p, state_epoch=1, start_offset=0) == 0
        models[p] = ShareSnapshot(0, 1, 0, 0)
    assert read(c, group, topic_id, 0) == (0, 1, 0, ())
    for i in range(40):  # several snapshots and delta-index roll-overs per partition
        w = ack_write(i, state_epoch=1)
        assert write(c, group, topic_id, [(p, w) for p in range(3)]) == {0: 0, 1: 0, 2: 0}
        for p in range(3):
            models[p] = apply_update(models[p], w)
    # a stale writer is fenced and changes nothing; an uninitialized one is refused
    assert write(c, group, topic_id, [(0, ack_write(99, state_epoch=0))]) == \
        {0: FENCED_STATE_EPOCH}
    assert read(c, "no-such-group", topic_id, 0)[0] == INVALID_REQUEST
    assert initialize(c, group, topic_id, 7, 1, 0) == UNKNOWN_TOPIC_OR_PARTITION
    c.close()

    b.kill()  # kill -9: nothing flushed or closed
    b.start()
    c = client_for(b)
    try:
        for p in range(3):
            code, state_epoch, start, batches = read_when_loaded(c, group, topic_id, p)
            assert code == 0
            assert (state_epoch, start, batches) == \
                (1, models[p].start_offset, models[p].state_batches)
        summary = c.request(87, 1, {"group_id": group, "topics": [{"topic_id": topic_id,
                            "partitions": [{"partition": 0, "leader_epoch": 0}]}]})
        part = summary.results[0].partitions[0]
        assert (int(part.error_code), part.state_epoch, part.start_offset,
                part.delivery_complete_count) == (0, 1, models[0].start_offset, 390)
        # still fenced after the restart; deleting then leaves the partition uninitialized
        assert write(c, group, topic_id, [(1, ack_write(99, state_epoch=0))]) == \
            {1: FENCED_STATE_EPOCH}
        resp = c.request(86, 0, {"group_id": group, "topics": [{"topic_id": topic_id,
                         "partitions": [{"partition": 2}]}]})
        assert int(resp.results[0].partitions[0].error_code) == 0
        assert read(c, group, topic_id, 2)[0] == INVALID_REQUEST
        # FindCoordinator key type 2: a broker of the cluster (this one on one node), for
        # a well-formed key only
        from headwater.share.coordinator import coordinator_key
        found = c.request(10, 6, {"key_type": 2, "coordinator_keys": [
            coordinator_key(group, topic_id, 0), "not-a-share-key"]})
        assert [int(x.error_code) for x in found.coordinators] == [0, INVALID_REQUEST]
        assert found.coordinators[0].port in broker_ports(b.port)
    finally:
        c.close()
    b.kill()
    b.start()
    c = client_for(b)
    try:
        assert read_when_loaded(c, group, topic_id, 2)[0] == INVALID_REQUEST
        assert read_when_loaded(c, group, topic_id, 1)[2:] == \
            (models[1].start_offset, models[1].state_batches)
    finally:
        c.close()


PARTITIONS = 100
DELTAS_EACH = 1000  # 100 x 1000 = 100,000 delta records


@pytest.mark.timeout(600)
@pytest.mark.local_storage(
    "1,000 WriteShareGroupState requests of 100 partitions, each answered once the shared "
    "log commits it: minutes there; the replay it measures is the local engine's")
def test_load_time_of_100k_delta_records(broker_factory, topic_name):
    """A benchmark, not a timed assertion: the broker replays 100,000 ShareUpdate records
    (1,000 per share-partition, no snapshot in between) after a kill -9."""
    b = broker_factory("--override",
                       f"share.coordinator.snapshot.update.records.per.snapshot={DELTAS_EACH}")
    c = client_for(b)
    topic_id = create_topic(c, topic_name, partitions=PARTITIONS)
    group = f"{topic_name}-g"
    models = {}
    for p in range(PARTITIONS):
        assert initialize(c, group, topic_id, p, 0, 0) == 0
        models[p] = ShareSnapshot(0, 0, 0, 0)
    t0 = time.perf_counter()
    for i in range(DELTAS_EACH):
        w = ack_write(i)
        codes = write(c, group, topic_id, [(p, w) for p in range(PARTITIONS)])
        assert set(codes.values()) == {0}
        for p in (0, PARTITIONS - 1):
            models[p] = apply_update(models[p], w)
    written_s = time.perf_counter() - t0
    c.close()

    before = len(b.log_path.read_text(errors="replace"))
    b.kill()
    t1 = time.perf_counter()
    b.start()
    c = client_for(b)
    try:
        for p in (0, PARTITIONS - 1):
            code, _, start, batches = read_when_loaded(c, group, topic_id, p, timeout=300)
            assert code == 0 and (start, batches) == (models[p].start_offset,
                                                      models[p].state_batches)
        ready_s = time.perf_counter() - t1
    finally:
        c.close()
    deadline = time.monotonic() + 60
    loads: dict[int, tuple[int, int]] = {}
    while time.monotonic() < deadline:
        loads = load_times(b.log_path.read_text(errors="replace")[before:])
        if sum(n for n, _ in loads.values()) >= PARTITIONS * (DELTAS_EACH + 1):
            break
        time.sleep(0.1)
    records = sum(n for n, _ in loads.values())
    assert records == PARTITIONS * (DELTAS_EACH + 1)  # every delta, plus the snapshots
    print(f"\nshare coordinator: wrote {PARTITIONS * DELTAS_EACH:,} deltas in "
          f"{written_s:.1f} s; after kill -9 replayed {records:,} records in "
          f"{sum(ms for _, ms in loads.values())} ms (sum over {len(loads)} state "
          f"partitions, slowest {max(ms for _, ms in loads.values())} ms); "
          f"restart to state readable: {ready_s:.1f} s")
