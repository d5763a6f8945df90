"""Classic consumer groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) with real clients.

librdkafka (confluent-kafka), kafka-python and aiokafka form groups, split partitions,
rebalance when a member leaves or dies, and resume from committed offsets across
consumer and broker restarts. The broker runs with group.initial.rebalance.delay.ms=0
and the consumers with 6 s sessions and 0.5 s heartbeats, so rebalances are quick.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess
from tests.support.wire import RawClient

BROKER_ARGS = ("--override", "group.initial.rebalance.delay.ms=0")
FAST = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
        "max.poll.interval.ms": 10000, "fetch.wait.max.ms": 100,
        "auto.offset.reset": "earliest"}


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("classic") / "data", *BROKER_ARGS).start()
    yield proc
    proc.stop()
    # No handler or timer failed while serving (what shutdown itself logs is not ours).
    log = proc.log_path.read_text(errors="replace").split("headwater: shutting down")[0]
    assert "Traceback" not in log and " ERROR " not in log, log[-5000:]


# ---- helpers -------------------------------------------------------------------------
def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll `predicate` until true; returns the seconds it took, fails after `timeout`."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - start


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=15)


def produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % partitions)
    assert producer.flush(15) == 0


class Member(threading.Thread):
    """A confluent-kafka group consumer polling in its own thread.

    `assigned` is what the client itself reports (consumer.assignment()), read in the
    polling thread; `received` holds (partition, value) of every message delivered.
    """

    def __init__(self, bootstrap: str, group: str, topic: str, strategy: str = "range",
                 **conf: object) -> None:
        super().__init__(daemon=True)
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group,
                     "partition.assignment.strategy": strategy, **FAST, **conf}
        self.topic = topic
        self.assigned: frozenset[int] = frozenset()
        self.received: list[tuple[int, str]] = []
        self.errors: list[str] = []
        self._halt = threading.Event()
        self.start()

    def run(self) -> None:
        consumer = Consumer(self.conf)
        consumer.subscribe([self.topic])
        try:
            while not self._halt.is_set():
                msg = consumer.poll(0.1)
                self.assigned = frozenset(tp.partition for tp in consumer.assignment())
                if msg is None:
                    continue
                if msg.error():
                    self.errors.append(str(msg.error()))
                    continue
                self.received.append((msg.partition(), msg.value().decode()))
        finally:
            consumer.close()  # sends LeaveGroup

    def close(self) -> None:
        self._halt.set()
        self.join(20)
        assert not self.is_alive()


def split_cleanly(assignments: list[frozenset[int]], partitions: int) -> bool:
    """Every member has partitions, none shared, all covered."""
    union = frozenset().union(*assignments)
    return all(assignments) and sum(map(len, assignments)) == partitions \
        and union == frozenset(range(partitions))


def assert_each_delivered_once_to_owner(members: list[Member], values: list[str],
                                        partitions: int) -> None:
    """Each value of `values` (value i went to partition i % partitions) reaches exactly
    one member, the one that owns its partition."""
    wanted = set(values)

    def got() -> Counter[str]:
        return Counter(v for m in members for _, v in list(m.received) if v in wanted)

    wait_until(lambda: set(got()) == wanted, 20, f"{len(values)} records")
    counts = got()
    assert all(n == 1 for n in counts.values()), counts.most_common(3)
    for m in members:
        for partition, value in list(m.received):
            if value in wanted:
                assert partition in m.assigned
                assert values.index(value) % partitions == partition


# ---- confluent-kafka -----------------------------------------------------------------
def test_three_consumers_split_six_partitions_and_rebalance_on_leave(gbroker, topic_name):
    create_topic(gbroker.bootstrap, topic_name, 6)
    members = [Member(gbroker.bootstrap, "three", topic_name) for _ in range(3)]
    try:
        wait_until(lambda: split_cleanly([m.assigned for m in members], 6), 30,
                   "three members to split six partitions")
        assert all(len(m.assigned) == 2 for m in members)  # range: 2 each
        batch = [f"first-{i}" for i in range(60)]
        produce(gbroker.bootstrap, topic_name, batch, 6)
        assert_each_delivered_once_to_owner(members, batch, 6)

        leaving = members.pop(1)
        freed = leaving.assigned
        leaving.close()
        took = wait_until(lambda: split_cleanly([m.assigned for m in members], 6), 20,
                          "the two remaining members to take over")
        assert took < 5.5  # a LeaveGroup rebalances at once, not after the session timeout
        assert freed <= members[0].assigned | members[1].assigned
        batch = [f"second-{i}" for i in range(60)]
        produce(gbroker.bootstrap, topic_name, batch, 6)
        assert_each_delivered_once_to_owner(members, batch, 6)
        assert not any(m.errors for m in members)
    finally:
        for m in members:
            m.close()


KILLABLE = """
import json, sys
from confluent_kafka import Consumer
conf = json.loads(sys.argv[1])
consumer = Consumer(conf)
consumer.subscribe([sys.argv[2]])
last = None
while True:
    consumer.poll(0.1)
    now = sorted(tp.partition for tp in consumer.assignment())
    if now != last:
        print(json.dumps(now), flush=True)
        last = now
