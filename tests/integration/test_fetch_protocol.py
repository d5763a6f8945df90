"""Fetch on the wire: incremental sessions (KIP-227), long poll, topic ids, max bytes."""

from __future__ import annotations

import threading
import time

from headwater.records.batch import build_batch
from tests.support.routing import led_together
from tests.support.wire import RawClient


def create(raw: RawClient, name: str, partitions: int = 2) -> None:
    resp = raw.request(19, 4, {"topics": [{"name": name, "num_partitions": partitions,
                                           "replication_factor": 1, "assignments": (),
                                           "configs": ()}],
                               "timeout": 5000, "validate_only": False}, correlation_id=99)
    assert int(resp.topics[0].error_code) == 0


def produce(raw: RawClient, name: str, partition: int, values: list[bytes], cid: int = 50):
    batch = build_batch([(None, v, [], 1000) for v in values])
    resp = raw.request(0, 9, {"acks": -1, "timeout": 5000, "topic_data": [
        {"name": name, "partition_data": [{"index": partition, "records": batch}]}]},
        correlation_id=cid)
    assert int(resp.responses[0].partition_responses[0].error_code) == 0


def fetch(raw: RawClient, topics: list, session_id: int = 0, epoch: int = -1,
          forgotten: tuple = (), max_wait: int = 0, min_bytes: int = 0, cid: int = 7,
          version: int = 12):
    return raw.request(1, version, {
        "replica_id": -1, "max_wait": max_wait, "min_bytes": min_bytes,
        "max_bytes": 50 << 20, "isolation_level": 0, "session_id": session_id,
        "session_epoch": epoch, "topics": topics, "forgotten_topics_data": forgotten,
        "rack_id": ""}, correlation_id=cid)


def part(p: int, offset: int) -> dict:
    return {"partition": p, "fetch_offset": offset, "partition_max_bytes": 1 << 20}


def test_incremental_fetch_session(broker, topic_name):
    raw = RawClient("127.0.0.1", broker.port)
    try:
        # A fetch session is one broker's: two partitions led by the same broker (on one
        # node, 0 and 1; of 4 partitions on 3 brokers, two share a leader).
        create(raw, topic_name, 4)
        a, b = led_together(broker.port, topic_name)
        produce(raw, topic_name, a, [b"a", b"b"])
        full = fetch(raw, [{"topic": topic_name, "partitions": [part(a, 0), part(b, 0)]}],
                     session_id=0, epoch=0)
        assert int(full.error_code) == 0 and full.session_id > 0
        assert sorted(p.partition_index for p in full.responses[0].partitions) == [a, b]
        assert all(int(p.error_code) == 0 for p in full.responses[0].partitions)
        sid = full.session_id

        # The client moves partition a past what it got; nothing else changed, so the
        # incremental answer carries no partitions at all.
        quiet = fetch(raw, [{"topic": topic_name, "partitions": [part(a, 2)]}],
                      session_id=sid, epoch=1, cid=8)
        assert int(quiet.error_code) == 0 and quiet.responses == ()

        # New data in partition b only: only partition b comes back.
        produce(raw, topic_name, b, [b"c"], cid=51)
        news = fetch(raw, [], session_id=sid, epoch=2, cid=9)
        parts = [(p.partition_index, p.high_watermark) for p in news.responses[0].partitions]
        assert parts == [(b, 1)]
        assert news.responses[0].partitions[0].records

        # Forget partition a, advance partition b's offset: nothing new to say.
        forgot = fetch(raw, [{"topic": topic_name, "partitions": [part(b, 1)]}],
                       session_id=sid, epoch=3,
                       forgotten=[{"topic": topic_name, "partitions": [a]}], cid=10)
        assert forgot.responses == ()
        produce(raw, topic_name, a, [b"d"], cid=52)
        after = fetch(raw, [], session_id=sid, epoch=4, cid=11)
        assert after.responses == ()  # partition a is no longer in the session

        stale = fetch(raw, [], session_id=sid, epoch=2, cid=12)
        assert int(stale.error_code) == 71  # INVALID_FETCH_SESSION_EPOCH
        gone = fetch(raw, [], session_id=sid + 12345, epoch=1, cid=13)
        assert int(gone.error_code) == 70  # FETCH_SESSION_ID_NOT_FOUND
    finally:
        raw.close()


