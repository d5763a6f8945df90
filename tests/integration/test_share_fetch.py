"""ShareFetch / ShareAcknowledge on the wire: sessions, acquisition, acknowledgements,
redelivery, long polls, persistence across a kill -9, and Kafka's error codes.

These use exact requests (the raw client) so every field of the answer is checked;
tests/integration/test_share_consumer.py drives the same paths with confluent-kafka's
ShareConsumer.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode as E

from tests.support.wire import RawClient

ACCEPT, RELEASE, REJECT = 1, 2, 3


class Member:
    """One share consumer speaking ShareFetch v1 / ShareAcknowledge v1 by hand."""

    def __init__(self, port: int, group: str, member: str, topic_id: uuid.UUID,
                 partitions: tuple[int, ...] = (0,), join: str | None = None) -> None:
        """`join`: the topic name to subscribe to with ShareGroupHeartbeat first (only
        members of the group get records)."""
        self.client = RawClient("127.0.0.1", port, timeout=15)
        self.group, self.member, self.topic_id, self.partitions = (group, member, topic_id,
                                                                   partitions)
        self.epoch = 0
        self.cid = 0
        if join is not None:
            deadline = time.monotonic() + 30
            while True:  # a client retries while the coordinator loads
                joined = self._request(76, {"group_id": group, "member_id": member,
                                            "member_epoch": 0, "rack_id": None,
                                            "subscribed_topic_names": [join]})
                if joined.error_code != E.coordinator_load_in_progress \
                        or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert joined.error_code == E.none, joined

    def close(self) -> None:
        self.client.close()

    def _request(self, key: int, body: dict) -> object:
        self.cid += 1
        return self.client.request(key, 1, body, correlation_id=self.cid)

    def fetch(self, acks: dict[int, list[tuple[int, int, int]]] | None = None,
              wait_ms: int = 2000, max_records: int = 500, epoch: int | None = None) -> object:
        epoch = self.epoch if epoch is None else epoch
        parts = self.partitions if self.epoch == 0 else tuple(acks or ())
        topics = [{"topic_id": self.topic_id, "partitions": [
            {"partition_index": p, "acknowledgement_batches": [
                {"first_offset": f, "last_offset": last, "acknowledge_types": [t]}
                for f, last, t in (acks or {}).get(p, [])]} for p in parts]}] if parts else []
        resp = self._request(78, {
            "group_id": self.group, "member_id": self.member, "share_session_epoch": epoch,
            "max_wait": wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "max_records": max_records, "batch_size": max_records, "topics": topics,
            "forgotten_topics_data": []})
        if resp.error_code == E.none and epoch >= 0:
            self.epoch = epoch + 1
        return resp

    def acknowledge(self, acks: dict[int, list[tuple[int, int, int]]],
                    epoch: int | None = None) -> object:
        epoch = self.epoch if epoch is None else epoch
        resp = self._request(79, {
            "group_id": self.group, "member_id": self.member, "share_session_epoch": epoch,
            "topics": [{"topic_id": self.topic_id, "partitions": [
                {"partition_index": p, "acknowledgement_batches": [
                    {"first_offset": f, "last_offset": last, "acknowledge_types": [t]}
                    for f, last, t in batches]} for p, batches in acks.items()]}]})
        if resp.error_code == E.none and epoch > 0:
            self.epoch = epoch + 1
        return resp


def acquired(resp: object) -> list[tuple[int, int, int, int]]:
    """(partition, first, last, delivery count) of every acquired range."""
    return [(p.partition_index, r.first_offset, r.last_offset, r.delivery_count)
            for t in resp.responses for p in t.partitions for r in p.acquired_records]


def partition_errors(resp: object) -> dict[int, tuple[int, int]]:
    """partition -> (error code, acknowledge error code); ShareAcknowledge has only the
    first, which is its acknowledgement's result."""
    return {p.partition_index: (int(p.error_code), int(getattr(p, "acknowledge_error_code", 0)))
            for t in resp.responses for p in t.partitions}


