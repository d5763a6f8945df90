"""Differential tests: the same client, the same scenario, against headwater and against
Apache Kafka 4.4.0 (the `kafka_ref` reference, one per module), comparing what a client
can observe: error codes of bad requests, ListOffsets answers, a new topic's described
configs, a described group.

Each test observes both brokers with one function and asserts the two observations are
equal, and that Kafka's is what we expect (so a change on either side shows). Where
headwater differs on purpose, the test asserts that difference explicitly and
docs/differences.md says why.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from headwater.records.batch import build_batch
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_reference import KafkaReference
from tests.support.wire import RawClient

pytestmark = pytest.mark.timeout(240)

Target = BrokerProcess | KafkaReference

OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
MEMBER_ID_REQUIRED = 79
STALE_MEMBER_EPOCH = 113
# Not ready yet, retried: leader not available / not leader / coordinator loading, not
# available, not coordinator (Kafka's first moments after a topic or group appears).
RETRY_CODES = {5, 6, 14, 15, 16}


@pytest.fixture(scope="module")
def both(broker: BrokerProcess, kafka_ref: KafkaReference) -> dict[str, Target]:
    """headwater and the Apache Kafka reference, observed side by side."""
    return {"headwater": broker, "kafka": kafka_ref}


def observe(both: dict[str, Target], fn: Callable[[str], Any]) -> dict[str, Any]:
    """`fn(bootstrap)` on each broker."""
    return {name: fn(target.bootstrap) for name, target in both.items()}


def unique(prefix: str) -> str:
    return f"diff-{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    """Create and wait until the partitions have a leader (Kafka needs a moment)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(30)
    deadline = time.monotonic() + 30
    while True:
        md = admin.list_topics(name, timeout=10).topics[name]
        if md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 for p in md.partitions.values()):
            return
        assert time.monotonic() < deadline, f"{name} has no leader: {md}"
        time.sleep(0.1)


def raw_call(bootstrap: str, api_key: int, version: int, body: dict,
             code: Callable[[Any], int], timeout: float = 30.0) -> Any:
    """One exact request, repeated while `code(response)` says the broker is not ready."""
    host, port = bootstrap.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while True:
        raw = RawClient(host, int(port))
        try:
            resp = raw.request(api_key, version, body)
        finally:
            raw.close()
        if code(resp) not in RETRY_CODES or time.monotonic() > deadline:
            return resp
        time.sleep(0.1)


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, int]],
            partition: int = 0) -> None:
    """One batch of (value, timestamp ms) records, acks=all."""
    now = int(time.time() * 1000)
    batch = build_batch([(b"k", value, [], ts if ts else now) for value, ts in records])
    resp = raw_call(bootstrap, 0, 9, {"acks": -1, "timeout": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]},
        lambda r: int(r.responses[0].partition_responses[0].error_code))
    assert int(resp.responses[0].partition_responses[0].error_code) == 0


# ---- error codes of bad requests ------------------------------------------------------


def produce_to_missing_partition(bootstrap: str) -> dict[str, Any]:
    """Produce v9 to partition 3 of a 1-partition topic and to a topic that does not
    exist; librdkafka to the missing partition."""
    topic = unique("nopart")
    create_topic(bootstrap, topic)
    now = int(time.time() * 1000)
    batch = build_batch([(b"k", b"v", [], now)])
    host, port = bootstrap.rsplit(":", 1)
    raw = RawClient(host, int(port))
    codes = {}
    try:
        for name, part in ((topic, 3), (unique("missing"), 0)):
            resp = raw.request(0, 9, {"acks": -1, "timeout": 5000, "topic_data": [
                {"name": name, "partition_data": [{"index": part, "records": batch}]}]})
            p = resp.responses[0].partition_responses[0]
            codes["missing partition" if name == topic else "missing topic"] = (
                int(p.error_code), int(p.base_offset))
    finally:
        raw.close()
    errors: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5000})
    try:
        producer.produce(topic, b"v", partition=3,
                         on_delivery=lambda err, _m: errors.append(err.code() if err else 0))
        producer.flush(15)
    except KafkaException as exc:
        errors.append(exc.args[0].code())
    codes["librdkafka"] = errors
    return codes


