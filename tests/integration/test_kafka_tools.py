"""Apache Kafka's own command-line tools (4.3.1, Java clients nobody here wrote) against
headwater, each outcome asserted. A tool that fails here is a headwater bug, or a
divergence documented in docs/kafka-tools.md.

Every tool is a JVM start (~1 s on 2 cores), so each test runs only the invocations
that show its outcome.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.support.broker_process import BrokerProcess
from tests.support.kafka_reference import KafkaReference, run_tool

pytestmark = pytest.mark.timeout(180)


def tool(name: str, bootstrap: str, *args: str, timeout: float = 60.0,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    """A tool with `--bootstrap-server` first, as every admin tool takes it."""
    return run_tool(name, "--bootstrap-server", bootstrap, *args, timeout=timeout,
                    check=check)


def produce(bootstrap: str, topic: str, count: int, partition: int | None = None) -> None:
    """Records `0..count-1` with librdkafka (faster than another JVM)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        if partition is None:
            p.produce(topic, value=str(i).encode(), key=str(i).encode())
        else:
            p.produce(topic, value=str(i).encode(), key=str(i).encode(), partition=partition)
    assert p.flush(30) == 0


def describe_topic(bootstrap: str, topic: str) -> str:
    return tool("kafka-topics", bootstrap, "--describe", "--topic", topic).stdout