def make_topic(broker, name: str, partitions: int = 1) -> uuid.UUID:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    client = RawClient("127.0.0.1", broker.port)
    try:
        meta = client.request(3, 12, {"topics": [{"name": name, "topic_id": None}],
                                      "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False})
        return meta.topics[0].topic_id
    finally:
        client.close()


def produce(broker, topic: str, n: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(n):
        producer.produce(topic, str(i).encode(), partition=partition)
    assert producer.flush(15) == 0


@pytest.fixture
def queue(broker, topic_name):
    """A topic with one partition and a group whose share-partition starts (latest) at
    0 because the first fetch comes before any record."""
    topic_id = make_topic(broker, topic_name)
    members: list[Member] = []

    def member(name: str, group: str = f"g-{topic_name}") -> Member:
        m = Member(broker.port, group, name, topic_id, join=topic_name)
        members.append(m)
        return m

    yield topic_name, topic_id, member
    for m in members:
        m.close()


@pytest.mark.timeout(60)
def test_acquire_accept_release_and_reject(broker, queue):
    topic, _tid, member = queue
    a = member("a")
    assert acquired(a.fetch(wait_ms=0)) == []  # opens the session; latest = 0
    produce(broker, topic, 10)
    assert acquired(a.fetch()) == [(0, 0, 9, 1)]
    resp = a.fetch({0: [(0, 4, ACCEPT), (5, 9, RELEASE)]})
    assert partition_errors(resp)[0] == (0, 0)
    assert acquired(resp) == [(0, 5, 9, 2)]  # released records come back, count 2
    resp = a.acknowledge({0: [(5, 9, REJECT)]})
    assert partition_errors(resp) == {0: (0, 0)}
    assert acquired(a.fetch(wait_ms=200)) == []  # nothing left


@pytest.mark.timeout(60)
def test_two_members_get_disjoint_records_and_a_closing_one_hands_its_records_over(broker,
                                                                                  queue):
    topic, _tid, member = queue
    a, b = member("a"), member("b")
    a.fetch(wait_ms=0)
    b.fetch(wait_ms=0)
    produce(broker, topic, 6)
    got_a = acquired(a.fetch(max_records=3))
    assert got_a and got_a[0][1] == 0
    produce(broker, topic, 4)
    got_b = acquired(b.fetch())
    seen_a = {o for _p, f, last, _c in got_a for o in range(f, last + 1)}
    seen_b = {o for _p, f, last, _c in got_b for o in range(f, last + 1)}
    assert seen_a and seen_b and not seen_a & seen_b
    assert seen_a | seen_b == set(range(10))
    # a closes its session (final epoch -1) without acknowledging: b gets a's records.
    assert a.acknowledge({0: []}, epoch=-1).error_code == E.none
    again = acquired(b.fetch({0: [(min(seen_b), max(seen_b), ACCEPT)]}))
    assert {o for _p, f, last, _c in again for o in range(f, last + 1)} == seen_a
    assert all(c == 2 for *_rest, c in again)  # the first delivery counts (Kafka 4.4.0)


@pytest.mark.timeout(60)
def test_a_waiting_fetch_wakes_on_produce(broker, queue):
    topic, _tid, member = queue
    a = member("a")
    a.fetch(wait_ms=0)
    timer = threading.Timer(0.5, produce, (broker, topic, 1))
    timer.start()
    start = time.monotonic()
    resp = a.fetch(wait_ms=10_000)
    elapsed = time.monotonic() - start
    timer.join()
    assert acquired(resp) == [(0, 0, 0, 1)]
    assert elapsed < 5, elapsed  # woken by the append, not by the 10 s timeout


@pytest.mark.timeout(60)
def test_session_epochs_and_bad_acknowledgements(broker, queue):
    topic, tid, member = queue
    a, b = member("a"), member("b")
    assert a.fetch(wait_ms=0).error_code == E.none
    produce(broker, topic, 4)
    assert acquired(a.fetch()) == [(0, 0, 3, 1)]
    # A replayed epoch, an unknown session, acks when opening, ShareAcknowledge at 0.
    assert a.fetch(epoch=1).error_code == E.invalid_share_session_epoch
    assert b.fetch(epoch=5).error_code == E.share_session_not_found
    assert b.fetch({0: [(0, 0, ACCEPT)]}, epoch=0).error_code == E.invalid_request
    assert b.acknowledge({0: [(0, 0, ACCEPT)]}, epoch=0).error_code == \
        E.invalid_share_session_epoch
    # b acknowledges records a holds: INVALID_RECORD_STATE, nothing changes.
    b.fetch(wait_ms=0)
    resp = b.acknowledge({0: [(0, 3, ACCEPT)]})
    assert partition_errors(resp)[0][0] == E.invalid_record_state
    assert partition_errors(a.acknowledge({0: [(0, 3, ACCEPT)]}))[0][0] == E.none
    # An unknown topic id is answered for that partition only.
    other = Member(broker.port, a.group, "c", uuid.uuid4(), join=topic)
    try:
        resp = other.fetch(wait_ms=0)
        assert resp.error_code == E.none
        assert partition_errors(resp)[0][0] == E.unknown_topic_id
    finally:
        other.close()


@pytest.mark.timeout(90)
def test_state_survives_kill_9(broker_factory, topic_name):
    broker = broker_factory()
    tid = make_topic(broker, topic_name)
    a = Member(broker.port, "g", "a", tid, join=topic_name)
    a.fetch(wait_ms=0)
    produce(broker, topic_name, 10)
    assert acquired(a.fetch()) == [(0, 0, 9, 1)]
    resp = a.acknowledge({0: [(0, 2, ACCEPT), (3, 4, RELEASE), (5, 5, REJECT)]})
    assert partition_errors(resp)[0][0] == E.none
    a.close()
    broker.kill()
    broker.start()
    b = Member(broker.port, "g", "b", tid, join=topic_name)
    try:
        # Until the share coordinator has replayed its partition the answer is
        # COORDINATOR_NOT_AVAILABLE for it, which clients retry; so does this.
        got: list[tuple[int, int, int, int]] = []
        resp = b.fetch(wait_ms=0)
        deadline = time.monotonic() + 20
        while partition_errors(resp).get(0, (0, 0))[0] == E.coordinator_not_available:
            assert time.monotonic() < deadline, broker.logs()
            resp = b.fetch(wait_ms=100)
        assert partition_errors(resp).get(0, (0, 0)) == (0, 0)
        got += acquired(resp)
        got += acquired(b.fetch(wait_ms=500))
        # Accepted and rejected records never come back; released ones come back with
        # their persisted count (1 delivery so far, so this is the 2nd). 6..9 were only
        # acquired, which is not persisted (as in Kafka): they come back as never
        # delivered, so this delivery counts 1.
        offsets = {o: c for _p, f, last, c in got for o in range(f, last + 1)}
        assert offsets == {3: 2, 4: 2, 6: 1, 7: 1, 8: 1, 9: 1}
    finally:
        b.close()


@pytest.mark.timeout(60)
def test_renew_keeps_a_slow_record_from_being_redelivered(broker_factory, topic_name):
    """KIP-1222 (ShareAcknowledge v2, IsRenewAck, type 4): the lock restarts, so another
    member does not get the record when the first lock would have run out."""
    from tests.integration.test_share_consumer import set_group_configs

    broker = broker_factory("--override", "group.share.min.record.lock.duration.ms=1000")
    tid = make_topic(broker, topic_name)
    set_group_configs(broker.bootstrap, "renewing", share_record_lock_duration_ms="3000")
    a, b = (Member(broker.port, "renewing", m, tid, join=topic_name) for m in ("a", "b"))
    try:
        a.fetch(wait_ms=0)
        b.fetch(wait_ms=0)
        produce(broker, topic_name, 1)
        start = time.monotonic()
        assert acquired(a.fetch()) == [(0, 0, 0, 1)]
        time.sleep(1.5)  # the slow application at work, half way through its lock
        a.cid += 1
        renewed = a.client.request(79, 2, {
            "group_id": "renewing", "member_id": "a", "share_session_epoch": a.epoch,
            "is_renew_ack": True, "topics": [{"topic_id": tid, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": 0, "last_offset": 0, "acknowledge_types": [4]}]}]}]},
            correlation_id=a.cid)
        a.epoch += 1
        assert partition_errors(renewed) == {0: (0, 0)}
        # Without the renewal the record would be free 3 s after it was acquired.
        assert acquired(b.fetch(wait_ms=int((3.8 - (time.monotonic() - start)) * 1000))) == []
        assert time.monotonic() - start < 4.4  # still inside the renewed lock
        assert acquired(b.fetch(wait_ms=5000)) == [(0, 0, 0, 2)]  # then it does expire
    finally:
        a.close()
        b.close()


@pytest.mark.timeout(60)
def test_only_members_of_the_group_get_records(broker, queue):
    """As Kafka 4.4.0 answers it (checked on the reference broker): a ShareFetch from a
    member id that never joined acquires nothing, without an error."""
    topic, tid, member = queue
    a = member("a")
    stranger = Member(broker.port, a.group, "stranger", tid)
    try:
        a.fetch(wait_ms=0)
        assert stranger.fetch(wait_ms=0).error_code == E.none
        produce(broker, topic, 3)
        assert acquired(stranger.fetch(wait_ms=500)) == []
        assert acquired(a.fetch()) == [(0, 0, 2, 1)]
    finally:
        stranger.close()


@pytest.mark.timeout(120)
def test_a_waiting_fetch_wakes_on_produce_to_a_re_created_topic(broker, topic_name):
    """A deleted and re-created partition gets a new log object, which may sit where
    the freed one was (same `id()`): an append to it must still wake a parked
    ShareFetch. Several rounds, to give an address reuse its chance."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for round_ in range(6):
        topic_id = make_topic(broker, topic_name)
        a = Member(broker.port, f"g-{topic_name}-{round_}", "a", topic_id, join=topic_name)
        try:
            a.fetch(wait_ms=0)  # loads the share-partition leader
            timer = threading.Timer(0.5, produce, (broker, topic_name, 1))
            timer.start()
            start = time.monotonic()
            resp = a.fetch(wait_ms=8_000)
            elapsed = time.monotonic() - start
            timer.join()
            assert acquired(resp) == [(0, 0, 0, 1)], round_
            assert elapsed < 4, (round_, elapsed)  # woken by the append, not the timeout
        finally:
            a.close()
        admin.delete_topics([topic_name])[topic_name].result(15)
        deadline = time.monotonic() + 10
        while topic_name in admin.list_topics(timeout=5).topics:
            assert time.monotonic() < deadline
            time.sleep(0.1)