def test_produce_to_a_missing_partition(both: dict[str, Target]) -> None:
    seen = observe(both, produce_to_missing_partition)
    assert seen["headwater"] == seen["kafka"]
    assert seen["kafka"] == {"missing partition": (UNKNOWN_TOPIC_OR_PARTITION, -1),
                             "missing topic": (UNKNOWN_TOPIC_OR_PARTITION, -1),
                             "librdkafka": [KafkaError._UNKNOWN_PARTITION]}


INVALID_TOPICS: dict[str, dict[str, Any]] = {
    "unknown key": {"config": {"no.such.config": "1"}},
    "bad enum": {"config": {"cleanup.policy": "bogus"}},
    "not a number": {"config": {"retention.ms": "abc"}},
    "below minimum": {"config": {"segment.bytes": "10"}},
    "bad compression": {"config": {"compression.type": "brotli"}},
    "zero partitions": {"partitions": 0},
    "replicas above the brokers": {"replication": "brokers + 1"},
}


def create_invalid_topics(target: Target) -> dict[str, tuple[int, str]]:
    """AdminClient CreateTopics with each invalid setting: (error code, message). One
    replica more than the target has brokers (Kafka's reference: one; a cluster: all
    of them) is named RF in the message, their number N."""
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    brokers = len(target.node_ids)
    out = {}
    for case, spec in INVALID_TOPICS.items():
        name = unique("badcfg")
        replication = brokers + 1 if spec.get("replication") else 1
        topic = NewTopic(name, spec.get("partitions", 1), replication,
                         config=spec.get("config", {}))
        try:
            admin.create_topics([topic])[name].result(30)
            out[case] = (0, "created")
        except KafkaException as exc:
            err = exc.args[0]
            message = err.str()
            if spec.get("replication"):
                message = re.sub(rf"\b{replication}\b", "RF",
                                 message.replace(f"only {brokers} broker", "only N broker"))
            out[case] = (err.code(), message)
    return out


def test_create_topics_with_invalid_settings(both: dict[str, Target]) -> None:
    """Same codes and Kafka's messages; the one difference is segment.bytes' minimum
    (docs/differences.md): 1048576 in Kafka 4, 14 in headwater."""
    seen = {name: create_invalid_topics(target) for name, target in both.items()}
    hw, kafka = seen["headwater"], seen["kafka"]
    assert {case: code for case, (code, _) in kafka.items()} == {
        "unknown key": INVALID_CONFIG, "bad enum": INVALID_CONFIG,
        "not a number": INVALID_CONFIG, "below minimum": INVALID_CONFIG,
        "bad compression": INVALID_CONFIG, "zero partitions": INVALID_PARTITIONS,
        "replicas above the brokers": INVALID_REPLICATION_FACTOR}
    assert "only N broker" in kafka["replicas above the brokers"][1]
    minimum = "Invalid value 10 for configuration segment.bytes: Value must be at least {}"
    assert kafka["below minimum"] == (INVALID_CONFIG, minimum.format(1048576))
    assert hw["below minimum"] == (INVALID_CONFIG, minimum.format(14))
    assert {**hw, "below minimum": kafka["below minimum"]} == kafka


def fetch_past_the_end(bootstrap: str) -> dict[str, Any]:
    """Fetch v12 at the log end, past it and before the start; a librdkafka consumer
    with auto.offset.reset=error assigned past the end."""
    topic = unique("fetchend")
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, [(b"a", 0), (b"b", 0), (b"c", 0)])
    out: dict[str, Any] = {}
    for case, offset in (("at end", 3), ("past end", 10), ("negative", -5)):
        resp = raw_call(bootstrap, 1, 12, {
            "cluster_id": None, "replica_id": -1, "max_wait": 0, "min_bytes": 1,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""},
            lambda r: int(r.responses[0].partitions[0].error_code))
        p = resp.responses[0].partitions[0]
        out[case] = (int(p.error_code), int(p.high_watermark), int(p.log_start_offset),
                     len(p.records or b""))
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"),
                  "auto.offset.reset": "error", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 10)])
        deadline = time.monotonic() + 20
        got = None
        while got is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                got = m.error().code() if m.error() else ("record", m.offset())
        out["librdkafka"] = got
    finally:
        c.close()
    return out