"""


def test_killed_consumer_partitions_move_after_session_timeout(gbroker, topic_name):
    create_topic(gbroker.bootstrap, topic_name, 6)
    group = "killed"
    conf = {"bootstrap.servers": gbroker.bootstrap, "group.id": group,
            "partition.assignment.strategy": "cooperative-sticky", **FAST}
    child = subprocess.Popen([sys.executable, "-c", KILLABLE, json.dumps(conf), topic_name],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    child_view: list[list[int]] = [[]]

    def read_child() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            child_view[0] = json.loads(line)

    threading.Thread(target=read_child, daemon=True).start()
    survivor = Member(gbroker.bootstrap, group, topic_name, "cooperative-sticky")
    try:
        wait_until(lambda: split_cleanly([survivor.assigned, frozenset(child_view[0])], 6),
                   30, "the two consumers to split six partitions")
        child_partitions = set(child_view[0])
        os.kill(child.pid, signal.SIGKILL)  # no LeaveGroup: only the session timeout tells
        child.wait(10)
        took = wait_until(lambda: survivor.assigned == frozenset(range(6)), 30,
                          "the survivor to own every partition")
        assert took > 3.0, f"partitions moved after {took:.1f}s, before the 6 s session timeout"
        assert child_partitions <= survivor.assigned
        batch = [f"after-kill-{i}" for i in range(30)]
        produce(gbroker.bootstrap, topic_name, batch, 6)
        assert_each_delivered_once_to_owner([survivor], batch, 6)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        survivor.close()


def consume_group(bootstrap: str, group: str, topic: str, count: int,
                  timeout: float = 20.0) -> list[str]:
    """Read `count` records as a member of `group`, commit, leave."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, **FAST})
    consumer.subscribe([topic])
    got: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg.value().decode())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)],
                                 timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def test_committed_offsets_resume_after_consumer_and_broker_restart(broker_factory,
                                                                     topic_name):
    b = broker_factory(*BROKER_ARGS)
    create_topic(b.bootstrap, topic_name, 2)
    first = [f"a{i}" for i in range(20)]
    produce(b.bootstrap, topic_name, first, 2)
    assert sorted(consume_group(b.bootstrap, "resume", topic_name, 20)) == sorted(first)

    second = [f"b{i}" for i in range(10)]
    produce(b.bootstrap, topic_name, second, 2)
    # A new consumer of the group starts where the last one committed, not at the start.
    assert sorted(consume_group(b.bootstrap, "resume", topic_name, 10)) == sorted(second)

    b.restart()
    assert committed(b.bootstrap, "resume", topic_name, 2) == {0: 15, 1: 15}
    third = [f"c{i}" for i in range(6)]
    produce(b.bootstrap, topic_name, third, 2)
    assert sorted(consume_group(b.bootstrap, "resume", topic_name, 6)) == sorted(third)


# ---- kafka-python and aiokafka ---------------------------------------------------------
def test_kafka_python_group_consumer_reads_everything_once(gbroker, topic_name):
    from kafka import KafkaConsumer, TopicPartition

    create_topic(gbroker.bootstrap, topic_name, 3)
    values = [f"kp-{i}" for i in range(45)]
    produce(gbroker.bootstrap, topic_name, values, 3)
    consumer = KafkaConsumer(topic_name, bootstrap_servers=gbroker.bootstrap,
                             group_id="kafka-python-group", auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=6000,
                             heartbeat_interval_ms=500)
    got: list[str] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.value.decode() for r in records]
        assert Counter(got) == Counter(values)
        assert {tp.partition for tp in consumer.assignment()} == {0, 1, 2}
        consumer.commit()
        assert {p: consumer.committed(TopicPartition(topic_name, p)) for p in range(3)} \
            == {0: 15, 1: 15, 2: 15}
    finally:
        consumer.close()


def test_aiokafka_group_consumer_reads_everything_once(gbroker, topic_name):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    create_topic(gbroker.bootstrap, topic_name, 3)
    values = [f"aio-{i}" for i in range(45)]
    produce(gbroker.bootstrap, topic_name, values, 3)

    async def run() -> tuple[list[str], dict[int, int | None]]:
        consumer = AIOKafkaConsumer(topic_name, bootstrap_servers=gbroker.bootstrap,
                                    group_id="aiokafka-group", auto_offset_reset="earliest",
                                    enable_auto_commit=False, session_timeout_ms=6000,
                                    heartbeat_interval_ms=500)
        await consumer.start()
        got: list[str] = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < len(values) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                for records in batches.values():
                    got += [r.value.decode() for r in records]
            await consumer.commit()
            offsets = {p: await consumer.committed(TopicPartition(topic_name, p))
                       for p in range(3)}
        finally:
            await consumer.stop()
        return got, offsets

    got, offsets = asyncio.run(run())
    assert Counter(got) == Counter(values)
    assert offsets == {0: 15, 1: 15, 2: 15}