def poll_until(check, timeout: float = 30.0, what: str = "condition"):  # noqa: ANN001, ANN201
    """Call `check()` until it returns something truthy or the deadline passes."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"{what} not reached in {timeout}s (last: {last!r})")


# --- the reference itself -------------------------------------------------------------


def test_reference_kafka_answers_kafka_topics(kafka_ref: KafkaReference,
                                              topic_name: str) -> None:
    """The fixture's Apache Kafka is a working broker: the same tool the headwater tests
    use creates and describes a topic on it."""
    out = tool("kafka-topics", kafka_ref.bootstrap, "--create", "--topic", topic_name,
               "--partitions", "2").stdout
    assert f"Created topic {topic_name}." in out
    desc = describe_topic(kafka_ref.bootstrap, topic_name)
    assert "PartitionCount: 2" in desc
    assert len(re.findall(r"Partition: \d+\s+Leader: 1", desc)) == 2


# --- kafka-topics, kafka-configs ------------------------------------------------------


def test_kafka_topics_create_describe_alter_delete(broker: BrokerProcess,
                                                   topic_name: str) -> None:
    b = broker.bootstrap
    out = tool("kafka-topics", b, "--create", "--topic", topic_name, "--partitions", "2",
               "--replication-factor", "1", "--config", "retention.ms=3600000").stdout
    assert f"Created topic {topic_name}." in out
    desc = describe_topic(b, topic_name)
    assert re.search(rf"Topic: {re.escape(topic_name)}\s+TopicId: \S+\s+PartitionCount: 2\s+"
                     r"ReplicationFactor: 1", desc), desc
    assert "retention.ms=3600000" in desc
    assert len(re.findall(r"Partition: \d+\s+Leader: 1\s+Replicas: 1\s+Isr: 1", desc)) == 2

    tool("kafka-topics", b, "--alter", "--topic", topic_name, "--partitions", "4")
    desc = describe_topic(b, topic_name)
    assert "PartitionCount: 4" in desc
    assert sorted(map(int, re.findall(r"Partition: (\d+)\s+Leader", desc))) == [0, 1, 2, 3]

    tool("kafka-topics", b, "--delete", "--topic", topic_name)
    listed = tool("kafka-topics", b, "--list").stdout.split()
    assert topic_name not in listed


def test_kafka_configs_topic_and_broker_default(broker: BrokerProcess,
                                                topic_name: str) -> None:
    b = broker.bootstrap
    tool("kafka-topics", b, "--create", "--topic", topic_name, "--partitions", "1")
    out = tool("kafka-configs", b, "--alter", "--entity-type", "topics", "--entity-name",
               topic_name, "--add-config", "retention.ms=7200000,cleanup.policy=compact").stdout
    assert f"Completed updating config for topic {topic_name}." in out
    desc = tool("kafka-configs", b, "--describe", "--entity-type", "topics",
                "--entity-name", topic_name).stdout
    assert "retention.ms=7200000 sensitive=false" in desc, desc
    assert "cleanup.policy=compact sensitive=false" in desc, desc
    assert "DYNAMIC_TOPIC_CONFIG:retention.ms=7200000" in desc, desc

    # The cluster-wide default of a topic config; a topic without an override follows it.
    try:
        out = tool("kafka-configs", b, "--alter", "--entity-type", "brokers",
                   "--entity-default", "--add-config", "log.retention.ms=5400000").stdout
        assert "Completed updating default config for brokers in the cluster." in out
        desc = tool("kafka-configs", b, "--describe", "--entity-type", "brokers",
                    "--entity-default").stdout
        assert "log.retention.ms=5400000 sensitive=false" in desc, desc
        tool("kafka-configs", b, "--alter", "--entity-type", "topics", "--entity-name",
             topic_name, "--delete-config", "retention.ms")
        desc = tool("kafka-configs", b, "--describe", "--all", "--entity-type", "topics",
                    "--entity-name", topic_name).stdout
        assert re.search(r"retention\.ms=5400000 sensitive=false synonyms=\{"
                         r"DYNAMIC_DEFAULT_BROKER_CONFIG:log\.retention\.ms=5400000", desc), desc
    finally:
        tool("kafka-configs", b, "--alter", "--entity-type", "brokers", "--entity-default",
             "--delete-config", "log.retention.ms")


# --- offsets, records, log dirs, features ---------------------------------------------


def test_kafka_get_offsets_and_delete_records(broker: BrokerProcess, topic_name: str,
                                              tmp_path: Path) -> None:
    b = broker.bootstrap
    tool("kafka-topics", b, "--create", "--topic", topic_name, "--partitions", "2")
    produce(b, topic_name, 10, partition=0)
    produce(b, topic_name, 3, partition=1)
    latest = tool("kafka-get-offsets", b, "--topic", topic_name, "--time", "-1").stdout
    assert sorted(latest.split()) == [f"{topic_name}:0:10", f"{topic_name}:1:3"]

    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic_name, "partition": 0, "offset": 6}]}))
    out = tool("kafka-delete-records", b, "--offset-json-file", str(spec)).stdout
    assert re.search(rf"partition: {re.escape(topic_name)}-0\s+low_watermark: 6", out), out

    earliest = tool("kafka-get-offsets", b, "--topic", topic_name, "--time", "-2").stdout
    assert sorted(earliest.split()) == [f"{topic_name}:0:6", f"{topic_name}:1:0"]


def test_kafka_log_dirs(broker: BrokerProcess, topic_name: str) -> None:
    b = broker.bootstrap
    tool("kafka-topics", b, "--create", "--topic", topic_name, "--partitions", "2")
    produce(b, topic_name, 20, partition=1)
    out = tool("kafka-log-dirs", b, "--describe", "--topic-list", topic_name).stdout
    doc = json.loads(out.strip().splitlines()[-1])
    (entry,) = doc["brokers"]
    assert entry["broker"] == 1
    (logdir,) = entry["logDirs"]
    assert Path(logdir["logDir"]).resolve() == broker.data_dir.resolve()
    assert logdir["error"] is None
    sizes = {p["partition"]: p["size"] for p in logdir["partitions"]}
    assert set(sizes) == {f"{topic_name}-0", f"{topic_name}-1"}
    assert sizes[f"{topic_name}-0"] == 0 and sizes[f"{topic_name}-1"] > 0


def test_kafka_features_describe(broker: BrokerProcess) -> None:
    """ApiVersions v3+ carries the feature levels; headwater finalizes metadata.version
    4.0-IV3 and group.version 1 (KIP-848), and leaves transaction.version at 0 (no
    KIP-890 part 2)."""
    out = tool("kafka-features", broker.bootstrap, "describe").stdout
    features = {name: (lo, hi, level) for name, lo, hi, level in re.findall(
        r"Feature: (\S+)\s+SupportedMinVersion: (\S+)\s+SupportedMaxVersion: (\S+)\s+"
        r"FinalizedVersionLevel: (\S+)", out)}
    assert features["metadata.version"] == ("3.3-IV3", "4.0-IV3", "4.0-IV3"), out
    assert features["group.version"] == ("0", "1", "1"), out
    assert features["transaction.version"] == ("0", "0", "0"), out