def test_fetch_past_the_end(both: dict[str, Target]) -> None:
    seen = observe(both, fetch_past_the_end)
    assert seen["headwater"] == seen["kafka"]
    assert seen["kafka"] == {"at end": (0, 3, 0, 0),
                             "past end": (OFFSET_OUT_OF_RANGE, -1, -1, 0),
                             "negative": (OFFSET_OUT_OF_RANGE, -1, -1, 0),
                             "librdkafka": KafkaError._AUTO_OFFSET_RESET}


def idempotent_reinit(bootstrap: str) -> tuple[int, bool, int]:
    """An idempotent producer's InitProducerId naming its id and epoch (as librdkafka
    sends it to reset its sequences, KIP-360): (error, a new producer id?, its epoch)."""
    body = {"transactional_id": None, "transaction_timeout": 60000,
            "producer_id": -1, "producer_epoch": -1}
    first = raw_call(bootstrap, 22, 4, body, lambda r: int(r.error_code))
    again = raw_call(bootstrap, 22, 4, {**body, "producer_id": first.producer_id,
                                        "producer_epoch": first.producer_epoch},
                     lambda r: int(r.error_code))
    return (int(again.error_code), int(again.producer_id) != int(first.producer_id),
            int(again.producer_epoch))


def test_an_idempotent_producer_reinitialised_gets_a_new_id(both: dict[str, Target]
                                                             ) -> None:
    seen = observe(both, idempotent_reinit)
    assert seen["headwater"] == seen["kafka"] == (0, True, 0)


def find_coordinator(bootstrap: str, group: str) -> None:
    """FindCoordinator v3 until it answers: Kafka creates __consumer_offsets on the first
    lookup, and answers group requests with NOT_COORDINATOR before."""
    resp = raw_call(bootstrap, 10, 3, {"key": group, "key_type": 0},
                    lambda r: int(r.error_code))
    assert int(resp.error_code) == 0


def commit_v9(bootstrap: str, group: str, topic: str, generation: int, member: str) -> int:
    """OffsetCommit v9 of `topic`-0 at offset 1: the partition's error code."""
    resp = raw_call(bootstrap, 8, 9, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": None, "topics": [{"name": topic, "partitions": [{
            "partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
            "committed_metadata": ""}]}]},
        lambda r: int(r.topics[0].partitions[0].error_code))
    return int(resp.topics[0].partitions[0].error_code)


def classic_stale_commits(bootstrap: str) -> dict[str, Any]:
    """A classic member (JoinGroup v9 + SyncGroup v5) commits with its generation, the
    one before, the one after, and as an unknown member."""
    topic, group = unique("classic"), unique("classic-g")
    create_topic(bootstrap, topic)
    find_coordinator(bootstrap, group)

    def join(member: str) -> Any:
        return raw_call(bootstrap, 11, 9, {
            "group_id": group, "session_timeout": 30000, "rebalance_timeout": 30000,
            "member_id": member, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}], "reason": None},
            lambda r: int(r.error_code))

    first = join("")
    assert int(first.error_code) == MEMBER_ID_REQUIRED
    joined = join(first.member_id)
    assert int(joined.error_code) == 0
    member, gen = joined.member_id, int(joined.generation_id)
    synced = raw_call(bootstrap, 14, 5, {
        "group_id": group, "generation_id": gen, "member_id": member,
        "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": member, "assignment": b""}]},
        lambda r: int(r.error_code))
    assert int(synced.error_code) == 0
    return {"generation": gen,
            "older generation": commit_v9(bootstrap, group, topic, gen - 1, member),
            "newer generation": commit_v9(bootstrap, group, topic, gen + 1, member),
            "unknown member": commit_v9(bootstrap, group, topic, gen, "nobody"),
            "current": commit_v9(bootstrap, group, topic, gen, member)}