# ---- admin ---------------------------------------------------------------------------
def test_admin_lists_describes_and_deletes_groups(gbroker, topic_name):
    create_topic(gbroker.bootstrap, topic_name, 6)
    group = f"admin-{topic_name[-6:]}"
    admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    member = Member(gbroker.bootstrap, group, topic_name, "roundrobin")
    try:
        wait_until(lambda: member.assigned == frozenset(range(6)), 30, "the member's assignment")
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(10).valid}
        assert listed[group].state == ConsumerGroupState.STABLE
        assert listed[group].is_simple_consumer_group is False
        described = admin.describe_consumer_groups([group])[group].result(10)
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "roundrobin"
        (desc_member,) = described.members
        assert {tp.partition for tp in desc_member.assignment.topic_partitions} == set(range(6))
        assert desc_member.host.endswith("127.0.0.1")

        with pytest.raises(KafkaException) as refused:
            admin.delete_consumer_groups([group])[group].result(10)
        assert refused.value.args[0].name() == "NON_EMPTY_GROUP"
    finally:
        member.close()

    def state() -> ConsumerGroupState | None:
        found = [g for g in admin.list_consumer_groups().result(10).valid if g.group_id == group]
        return found[0].state if found else None

    wait_until(lambda: state() == ConsumerGroupState.EMPTY, 10, "the group to be Empty")
    admin.delete_consumer_groups([group])[group].result(10)
    assert state() is None
    with pytest.raises(KafkaException) as gone:
        admin.delete_consumer_groups([group])[group].result(10)
    assert gone.value.args[0].name() == "GROUP_ID_NOT_FOUND"


# ---- the wire, by hand -----------------------------------------------------------------
def test_raw_join_sync_heartbeat_errors(gbroker):
    group = "raw-errors"
    subscription = b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"  # v0, no topics, null data
    client = RawClient("127.0.0.1", gbroker.port)

    def join(member_id: str, session: int = 6000):
        return client.request(11, 5, {
            "group_id": group, "session_timeout": session, "rebalance_timeout": 10000,
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription}]})

    def heartbeat(member_id: str, generation: int) -> int:
        return int(client.request(12, 3, {"group_id": group, "generation_id": generation,
                                          "member_id": member_id,
                                          "group_instance_id": None}).error_code)

    try:
        assert int(join("", session=1000).error_code) == 26  # INVALID_SESSION_TIMEOUT
        first = join("")
        assert int(first.error_code) == 79  # MEMBER_ID_REQUIRED
        member = first.member_id
        assert member.startswith("raw-test-")
        joined = join(member)  # parked until the (zero) initial delay ends
        assert int(joined.error_code) == 0 and joined.leader == member
        assert [m.member_id for m in joined.members] == [member]
        generation = joined.generation_id
        synced = client.request(14, 3, {
            "group_id": group, "generation_id": generation, "member_id": member,
            "group_instance_id": None,
            "assignments": [{"member_id": member, "assignment": b"\x00\x01"}]})
        assert int(synced.error_code) == 0 and synced.assignment == b"\x00\x01"

        assert heartbeat(member, generation) == 0
        assert heartbeat(member, generation + 1) == 22  # ILLEGAL_GENERATION
        assert heartbeat("nobody", generation) == 25  # UNKNOWN_MEMBER_ID
        stale_sync = client.request(14, 3, {
            "group_id": group, "generation_id": generation - 1, "member_id": member,
            "group_instance_id": None, "assignments": []})
        assert int(stale_sync.error_code) == 22

        left = client.request(13, 3, {"group_id": group, "members": [
            {"member_id": "nobody", "group_instance_id": None},
            {"member_id": member, "group_instance_id": None}]})
        assert int(left.error_code) == 0
        assert [int(m.error_code) for m in left.members] == [25, 0]
        assert heartbeat(member, generation) == 25  # gone
    finally:
        client.close()


def test_group_requests_while_loading_get_coordinator_load_in_progress(broker_factory):
    # 10 s: on three brokers (--storage=cluster) the shard may be loaded well before the
    # trio is ready on a loaded machine, and 3 s had passed when the request came
    b = broker_factory("--override", "headwater.coordinator.load.delay.ms=10000")
    client = RawClient("127.0.0.1", b.port)
    try:
        joined = client.request(11, 5, {
            "group_id": "loading", "session_timeout": 6000, "rebalance_timeout": 10000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]})
        assert int(joined.error_code) == 14  # COORDINATOR_LOAD_IN_PROGRESS: retry
        beat = client.request(12, 3, {"group_id": "loading", "generation_id": 1,
                                      "member_id": "m", "group_instance_id": None})
        assert int(beat.error_code) == 14
        synced = client.request(14, 3, {"group_id": "loading", "generation_id": 1,
                                        "member_id": "m", "group_instance_id": None,
                                        "assignments": []})
        assert int(synced.error_code) == 14
        left = client.request(13, 1, {"group_id": "loading", "member_id": "m"})
        assert int(left.error_code) == 14
    finally:
        client.close()
