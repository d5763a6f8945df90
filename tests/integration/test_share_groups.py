"""KIP-932 share-group membership with real clients: confluent-kafka's ShareConsumer
(its heartbeats), AdminClient, and exact requests for every error code.

The broker runs with a short share heartbeat interval so members converge quickly
(group configs may not go below `group.share.min.heartbeat.interval.ms`, broker
defaults may). Waits are loops with deadlines that drive the clients; nothing sleeps to
synchronise.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.support.broker_process import BrokerProcess
from tests.support.wire import RawClient

HEARTBEAT_MS = 300
SESSION_MS = 2000
# Assignments at once (no wait for the first assignment of an empty group): these tests
# follow epochs heartbeat by heartbeat; test_share_initial_assignment.py and
# test_share_fetch_vs_kafka.py cover the wait.
SHARE_OVERRIDES = ("--override", f"group.share.heartbeat.interval.ms={HEARTBEAT_MS}",
                   "--override", f"group.share.session.timeout.ms={SESSION_MS}",
                   "--override", "group.share.assignment.interval.ms=0")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("share-groups") / "data",
                         *SHARE_OVERRIDES).start()
    yield proc
    proc.stop()


#: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
COORDINATOR_MOVING = (14, 15, 16)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def wait_for(cond: Callable[[], Any], timeout: float = 20.0,
             drive: Callable[[], None] = lambda: None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        drive()
        got = cond()
        if got:
            return got
        assert time.monotonic() < deadline, "condition not met before the deadline"


class Raw:
    """Exact requests to one broker."""

    def __init__(self, port: int) -> None:
        self.client = RawClient("127.0.0.1", port, timeout=15)
        self.cid = 0

    def close(self) -> None:
        self.client.close()

    def request(self, key: int, version: int, body: dict) -> Any:
        self.cid += 1
        return self.client.request(key, version, body, correlation_id=self.cid)

    def heartbeat(self, group: str, member: str, epoch: int,
                  topics: list[str] | None = None) -> Any:
        return self.request(76, 1, {"group_id": group, "member_id": member,
                                    "member_epoch": epoch, "rack_id": None,
                                    "subscribed_topic_names": topics})

    def describe(self, group: str) -> Any:
        (entry,) = self.request(77, 1, {"group_ids": [group],
                                        "include_authorized_operations": False}).groups
        return entry

    def list_groups(self, states: list[str] = (), types: list[str] = ()) -> dict[str, tuple]:
        resp = self.request(16, 5, {"states_filter": list(states), "types_filter": list(types)})
        return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in resp.groups}


def summary(entry: Any) -> tuple:
    """What a describe says, comparable across brokers and restarts."""
    return (int(entry.error_code), entry.group_state, entry.group_epoch,
            entry.assignment_epoch, entry.assignor_name,
            sorted((m.member_id, m.member_epoch, tuple(m.subscribed_topic_names),
                    tuple(sorted((tp.topic_name, p) for tp in m.assignment.topic_partitions
                                 for p in tp.partitions)))
                   for m in entry.members))


def partitions_of(entry: Any) -> dict[str, list[int]]:
    return {m.member_id: sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions)
            for m in entry.members}


@pytest.fixture
def raw(broker: BrokerProcess) -> Iterator[Raw]:
    client = Raw(broker.port)
    yield client
    client.close()


@pytest.mark.timeout(90)
def test_share_consumers_join_share_every_partition_and_leave(broker, raw):
    topic, group = unique("sq"), unique("sg")
    create_topic(broker.bootstrap, topic, 6)
    consumers = []
    for _ in range(3):
        c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        c.subscribe([topic])
        consumers.append(c)

    def drive() -> None:
        for c in consumers:
            c.poll(0.05)

    def converged(members: int) -> Any:
        entry = raw.describe(group)
        parts = partitions_of(entry)
        settled = all(m.member_epoch == entry.assignment_epoch for m in entry.members)
        if len(parts) == members and settled and entry.group_epoch == entry.assignment_epoch:
            return entry
        return None

    entry = wait_for(lambda: converged(3), drive=drive)
    parts = partitions_of(entry)
    assert entry.group_state == "Stable" and entry.assignor_name == "simple"
    assert sorted(p for ps in parts.values() for p in ps) == list(range(6))  # every one once
    assert sorted(len(ps) for ps in parts.values()) == [2, 2, 2]
    assert all(tuple(m.subscribed_topic_names) == (topic,) for m in entry.members)
    assert all(m.client_host.startswith("/127.0.0.1") for m in entry.members)
    assert raw.list_groups(types=["share"])[group] == ("share", "Stable", "share")
    assert group in raw.list_groups(states=["stable"], types=["share"])
    assert group not in raw.list_groups(types=["consumer", "classic"])
    assert group not in raw.list_groups(states=["empty"])

    consumers.pop().close()  # a leave heartbeat (epoch -1)
    entry = wait_for(lambda: converged(2), drive=drive)
    parts = partitions_of(entry)
    assert sorted(p for ps in parts.values() for p in ps) == list(range(6))
    assert sorted(len(ps) for ps in parts.values()) == [3, 3]

    for c in consumers:
        c.close()
    entry = wait_for(lambda: raw.describe(group).group_state == "Empty" and raw.describe(group))
    assert entry.members == () and entry.group_epoch > entry.assignment_epoch
    assert raw.list_groups(states=["empty"], types=["share"])[group][1] == "Empty"


@pytest.mark.timeout(60)
def test_more_members_than_partitions_share_them(broker, raw):
    topic, group = unique("sq"), unique("sg")
    create_topic(broker.bootstrap, topic, 2)
    epochs = {}
    for i in range(5):
        resp = raw.heartbeat(group, f"m{i}", 0, [topic])
        assert int(resp.error_code) == 0 and resp.assignment is not None
        epochs[f"m{i}"] = resp.member_epoch
    for member, epoch in epochs.items():  # everyone catches up with the latest target
        resp = raw.heartbeat(group, member, epoch)
        assert int(resp.error_code) == 0 and resp.member_epoch == 5
    parts = partitions_of(raw.describe(group))
    holders = {p: sum(p in ps for ps in parts.values()) for p in (0, 1)}
    assert holders == {0: 3, 1: 3}  # ceil(5/2) members per partition
    assert sorted(len(ps) for ps in parts.values()) == [1, 1, 1, 1, 2]


@pytest.mark.timeout(60)
def test_session_timeout_fences_a_silent_member_and_tells_the_share_sessions(broker, raw):
    topic, group = unique("sq"), unique("sg")
    create_topic(broker.bootstrap, topic, 1)
    joined = raw.heartbeat(group, "quiet", 0, [topic])
    assert int(joined.error_code) == 0 and joined.member_epoch == 1
    assert joined.heartbeat_interval.total_seconds() * 1000 == HEARTBEAT_MS
    # Open a share session for the member: the fence must close it (the listener).
    topic_id = joined.assignment.topic_partitions[0].topic_id
    fetch = {"group_id": group, "member_id": "quiet", "share_session_epoch": 0,
             "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10,
             "batch_size": 10, "forgotten_topics_data": [],
             "topics": [{"topic_id": topic_id, "partitions": [
                 {"partition_index": 0, "acknowledgement_batches": []}]}]}
    assert int(raw.request(78, 1, fetch).error_code) == 0
    started = time.monotonic()
    wait_for(lambda: raw.describe(group).group_state == "Empty", timeout=SESSION_MS / 1000 + 10)
    assert time.monotonic() - started >= SESSION_MS / 1000 - 0.5
    late = raw.heartbeat(group, "quiet", 1)
    assert int(late.error_code) == 25  # UNKNOWN_MEMBER_ID: fenced, must rejoin with 0
    # The fence closes its share session once the grace left to a closing consumer's
    # final acknowledgements is over (share/fetch_service.py, LEAVE_GRACE_S). A wrong epoch
    # probes without changing the session: INVALID_SHARE_SESSION_EPOCH while it exists,
    # SHARE_SESSION_NOT_FOUND (122) once closed.
    probe = {**fetch, "share_session_epoch": 99, "topics": []}
    wait_for(lambda: int(raw.request(78, 1, probe).error_code) == 122, timeout=15)
    rejoined = raw.heartbeat(group, "quiet", 0, [topic])
    assert int(rejoined.error_code) == 0 and rejoined.member_epoch > 1


@pytest.mark.timeout(60)
def test_bad_heartbeats_get_kafkas_codes_and_change_nothing(broker, raw):
    topic, group = unique("sq"), unique("sg")
    create_topic(broker.bootstrap, topic, 2)
    first = raw.heartbeat(group, "m1", 0, [topic])
    assert int(first.error_code) == 0
    before = summary(raw.describe(group))

    def code(member: str, epoch: int, topics: list[str] | None = None,
             group_id: str = group) -> tuple[int, str | None]:
        r = raw.heartbeat(group_id, member, epoch, topics)
        return int(r.error_code), r.error_message

    assert code("m1", 7)[0] == 110  # FENCED_MEMBER_EPOCH: ahead of the coordinator
    assert code("m1", 7)[1].startswith("The share group member has a greater member epoch")
    assert code("nobody", 1) == (25, f"Member nobody is not a member of group {group}.")
    assert code("nobody", -1)[0] == 25
    assert code("", 0, [topic]) == (42, None)
    assert code("m2", 0) == (42, "SubscribedTopicNames must be set in first request.")
    assert code("m2", 0, []) == (42, "SubscribedTopicNames must be set in first request.")
    assert code("m1", -2) == (42, "MemberEpoch is invalid.")
    assert code("m1", 1, group_id=unique("absent"))[0] == 69  # GROUP_ID_NOT_FOUND
    assert code("m1", -1, group_id=unique("absent"))[0] == 69
    assert summary(raw.describe(group)) == before  # nothing changed


@pytest.mark.timeout(60)
def test_a_group_id_belongs_to_one_type(broker, raw):
    topic, share, classic = unique("sq"), unique("share"), unique("classic")
    create_topic(broker.bootstrap, topic, 1)
    assert int(raw.heartbeat(share, "m1", 0, [topic]).error_code) == 0
    # A classic group (here: only committed offsets) is not a share group ...
    commit = raw.request(8, 8, {"group_id": classic, "generation_id_or_member_epoch": -1,
                                "member_id": "", "group_instance_id": None,
                                "topics": [{"name": topic, "partitions": [
                                    {"partition_index": 0, "committed_offset": 0,
                                     "committed_leader_epoch": -1,
                                     "committed_metadata": ""}]}]})
    assert int(commit.topics[0].partitions[0].error_code) == 0
    refused = raw.heartbeat(classic, "m1", 0, [topic])
    assert (int(refused.error_code), refused.error_message) == (
        69, f"Group {classic} is not a share group.")
    (other,) = raw.request(77, 1, {"group_ids": [classic],
                                   "include_authorized_operations": False}).groups
    assert (int(other.error_code), other.error_message) == (
        69, f"Group {classic} is not a share group.")
    # ... and a share group is no other kind of group.
    consumer = raw.request(68, 1, {"group_id": share, "member_id": "c1", "member_epoch": 0,
                                   "rebalance_timeout": 30000,
                                   "subscribed_topic_names": [topic], "topic_partitions": []})
    assert int(consumer.error_code) == 69
    (cdesc,) = raw.request(69, 1, {"group_ids": [share],
                                   "include_authorized_operations": False}).groups
    assert int(cdesc.error_code) == 69
    joined = raw.request(11, 5, {"group_id": share, "session_timeout": 10000,
                                 "rebalance_timeout": 10000, "member_id": "",
                                 "group_instance_id": None, "protocol_type": "consumer",
                                 "protocols": [{"name": "range", "metadata": b""}]})
    assert int(joined.error_code) == 23  # INCONSISTENT_GROUP_PROTOCOL
    (v6,) = raw.request(15, 6, {"groups": [share],
                                "include_authorized_operations": False}).groups
    assert (int(v6.error_code), v6.error_message) == (69, f"Group {share} is not a classic group.")
    (v5,) = raw.request(15, 5, {"groups": [share],
                                "include_authorized_operations": False}).groups
    assert (int(v5.error_code), v5.group_state, v5.members) == (0, "Dead", ())
    # Offsets: a share group has none; a commit is refused, a fetch finds nothing.
    fetched = raw.request(9, 8, {"groups": [{"group_id": share, "topics": None}],
                                 "require_stable": False})
    assert int(fetched.groups[0].error_code) == 0 and fetched.groups[0].topics == ()
    fetched = raw.request(9, 8, {"groups": [{"group_id": share, "topics": [
        {"name": topic, "partition_indexes": [0]}]}], "require_stable": False})
    part = fetched.groups[0].topics[0].partitions[0]
    assert (int(part.error_code), part.committed_offset) == (0, -1)
    commit = raw.request(8, 8, {"group_id": share, "generation_id_or_member_epoch": -1,
                                "member_id": "", "group_instance_id": None,
                                "topics": [{"name": topic, "partitions": [
                                    {"partition_index": 0, "committed_offset": 5,
                                     "committed_leader_epoch": -1,
                                     "committed_metadata": ""}]}]})
    assert int(commit.topics[0].partitions[0].error_code) == 69
    assert raw.describe(share).group_state == "Stable"  # untouched


@pytest.mark.timeout(60)
def test_delete_needs_an_empty_group(broker, raw):
    topic, group = unique("sq"), unique("sg")
    create_topic(broker.bootstrap, topic, 1)
    assert int(raw.heartbeat(group, "m1", 0, [topic]).error_code) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as refused:
        admin.delete_consumer_groups([group])[group].result(15)
    assert refused.value.args[0].code() == 68  # NON_EMPTY_GROUP
    assert raw.describe(group).group_state == "Stable"
    assert int(raw.heartbeat(group, "m1", -1).error_code) == 0
    admin.delete_consumer_groups([group])[group].result(15)
    gone = raw.describe(group)
    assert (int(gone.error_code), gone.error_message) == (69, f"Group {group} not found.")
    assert group not in raw.list_groups()
    deleted = raw.request(42, 2, {"groups_names": [group]})
    assert int(deleted.results[0].error_code) == 69


def group_resource(group: str, **changes: str | None) -> ConfigResource:
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=(
        AlterConfigOpType.SET if v is not None else AlterConfigOpType.DELETE))
        for k, v in changes.items()]
    return ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)


def describe_group_configs(admin: AdminClient, group: str) -> dict[str, tuple[str, int]]:
    res = ConfigResource(ResourceType.GROUP, group)
    return {k: (v.value, int(v.source)) for k, v in admin.describe_configs([res])[res].result(15)
            .items()}


@pytest.mark.timeout(60)
def test_group_configs_through_admin_client(broker, raw):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    group = unique("cfg")
    defaults = describe_group_configs(admin, group)
    assert defaults["share.auto.offset.reset"] == ("latest", 5)
    assert defaults["share.record.lock.duration.ms"] == ("30000", 5)
    assert defaults["share.delivery.count.limit"] == ("5", 5)
    assert defaults["share.partition.max.record.locks"] == ("2000", 5)
    assert defaults["share.isolation.level"] == ("read_uncommitted", 5)
    assert defaults["share.renew.acknowledge.enable"] == ("true", 5)
    assert defaults["share.session.timeout.ms"] == (str(SESSION_MS), 5)  # broker override
    assert defaults["share.heartbeat.interval.ms"] == (str(HEARTBEAT_MS), 5)

    res = group_resource(group, share_auto_offset_reset="by_duration:PT1H",
                         share_record_lock_duration_ms="20000",
                         share_isolation_level="read_committed",
                         share_delivery_count_limit="3")
    admin.incremental_alter_configs([res])[res].result(15)
    after = describe_group_configs(admin, group)
    assert after["share.auto.offset.reset"] == ("by_duration:PT1H", 8)  # GROUP_CONFIG
    assert after["share.record.lock.duration.ms"] == ("20000", 8)
    assert after["share.isolation.level"] == ("read_committed", 8)
    assert after["share.delivery.count.limit"] == ("3", 8)

    bad = {"share_auto_offset_reset": "EARLIEST", "share_record_lock_duration_ms": "999",
           "share_delivery_count_limit": "11", "share_partition_max_record_locks": "5000",
           "share_isolation_level": "serializable", "share_renew_acknowledge_enable": "maybe",
           "share_session_timeout_ms": "abc", "share_unknown_key": "1"}
    messages = {}
    for key, value in bad.items():
        res = group_resource(group, **{key: value})
        with pytest.raises(KafkaException) as refused:
            admin.incremental_alter_configs([res])[res].result(15)
        assert refused.value.args[0].code() == 40, key  # INVALID_CONFIG
        messages[key] = refused.value.args[0].str()
    assert "share.delivery.count.limit must be in the range 2 to 10 inclusive." in \
        messages["share_delivery_count_limit"]
    assert "Value must be at least 1000" in messages["share_record_lock_duration_ms"]
    assert "Unknown group config name: share.unknown.key" in messages["share_unknown_key"]
    assert describe_group_configs(admin, group) == after  # nothing changed

    res = group_resource(group, share_delivery_count_limit=None)  # DELETE: back to default
    admin.incremental_alter_configs([res])[res].result(15)
    assert describe_group_configs(admin, group)["share.delivery.count.limit"] == ("5", 5)

    # The share fetch path reads the effective value (share_group_config): the lock
    # duration in force is what ShareFetch reports.
    topic = unique("sq")
    create_topic(broker.bootstrap, topic, 1)
    joined = raw.heartbeat(group, "m1", 0, [topic])
    topic_id = joined.assignment.topic_partitions[0].topic_id
    fetched = raw.request(78, 1, {
        "group_id": group, "member_id": "m1", "share_session_epoch": 0, "max_wait": 0,
        "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10,
        "forgotten_topics_data": [], "topics": [{"topic_id": topic_id, "partitions": [
            {"partition_index": 0, "acknowledgement_batches": []}]}]})
    assert fetched.acquisition_lock_timeout.total_seconds() * 1000 == 20000


@pytest.mark.timeout(120)
def test_kill_9_keeps_groups_and_configs(broker_factory, tmp_path):
    proc = broker_factory(*SHARE_OVERRIDES, "--override",
                          "group.share.session.timeout.ms=60000", data_dir=tmp_path / "d")
    topic, group, empty = unique("sq"), unique("sg"), unique("sg-empty")
    create_topic(proc.bootstrap, topic, 3)
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    res = group_resource(group, share_auto_offset_reset="earliest")
    admin.incremental_alter_configs([res])[res].result(15)
    raw = Raw(proc.port)
    try:
        epochs = {}
        for m in ("a", "b"):
            epochs[m] = raw.heartbeat(group, m, 0, [topic]).member_epoch
        epochs["a"] = raw.heartbeat(group, "a", epochs["a"]).member_epoch
        assert int(raw.heartbeat(empty, "x", 0, [topic]).error_code) == 0
        assert int(raw.heartbeat(empty, "x", -1).error_code) == 0
        before = summary(raw.describe(group))
        before_empty = summary(raw.describe(empty))
    finally:
        raw.close()
    proc.kill()
    proc.start()
    raw = Raw(proc.port)
    try:
        # Loading (14), or on three brokers not yet placed (15) or forwarded (16): a client
        # asks again, as here, until the coordinator answers.
        entry = wait_for(lambda: (d := raw.describe(group))
                         and int(d.error_code) not in COORDINATOR_MOVING and d)
        assert summary(entry) == before
        # The two groups may sit on different coordinator partitions, each loading on its own.
        entry = wait_for(lambda: (d := raw.describe(empty))
                         and int(d.error_code) not in COORDINATOR_MOVING and d)
        assert summary(entry) == before_empty
        assert before_empty[1] == "Empty"
        # The members keep their epochs: a heartbeat goes on where it left off.
        resp = raw.heartbeat(group, "a", epochs["a"])
        assert (int(resp.error_code), resp.member_epoch) == (0, epochs["a"])
    finally:
        raw.close()
    assert describe_group_configs(admin, group)["share.auto.offset.reset"] == ("earliest", 8)