def test_classic_commit_with_a_stale_generation(both: dict[str, Target]) -> None:
    seen = observe(both, classic_stale_commits)
    assert seen["headwater"] == seen["kafka"]
    assert seen["kafka"] == {"generation": 1, "older generation": ILLEGAL_GENERATION,
                             "newer generation": ILLEGAL_GENERATION,
                             "unknown member": UNKNOWN_MEMBER_ID, "current": 0}


def consumer_stale_commits(bootstrap: str) -> dict[str, Any]:
    """A KIP-848 member (ConsumerGroupHeartbeat v0) commits with its member epoch, the one
    before, the one after, and as an unknown member."""
    topic, group = unique("kip848"), unique("kip848-g")
    create_topic(bootstrap, topic)
    find_coordinator(bootstrap, group)
    hb = raw_call(bootstrap, 68, 0, {
        "group_id": group, "member_id": "", "member_epoch": 0, "instance_id": None,
        "rack_id": None, "rebalance_timeout": 30000, "subscribed_topic_names": [topic],
        "server_assignor": None, "topic_partitions": []}, lambda r: int(r.error_code))
    assert int(hb.error_code) == 0
    member, epoch = hb.member_id, int(hb.member_epoch)
    return {"epoch": epoch,
            "older epoch": commit_v9(bootstrap, group, topic, epoch - 1, member),
            "newer epoch": commit_v9(bootstrap, group, topic, epoch + 1, member),
            "unknown member": commit_v9(bootstrap, group, topic, epoch, "nobody"),
            "current": commit_v9(bootstrap, group, topic, epoch, member)}


def test_consumer_group_commit_with_a_stale_member_epoch(both: dict[str, Target]) -> None:
    """Same codes; the first member epoch differs (docs/differences.md): Kafka 4.3 starts
    a new group at epoch 1 with an empty assignment (KAFKA-20268), so its first member
    gets 2; headwater's gets 1."""
    seen = observe(both, consumer_stale_commits)
    assert seen["kafka"] == {"epoch": 2, "older epoch": STALE_MEMBER_EPOCH,
                             "newer epoch": STALE_MEMBER_EPOCH,
                             "unknown member": UNKNOWN_MEMBER_ID, "current": 0}
    assert seen["headwater"] == {**seen["kafka"], "epoch": 1}


# ---- ListOffsets ----------------------------------------------------------------------


def list_offsets(bootstrap: str) -> dict[str, Any]:
    """AdminClient ListOffsets (earliest, latest, max-timestamp, by time) over two batches
    whose largest timestamp is in the middle of the first, and over an empty topic;
    times are relative to the first record's."""
    topic, empty = unique("listoff"), unique("listoff-empty")
    create_topic(bootstrap, topic)
    create_topic(bootstrap, empty)
    base = int(time.time() * 1000) - 60_000
    produce(bootstrap, topic, [(b"0", base), (b"1", base + 40), (b"2", base + 10)])
    produce(bootstrap, topic, [(b"3", base + 20), (b"4", base + 30)])
    specs: dict[str, OffsetSpec] = {
        "earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
        "max timestamp": OffsetSpec.max_timestamp(),
        "at first": OffsetSpec.for_timestamp(base),
        "before all": OffsetSpec.for_timestamp(base - 1000),
        "between": OffsetSpec.for_timestamp(base + 15),
        "at last batch": OffsetSpec.for_timestamp(base + 30),
        "at max": OffsetSpec.for_timestamp(base + 40),
        "after all": OffsetSpec.for_timestamp(base + 41)}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    out: dict[str, Any] = {}
    for t in (topic, empty):
        for case, spec in specs.items():
            tp = TopicPartition(t, 0)
            info = admin.list_offsets({tp: spec}, request_timeout=15)[tp].result(20)
            ts = info.timestamp - base if info.timestamp >= 0 else info.timestamp
            out[f"{'empty ' if t == empty else ''}{case}"] = (info.offset, ts,
                                                            info.leader_epoch)
    return out


