"""Which group admin APIs create a group that does not exist, headwater beside Apache
Kafka 4.4.0 (the `kafka_ref` oracle).

Kafka's AlterShareGroupOffsets on a group id nobody ever used creates a share group
(`getOrMaybeCreateShareGroup(groupId, true)`) and initializes its share-partitions, so a
share consumer joining later starts at the altered offsets; an admin OffsetCommit
(generation -1, confluent-kafka's `alter_consumer_group_offsets`) creates an empty classic
group. Describe and delete do not create. Each step is followed by ListGroups (v5, with
types) to see what exists; error codes, group states and types must agree.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.kafka_reference import create_topic
from tests.support.routing import RETRY, call

pytestmark = pytest.mark.timeout(300)

def scenario(bootstrap: str) -> dict[str, Any]:
    port = int(bootstrap.rsplit(":", 1)[1])
    topic = "ga-topic"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    create_topic(bootstrap, topic, 2)
    out: dict[str, Any] = {}
    # Kafka creates __consumer_offsets on the first FindCoordinator.
    call(port, 10, 4, {"key_type": 0, "coordinator_keys": ["ga-s"]},
         lambda r: r.coordinators[0].error_code)

    def groups() -> list[tuple[str, str, str]]:
        resp = call(port, 16, 5, {"states_filter": [], "types_filter": []})
        return sorted((g.group_id, g.group_state, g.group_type) for g in resp.groups
                      if g.group_id.startswith("ga-"))

    def alter_share(group: str, name: str = topic, offset: int = 3) -> Any:
        resp = call(port, 91, 0, {"group_id": group, "topics": [
            {"topic_name": name, "partitions": [{"partition_index": 0,
                                                 "start_offset": offset}]}]})
        return (int(resp.error_code), resp.error_message,
                [(t.topic_name, [(p.partition_index, int(p.error_code)) for p in t.partitions])
                 for t in resp.responses])

    def alter_share_known(group: str, offset: int) -> Any:
        """`alter_share` on the topic created above, asked again while a partition
        answers UNKNOWN_TOPIC_OR_PARTITION or a coordinator is loading: Kafka's share
        coordinator learns of a new topic (and creates __share_group_state) a moment after
        its broker lists the topic's leaders, and nothing is created meanwhile (seen in
        CI: the whole scenario then diverged from its first alter)."""
        deadline = time.monotonic() + 60
        while True:
            result = alter_share(group, offset=offset)
            codes = {c for _t, parts in result[2] for _p, c in parts}
            if not (codes & (RETRY | {3}) or result[0] in RETRY) \
                    or time.monotonic() > deadline:
                return result
            time.sleep(0.2)

    def describe_share(group: str) -> Any:
        resp = call(port, 90, 1, {"groups": [{"group_id": group, "topics": None}]},
                    lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        return (int(g.error_code), g.error_message,
                sorted((t.topic_name, p.partition_index, p.start_offset, p.lag)
                       for t in g.topics for p in t.partitions))

    def describe_share_named(group: str) -> Any:
        resp = call(port, 90, 1, {"groups": [{"group_id": group, "topics": [
            {"topic_name": topic, "partitions": [0, 1]}]}]},
            lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        return (int(g.error_code), g.error_message,
                sorted((t.topic_name, p.partition_index, p.start_offset, p.lag, int(p.error_code))
                       for t in g.topics for p in t.partitions))

    def delete_share(group: str) -> Any:
        resp = call(port, 92, 0, {"group_id": group, "topics": [{"topic_name": topic}]})
        return (int(resp.error_code), resp.error_message,
                [(t.topic_name, int(t.error_code)) for t in resp.responses])

    def describe_group(group: str) -> Any:  # ShareGroupDescribe
        resp = call(port, 77, 1, {"group_ids": [group], "include_authorized_operations": False},
                    lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        return int(g.error_code), g.group_state, len(g.members)

    # Describe and delete of share offsets on unknown groups create nothing.
    out["describe share unknown"] = describe_share("ga-d")
    out["describe share named unknown"] = describe_share_named("ga-d")
    out["delete share unknown"] = delete_share("ga-x")
    out["groups after describe/delete"] = groups()

    # Alter on a group nobody used: Kafka creates the share group.
    out["alter share unknown"] = alter_share_known("ga-s", 3)
    out["groups after alter"] = groups()
    out["share describe after alter"] = describe_group("ga-s")
    out["offsets after alter"] = describe_share("ga-s")
    out["alter share again"] = alter_share_known("ga-s", 1)
    out["offsets after second alter"] = describe_share("ga-s")
    out["delete share offsets"] = delete_share("ga-s")
    out["offsets after delete"] = describe_share("ga-s")
    out["groups after delete offsets"] = groups()
    # An unknown topic on an unknown group: the partition fails; is the group created?
    out["alter share unknown topic"] = alter_share("ga-u", name="ga-missing")
    out["groups after alter unknown topic"] = groups()

    # Consumer groups: an admin OffsetCommit creates an empty classic group.
    # The partition's error is in the result, never raised: Kafka answers
    # COORDINATOR_LOAD_IN_PROGRESS while ga-c's __consumer_offsets partition loads
    # (FindCoordinator above loaded only ga-s's), so ask again as for the raw calls.
    deadline = time.monotonic() + 60
    while True:
        done = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            "ga-c", [TopicPartition(topic, 0, 5)])])["ga-c"].result(30)
        error = done.topic_partitions[0].error
        if error is None or error.code() not in RETRY or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    out["alter consumer offsets"] = None if error is None else error.code()
    out["groups after alter consumer offsets"] = groups()
    commit = call(port, 8, 9, {"group_id": "ga-c2", "generation_id_or_member_epoch": -1,
                               "member_id": "", "group_instance_id": None, "topics": [
                                   {"name": topic, "partitions": [{
                                       "partition_index": 1, "committed_offset": 2,
                                       "committed_leader_epoch": -1,
                                       "committed_metadata": None}]}]},
                  lambda r: r.topics[0].partitions[0].error_code)
    out["raw offset commit unknown"] = int(commit.topics[0].partitions[0].error_code)
    out["groups after raw commit"] = groups()
    delete = call(port, 47, 0, {"group_id": "ga-o", "topics": [
        {"name": topic, "partitions": [{"partition_index": 0}]}]})
    out["offset delete unknown"] = int(delete.error_code)
    out["groups after offset delete"] = groups()
    # The share APIs on a classic group, and the classic commit on a share group.
    out["alter share on classic"] = alter_share("ga-c")
    out["describe share on classic"] = describe_share("ga-c")
    out["delete share on classic"] = delete_share("ga-c")
    commit = call(port, 8, 9, {"group_id": "ga-s", "generation_id_or_member_epoch": -1,
                               "member_id": "", "group_instance_id": None, "topics": [
                                   {"name": topic, "partitions": [{
                                       "partition_index": 0, "committed_offset": 2,
                                       "committed_leader_epoch": -1,
                                       "committed_metadata": None}]}]},
                  lambda r: r.topics[0].partitions[0].error_code)
    out["offset commit on share"] = int(commit.topics[0].partitions[0].error_code)
    out["groups at end"] = groups()
    return out


def test_group_admin_creates_groups_as_kafka_does(broker, kafka_ref):
    ours, theirs = scenario(broker.bootstrap), scenario(kafka_ref.bootstrap)
    diffs = {k: (ours.get(k), theirs.get(k)) for k in sorted(set(ours) | set(theirs))
             if ours.get(k) != theirs.get(k)}
    assert not diffs, "\n".join(f"{k}: headwater {o!r} / kafka {t!r}"
                                for k, (o, t) in diffs.items())
    # The point of the issue: the altered share group exists and has its offsets.
    assert ("ga-s", "Empty", "share") in theirs["groups after alter"]
    # start 3 on an empty partition: lag = 0 - 3 - 0, as Kafka computes it
    assert theirs["offsets after alter"][2] == [("ga-topic", 0, 3, -3)]


@pytest.fixture
def broker(broker_factory):  # a fresh headwater
    return broker_factory()
