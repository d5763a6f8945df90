"""KIP-848 consumer groups with real clients: confluent-kafka with group.protocol=consumer.

One broker for the module, with a short heartbeat interval and session timeout (server
side: with this protocol librdkafka refuses the client-side session/heartbeat configs).
Waits are loops that drive the clients (`poll`) until a condition holds or a deadline
passes; nothing sleeps to synchronise.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupType,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess
from tests.support.wire import RawClient

HEARTBEAT_MS = 500
SESSION_MS = 6000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("cgp") / "data",
                         "--override", f"group.consumer.heartbeat.interval.ms={HEARTBEAT_MS}",
                         "--override", f"group.consumer.session.timeout.ms={SESSION_MS}").start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(admin: AdminClient, name: str, partitions: int) -> None:
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def produce(broker: BrokerProcess, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(15) == 0


class Member:
    """A confluent-kafka consumer on the KIP-848 protocol that tracks its assignment."""

    def __init__(self, broker: BrokerProcess, group: str, topics: list[str], **extra) -> None:
        self.assigned: set[tuple[str, int]] = set()
        self.values: list[bytes] = []
        self.consumer = KafkaConsumer({
            "bootstrap.servers": broker.bootstrap, "group.id": group,
            "group.protocol": "consumer", "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000,
            **extra})
        self.consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_revoke)

    def _on_assign(self, consumer, partitions) -> None:
        self.assigned |= {(tp.topic, tp.partition) for tp in partitions}

    def _on_revoke(self, consumer, partitions) -> None:
        self.assigned -= {(tp.topic, tp.partition) for tp in partitions}

    def poll(self, timeout: float = 0.05) -> None:
        msg = self.consumer.poll(timeout)
        if msg is not None and msg.error() is None:
            self.values.append(msg.value())

    def close(self) -> None:
        self.consumer.close()


def drive(members: list[Member], until: Callable[[], bool], timeout: float = 30.0) -> float:
    """Poll every member until `until()` holds; returns the seconds it took."""
    start = time.monotonic()
    while not until():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"condition not reached in {timeout}s: "
                                 f"{[sorted(m.assigned) for m in members]}")
        for m in members:
            m.poll()
    return time.monotonic() - start


def raw(broker: BrokerProcess) -> RawClient:
    host, port = broker.bootstrap.split(":")
    return RawClient(host, int(port))


def test_three_consumers_share_a_topic_and_take_over_when_one_leaves(broker, admin):
    topic, group = unique("share"), unique("g")
    create_topic(admin, topic, 6)
    produce(broker, topic, 60, 6)
    members = [Member(broker, group, [topic]) for _ in range(3)]
    everything = {(topic, p) for p in range(6)}

    def split_evenly() -> bool:
        sets = [m.assigned for m in members]
        return all(len(s) == 2 for s in sets) and set().union(*sets) == everything

    drive(members, split_evenly)
    assert not (members[0].assigned & members[1].assigned)
    assert not (members[1].assigned & members[2].assigned)
    # Every record is delivered (a partition that moved while the first member was
    # alone may be read twice: nothing was committed).
    wanted = {f"v{i}".encode() for i in range(60)}
    drive(members, lambda: {v for m in members for v in m.values} == wanted)

    leaving = members.pop(0)
    moved = set(leaving.assigned)
    leaving.close()
    drive(members, lambda: members[0].assigned | members[1].assigned == everything
          and not members[0].assigned & members[1].assigned)
    assert all(len(m.assigned) == 3 for m in members)
    assert moved <= members[0].assigned | members[1].assigned
    for m in members:
        m.close()


def test_regex_subscription_picks_up_a_topic_created_later(broker, admin):
    prefix = unique("rx")
    group = unique("g")
    first = f"{prefix}-a"
    create_topic(admin, first, 2)
    member = Member(broker, group, [f"^{prefix}-.*"])
    drive([member], lambda: member.assigned == {(first, 0), (first, 1)})

    later = f"{prefix}-b"
    create_topic(admin, later, 1)
    produce(broker, later, 3, 1)
    drive([member], lambda: (later, 0) in member.assigned and len(member.values) == 3)
    assert member.assigned == {(first, 0), (first, 1), (later, 0)}
    member.close()


def test_committed_offsets_resume_after_a_restart(broker, admin):
    topic, group = unique("resume"), unique("g")
    create_topic(admin, topic, 2)
    produce(broker, topic, 20, 2)
    member = Member(broker, group, [topic])
    drive([member], lambda: len(member.values) >= 8)
    positions = [tp for tp in member.consumer.position(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)]) if tp.offset >= 0]
    member.consumer.commit(offsets=positions, asynchronous=False)
    consumed = len(member.values)
    committed = member.consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)],
                                          timeout=10)
    assert sum(tp.offset for tp in committed if tp.offset >= 0) == consumed
    member.close()

    again = Member(broker, group, [topic])
    drive([again], lambda: len(again.values) == 20 - consumed)
    assert sorted(member.values + again.values) == sorted(f"v{i}".encode() for i in range(20))
    again.close()


def test_describe_consumer_groups(broker, admin):
    topic, group = unique("desc"), unique("g")
    create_topic(admin, topic, 4)
    members = [Member(broker, group, [topic], **{"client.id": f"c{i}"}) for i in range(2)]
    drive(members, lambda: all(len(m.assigned) == 2 for m in members))

    def describe(group_id: str):
        return admin.describe_consumer_groups([group_id])[group_id].result(15)

    deadline = time.monotonic() + 20
    while True:  # the group is Stable once both members acknowledged their epochs
        desc = describe(group)
        if desc.state == ConsumerGroupState.STABLE or time.monotonic() > deadline:
            break
        for m in members:
            m.poll()
    assert desc.state == ConsumerGroupState.STABLE
    assert desc.type == ConsumerGroupType.CONSUMER
    assert desc.partition_assignor == "uniform"
    assert sorted(d.client_id for d in desc.members) == ["c0", "c1"]
    got = {d.member_id: {(tp.topic, tp.partition) for tp in d.assignment.topic_partitions}
           for d in desc.members}
    assert sorted(len(a) for a in got.values()) == [2, 2]
    assert set().union(*got.values()) == {(topic, p) for p in range(4)}
    for d in desc.members:
        target = {(tp.topic, tp.partition) for tp in d.target_assignment.topic_partitions}
        assert target == got[d.member_id]

    # A group that only holds committed offsets (a classic "simple" group) and an
    # unknown id: ConsumerGroupDescribe answers GROUP_ID_NOT_FOUND, the client falls
    # back to DescribeGroups.
    simple = unique("simple")
    committer = KafkaConsumer({"bootstrap.servers": broker.bootstrap, "group.id": simple})
    committer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    committer.close()
    assert describe(simple).state == ConsumerGroupState.EMPTY
    assert describe(unique("nobody")).state == ConsumerGroupState.DEAD
    for m in members:
        m.close()
    # Both members left: the group is Empty (and still described as a consumer group).
    assert describe(group).state == ConsumerGroupState.EMPTY


def test_static_member_gets_its_partitions_back_after_a_restart(broker, admin):
    topic, group = unique("static"), unique("g")
    create_topic(admin, topic, 4)
    a = Member(broker, group, [topic], **{"group.instance.id": "inst-a"})
    b = Member(broker, group, [topic], **{"group.instance.id": "inst-b"})
    drive([a, b], lambda: len(a.assigned) == 2 and len(b.assigned) == 2)
    before = set(a.assigned)
    a.close()  # a static member leaves with epoch -2: its partitions stay reserved
    for _ in range(10):
        b.poll()
    assert len(b.assigned) == 2
    a2 = Member(broker, group, [topic], **{"group.instance.id": "inst-a"})
    drive([a2, b], lambda: a2.assigned == before)
    assert len(b.assigned) == 2
    a2.close()
    b.close()


def test_session_expiry_and_bad_input_over_the_wire(broker, admin):
    topic, group = unique("raw"), unique("g")
    create_topic(admin, topic, 2)
    client = raw(broker)
    try:
        join = {"group_id": group, "member_id": "m+/1", "member_epoch": 0,
                "rebalance_timeout": 30000, "subscribed_topic_names": [topic],
                "topic_partitions": []}
        resp = client.request(68, 1, join)
        assert (int(resp.error_code), resp.member_id, resp.member_epoch) == (0, "m+/1", 1)
        assert len(resp.assignment.topic_partitions) == 1
        assert resp.heartbeat_interval.total_seconds() * 1000 == HEARTBEAT_MS

        def error(version: int, **change) -> tuple[int, str | None]:
            r = client.request(68, version, {**join, **change})
            return int(r.error_code), r.error_message

        assert error(1, group_id="")[0] == 42
        assert error(1, member_id="") == (42, "MemberId can't be empty.")
        assert error(1, member_id="x", rebalance_timeout=-1)[0] == 42
        assert error(1, member_epoch=-3) == (42, "MemberEpoch is invalid.")
        assert error(1, member_id="x", server_assignor="sticky")[0] == 112
        code, message = error(1, member_id="x", subscribed_topic_regex="[")
        assert code == 128 and "is not a valid regular expression" in message
        assert error(1, member_epoch=7, topic_partitions=None)[0] == 110
        assert error(1, group_id=unique("none"), member_epoch=3)[0] == 69
        assert error(1, member_id="ghost", member_epoch=1)[0] == 25
        v0 = client.request(68, 0, {**join, "member_id": ""})
        assert int(v0.error_code) == 0 and len(v0.member_id) == 22

        described = client.request(69, 1, {"group_ids": [group],
                                           "include_authorized_operations": False})
        (entry,) = described.groups
        assert int(entry.error_code) == 0 and entry.group_epoch == 2
        assert sorted(m.member_id for m in entry.members) == sorted(["m+/1", v0.member_id])

        # Nobody heartbeats any more: both sessions expire and the group empties.
        deadline = time.monotonic() + SESSION_MS / 1000 + 15
        while True:
            (entry,) = client.request(69, 1, {"group_ids": [group],
                                              "include_authorized_operations": False}).groups
            if not entry.members or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # polling an observable condition, with a deadline
        assert entry.members == () and entry.group_state == "Empty"
        assert entry.group_epoch == 4  # one bump per fenced member
    finally:
        client.close()


def test_group_state_survives_a_broker_restart(broker_factory):
    proc = broker_factory("--override", f"group.consumer.heartbeat.interval.ms={HEARTBEAT_MS}",
                          "--override", f"group.consumer.session.timeout.ms={SESSION_MS}")
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    topic, group = unique("restart"), unique("g")
    create_topic(admin, topic, 2)
    a = Member(proc, group, [topic])
    b = Member(proc, group, [topic])
    drive([a, b], lambda: len(a.assigned) == 1 and len(b.assigned) == 1)
    b.close()
    drive([a], lambda: len(a.assigned) == 2)

    def describe():
        client = raw(proc)
        try:
            (entry,) = client.request(69, 1, {"group_ids": [group],
                                              "include_authorized_operations": False}).groups
            return entry
        finally:
            client.close()

    before = describe()
    assert before.group_epoch == 3 and len(before.members) == 1  # a, b joined; b left
    proc.restart()
    deadline = time.monotonic() + 20
    while int((after := describe()).error_code) == 14 and time.monotonic() < deadline:
        time.sleep(0.05)  # COORDINATOR_LOAD_IN_PROGRESS: poll until loaded
    assert int(after.error_code) == 0
    assert after.group_epoch == before.group_epoch  # replayed, not re-created
    assert [(m.member_id, m.member_epoch) for m in after.members] == \
        [(m.member_id, m.member_epoch) for m in before.members]
    # The member carries on: new records reach it without a rejoin.
    produce(proc, topic, 4, 2)
    drive([a], lambda: len(a.values) >= 4)
    assert a.assigned == {(topic, 0), (topic, 1)}
    final = describe()
    assert [(m.member_id, m.member_epoch) for m in final.members] == \
        [(m.member_id, m.member_epoch) for m in before.members]
    a.close()