def test_list_offsets(both: dict[str, Target]) -> None:
    seen = observe(both, list_offsets)
    assert seen["headwater"] == seen["kafka"]
    kafka = seen["kafka"]
    assert {case: kafka[case] for case in ("earliest", "latest", "max timestamp", "between",
                                           "after all")} == {
        "earliest": (0, -1, 0), "latest": (5, -1, 0), "max timestamp": (1, 40, 0),
        "between": (1, 40, 0), "after all": (-1, -1, None)}


# ---- DescribeConfigs of a new topic ---------------------------------------------------


DEFAULT_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DYNAMIC_TOPIC_CONFIG = 5, 3, 1
# Keys Kafka describes for every topic that headwater does not have: replication throttles
# (one node, no replication) and tiered storage (none here). docs/differences.md.
KAFKA_ONLY_TOPIC_KEYS = {"leader.replication.throttled.replicas",
                         "follower.replication.throttled.replicas", "remote.storage.enable",
                         "remote.log.copy.disable", "remote.log.delete.on.disable",
                         "remote.copy.lag.bytes", "remote.copy.lag.ms"}


def describe_new_topic(bootstrap: str) -> dict[str, tuple[str | None, int, bool, bool]]:
    """A new topic with one override: each key's (value, source, read-only, sensitive)."""
    topic = unique("configs")
    create_topic(bootstrap, topic, **{"retention.ms": "3600000"})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(20)
    return {name: (e.value, int(e.source), e.is_read_only, e.is_sensitive)
            for name, e in entries.items()}


def test_describe_configs_of_a_new_topic(both: dict[str, Target]) -> None:
    """Every key, value and source as Kafka's, but for the documented differences: Kafka's
    storage format writes a cluster-wide min.insync.replicas (for ELR, KIP-966), so its
    source there is DYNAMIC_DEFAULT_BROKER_CONFIG; and headwater lacks the throttle and
    tiered-storage keys (Kafka 4.4 adds remote.copy.lag.*)."""
    seen = observe(both, describe_new_topic)
    hw, kafka = seen["headwater"], seen["kafka"]
    assert kafka["retention.ms"] == hw["retention.ms"] == (
        "3600000", DYNAMIC_TOPIC_CONFIG, False, False)
    assert kafka["min.insync.replicas"] == ("1", DYNAMIC_DEFAULT_BROKER_CONFIG, False, False)
    assert hw["min.insync.replicas"] == ("1", DEFAULT_CONFIG, False, False)
    assert set(kafka) - set(hw) == KAFKA_ONLY_TOPIC_KEYS
    assert set(hw) <= set(kafka)
    assert all(kafka[k][1] == DEFAULT_CONFIG for k in KAFKA_ONLY_TOPIC_KEYS)
    assert hw["errors.deadletterqueue.group.enable"] == ("false", DEFAULT_CONFIG, False, False)
    assert hw["max.decompressed.message.bytes"] == ("2147483639", DEFAULT_CONFIG, False, False)
    same = set(hw) - {"min.insync.replicas"}
    assert len(same) >= 25
    assert {k: hw[k] for k in same} == {k: kafka[k] for k in same}