def test_long_poll_wakes_on_append(broker, topic_name):
    raw = RawClient("127.0.0.1", broker.port, timeout=30)
    other = RawClient("127.0.0.1", broker.port)
    try:
        create(raw, topic_name, 1)
        result: dict = {}

        def park() -> None:
            start = time.monotonic()
            result["resp"] = fetch(raw, [{"topic": topic_name, "partitions": [part(0, 0)]}],
                                   max_wait=20000, min_bytes=1)
            result["elapsed"] = time.monotonic() - start

        t = threading.Thread(target=park)
        t.start()
        time.sleep(0.3)  # let the fetch park; correctness does not depend on it
        produce(other, topic_name, 0, [b"wake"])
        t.join(25)
        records = result["resp"].responses[0].partitions[0].records
        assert records and b"wake" in records
        assert result["elapsed"] < 10, "the parked fetch waited out its max wait"
    finally:
        raw.close()
        other.close()


def test_fetch_by_topic_id_v13_and_unknown_id(broker, topic_name):
    import uuid

    raw = RawClient("127.0.0.1", broker.port)
    try:
        create(raw, topic_name, 1)
        produce(raw, topic_name, 0, [b"x", b"y"])
        md = raw.request(3, 12, {"topics": [{"name": topic_name, "topic_id": None}],
                                 "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False}, correlation_id=3)
        tid = md.topics[0].topic_id
        resp = raw.request(1, 16, {
            "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic_id": tid, "partitions": [part(0, 0)]},
                       {"topic_id": uuid.uuid4(), "partitions": [part(0, 0)]}],
            "forgotten_topics_data": (), "rack_id": ""}, correlation_id=4)
        by_id = {r.topic_id: r.partitions[0] for r in resp.responses}
        assert int(by_id[tid].error_code) == 0 and by_id[tid].high_watermark == 2
        others = [p for t, p in by_id.items() if t != tid]
        assert int(others[0].error_code) == 100  # UNKNOWN_TOPIC_ID
    finally:
        raw.close()


def test_describe_producers_log_dirs_and_leader_epoch(broker, topic_name):
    raw = RawClient("127.0.0.1", broker.port)
    try:
        create(raw, topic_name, 1)
        init = raw.request(22, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                   "producer_id": -1, "producer_epoch": -1})
        batch = build_batch([(None, b"p", [], 1000)], producer_id=init.producer_id,
                            producer_epoch=init.producer_epoch, base_sequence=0)
        raw.request(0, 9, {"acks": -1, "timeout": 5000, "topic_data": [
            {"name": topic_name, "partition_data": [{"index": 0, "records": batch}]}]},
            correlation_id=2)
        producers = raw.request(61, 0, {"topics": [{"name": topic_name,
                                                    "partition_indexes": [0]}]},
                                correlation_id=3)
        active = producers.topics[0].partitions[0].active_producers
        assert [(p.producer_id, p.last_sequence) for p in active] == [(init.producer_id, 0)]

        # the partition's log dir, asked of the broker that holds it (as Kafka's
        # describeReplicaLogDirs does)
        dirs = raw.request(35, 4, {"topics": [{"topic": topic_name, "partitions": [0]}]},
                           correlation_id=4)
        sizes = {(t.name, p.partition_index): p.partition_size
                 for t in dirs.results[0].topics for p in t.partitions}
        assert sizes[(topic_name, 0)] == len(batch)

        epoch = raw.request(23, 4, {"replica_id": -1, "topics": [{"topic": topic_name,
                            "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                            "leader_epoch": 0}]}]}, correlation_id=5)
        assert epoch.topics[0].partitions[0].end_offset == 1
    finally:
        raw.close()