def decompressed_limit(bootstrap: str) -> dict[str, Any]:
    """Kafka 4.4's max.decompressed.message.bytes: CreateTopics validation of its value,
    then a topic limited to 100 bytes: an uncompressed batch with a 500-byte record is
    accepted, an lz4 batch holding one fails whole with INVALID_RECORD."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    refused = {}
    for value in ("-1", "0", "abc", "2147483648"):
        name = unique("decomp-bad")
        fut = admin.create_topics([NewTopic(name, 1, 1, config={
            "max.decompressed.message.bytes": value})], validate_only=True)[name]
        try:
            fut.result(30)
            refused[value] = None
        except KafkaException as exc:
            refused[value] = (exc.args[0].code(), exc.args[0].str())
    topic = unique("decomp")
    create_topic(bootstrap, topic, **{"max.decompressed.message.bytes": "100"})
    # One batch of the three records, built here and sent in one Produce: librdkafka,
    # even with a long linger, sometimes split them on a loaded machine, and a lone
    # 50-byte batch fits the limit (CI: [0, 87, 87], on either broker).
    now = int(time.time() * 1000)
    records = [(None, b"x" * size, [], now) for size in (50, 500, 50)]
    host, port = bootstrap.rsplit(":", 1)
    raw = RawClient(host, int(port))
    delivered: dict[str, int] = {}
    try:
        for codec, compression in (("none", 0), ("lz4", 3)):
            resp = raw.request(0, 9, {"acks": -1, "timeout": 5000, "topic_data": [
                {"name": topic, "partition_data": [
                    {"index": 0, "records": build_batch(records, compression=compression)}]}]})
            delivered[codec] = int(resp.responses[0].partition_responses[0].error_code)
    finally:
        raw.close()
    return {"refused": refused, "delivered": delivered}


def test_max_decompressed_message_bytes(both: dict[str, Target]) -> None:
    seen = observe(both, decompressed_limit)
    assert seen["headwater"] == seen["kafka"]
    assert seen["kafka"]["delivered"] == {"none": 0, "lz4": 87}  # INVALID_RECORD
    assert seen["kafka"]["refused"]["-1"][0] == INVALID_CONFIG


# ---- a described group ----------------------------------------------------------------


def described_group(bootstrap: str, protocol: str) -> dict[str, Any]:
    """Two librdkafka consumers of a 4-partition topic in one group, then AdminClient
    DescribeConsumerGroups once both hold their partitions."""
    topic, group = unique(f"desc-{protocol}"), unique(f"desc-{protocol}-g")
    create_topic(bootstrap, topic, partitions=4)
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "enable.auto.commit": False}
    if protocol == "classic":
        conf["session.timeout.ms"] = 10000
    consumers = [Consumer({**conf, "client.id": f"member-{i}"}) for i in range(2)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        for c in consumers:
            c.subscribe([topic])
        deadline = time.monotonic() + 60
        while True:
            for c in consumers:
                c.poll(0.2)
            desc = admin.describe_consumer_groups([group])[group].result(15)
            assigned = sorted(sorted(tp.partition for tp in m.assignment.topic_partitions)
                              for m in desc.members)
            held = sorted(sorted(tp.partition for tp in c.assignment()) for c in consumers)
            if desc.state == ConsumerGroupState.STABLE and len(desc.members) == 2 \
                    and assigned == held and sum(map(len, held)) == 4:
                break
            assert time.monotonic() < deadline, f"group never settled: {desc}"
        return {"state": desc.state, "type": desc.type, "assignor": desc.partition_assignor,
                "simple": desc.is_simple_consumer_group,
                "members": sorted((m.client_id, m.host, len(m.assignment.topic_partitions),
                                   {tp.topic for tp in m.assignment.topic_partitions} == {topic})
                                  for m in desc.members),
                "assignment": assigned}
    finally:
        for c in consumers:
            c.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_describe_a_group(both: dict[str, Target], protocol: str) -> None:
    seen = observe(both, lambda b: described_group(b, protocol))
    assert seen["headwater"] == seen["kafka"]
    kafka = seen["kafka"]
    assert (kafka["state"], kafka["type"], kafka["assignor"], kafka["assignment"]) == (
        ConsumerGroupState.STABLE,
        ConsumerGroupType.CLASSIC if protocol == "classic" else ConsumerGroupType.CONSUMER,
        "range" if protocol == "classic" else "uniform", [[0, 1], [2, 3]])
