"""Apache Kafka's own command-line tools (4.4.0, Java clients nobody here wrote) against
headwater, each outcome asserted. A tool that fails here is a headwater bug, or a
divergence documented in docs/kafka-tools.md.

Every tool is a JVM start (~1 s on 2 cores), so each test runs only the invocations
that show its outcome.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess
from tests.support.kafka_reference import KafkaReference, run_tool, tool_command
from tests.support.wire import RawClient

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
    # each led by one of the brokers (node 1 on one node), its only replica
    led = re.findall(r"Partition: \d+\s+Leader: (\d+)\s+Replicas: (\d+)\s+Isr: (\d+)", desc)
    assert len(led) == 2 and all(int(leader) in broker.node_ids and leader == r == i
                                 for leader, r, i in led), desc

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
    # one entry per broker (one node: broker 1), each with its one log dir and the
    # partitions it serves; each partition served by exactly one of them
    dirs = dict(zip(broker.node_ids, broker.data_dirs, strict=True))
    assert sorted(entry["broker"] for entry in doc["brokers"]) == broker.node_ids, doc
    served = []
    for entry in doc["brokers"]:
        (logdir,) = entry["logDirs"]
        assert Path(logdir["logDir"]).resolve() == dirs[entry["broker"]].resolve()
        assert logdir["error"] is None
        served += [(p["partition"], p["size"]) for p in logdir["partitions"]]
    sizes = dict(served)
    assert len(served) == len(sizes) and set(sizes) == {f"{topic_name}-0", f"{topic_name}-1"}
    assert sizes[f"{topic_name}-0"] == 0 and sizes[f"{topic_name}-1"] > 0


def test_kafka_features_describe(broker: BrokerProcess) -> None:
    """ApiVersions v3+ carries the feature levels; headwater finalizes metadata.version
    4.2-IV1, group.version 1 (KIP-848) and transaction.version 2 (KIP-890 part 2)."""
    out = tool("kafka-features", broker.bootstrap, "describe").stdout
    features = {name: (lo, hi, level) for name, lo, hi, level in re.findall(
        r"Feature: (\S+)\s+SupportedMinVersion: (\S+)\s+SupportedMaxVersion: (\S+)\s+"
        r"FinalizedVersionLevel: (\S+)", out)}
    assert features["metadata.version"] == ("3.3-IV3", "4.2-IV1", "4.2-IV1"), out
    assert features["group.version"] == ("0", "1", "1"), out
    assert features["transaction.version"] == ("0", "2", "2"), out


# --- verifiable producer / consumers, kafka-consumer-groups ---------------------------


class JsonTool:
    """A long-running tool printing one JSON event per line (the verifiable clients);
    a thread collects the events so the test can poll them with a deadline."""

    def __init__(self, name: str, *args: str) -> None:
        self.name = name
        self.events: list[dict] = []
        self.lock = threading.Lock()
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(tool_command(name, *args), stdout=subprocess.PIPE,
                                     stderr=self.stderr, stdin=subprocess.DEVNULL,
                                     text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                with self.lock:
                    self.events.append(json.loads(line))

    def of(self, kind: str) -> list[dict]:
        with self.lock:
            return [e for e in self.events if e.get("name") == kind]

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM: the tools' shutdown hooks close their clients (a consumer leaves its
        group) and print shutdown_complete."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.reader.join(10)
        return code

    def diagnostics(self) -> str:
        self.stderr.seek(0)
        err = self.stderr.read().decode(errors="replace")[-3000:]
        with self.lock:
            tail = self.events[-5:]
        return f"{self.name} exit={self.proc.poll()} last events={tail}\nstderr:\n{err}"


def assignment(consumer: JsonTool) -> set[int]:
    """The consumer's current partitions, from its assigned / revoked events (eager
    rebalances revoke everything; cooperative and KIP-848 ones send deltas)."""
    owned: set[int] = set()
    with consumer.lock:
        events = list(consumer.events)
    for e in events:
        if e["name"] == "partitions_assigned":
            owned |= {p["partition"] for p in e["partitions"]}
        elif e["name"] == "partitions_revoked":
            owned -= {p["partition"] for p in e["partitions"]}
    return owned


def group_rows(out: str, group: str) -> dict[int, list[str]]:
    """kafka-consumer-groups' table rows of `group`, by partition."""
    rows = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 4 and cols[0] == group and cols[2].isdigit():
            rows[int(cols[2])] = cols
    return rows


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_verifiable_clients_and_consumer_groups(broker: BrokerProcess, topic_name: str,
                                                tmp_path: Path, protocol: str) -> None:
    """Two VerifiableConsumers share a group (classic or KIP-848), then an idempotent
    acks=all VerifiableProducer writes: every acked record is consumed exactly once and
    the group's commits reach the end. Then kafka-consumer-groups describes the group
    (lag 0), resets its offsets (dry run, then --execute) and deletes it."""
    b = broker.bootstrap
    partitions, count = 4, 2000
    group = f"g-{topic_name}"
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(topic_name, partitions, 1)])[topic_name].result(15)

    consumers = [JsonTool("kafka-verifiable-consumer", "--bootstrap-server", b,
                          "--topic", topic_name, "--group-id", group,
                          "--group-protocol", protocol, "--verbose",
                          "--reset-policy", "earliest") for _ in range(2)]
    try:
        def settled() -> bool:
            owned = [assignment(c) for c in consumers]
            return (all(owned) and not owned[0] & owned[1]
                    and owned[0] | owned[1] == set(range(partitions)))
        try:
            poll_until(settled, 60, "both consumers assigned")
        except AssertionError as exc:
            raise AssertionError("\n".join(c.diagnostics() for c in consumers)) from exc

        config = tmp_path / "producer.properties"
        config.write_text("enable.idempotence=true\nacks=all\nretries=2147483647\n")
        producer = run_tool("kafka-verifiable-producer", "--bootstrap-server", b,
                            "--topic", topic_name, "--max-messages", str(count),
                            "--acks", "-1", "--repeating-keys", "97",
                            "--command-config", str(config), timeout=120)
        events = [json.loads(line) for line in producer.stdout.splitlines()
                  if line.startswith("{")]
        acked = {(e["partition"], e["offset"]): e["value"] for e in events
                 if e["name"] == "producer_send_success"}
        assert len(acked) == count
        assert not [e for e in events if e["name"] == "producer_send_error"]
        assert sorted(acked.values(), key=int) == [str(i) for i in range(count)]
        ends = {p: 0 for p in range(partitions)}
        for p, o in acked:
            ends[p] = max(ends[p], o + 1)
        assert all(ends.values()), ends  # keyed records reach every partition

        def records() -> list[tuple[int, int, str]]:
            return [(r["partition"], r["offset"], r["value"])
                    for c in consumers for r in c.of("record_data")]

        def committed() -> dict[int, int]:
            last: dict[int, int] = {}
            for c in consumers:
                for e in c.of("offsets_committed"):
                    assert e["success"], e
                    for o in e["offsets"]:
                        last[o["partition"]] = max(last.get(o["partition"], 0), o["offset"])
            return last

        try:
            poll_until(lambda: len(records()) >= count
                       and all(committed().get(p, 0) == ends[p] for p in ends), 60,
                       "all records consumed and committed")
        except AssertionError as exc:
            raise AssertionError("\n".join(c.diagnostics() for c in consumers)) from exc
        seen = records()
        assert len(seen) == count, "a record was consumed twice"
        assert {(p, o): v for p, o, v in seen} == acked
        assert all(c.of("records_consumed") for c in consumers), "one consumer idle"
    finally:
        codes = [c.stop() for c in consumers]
    assert all(c.of("shutdown_complete") for c in consumers), codes

    desc = tool("kafka-consumer-groups", b, "--describe", "--group", group).stdout
    rows = group_rows(desc, group)
    assert set(rows) == set(range(partitions)), desc
    for p, cols in rows.items():
        assert (int(cols[3]), int(cols[4]), cols[5]) == (ends[p], ends[p], "0"), desc

    def committed_offsets() -> dict[int, int]:
        req = ConsumerGroupTopicPartitions(group)
        (res,) = admin.list_consumer_group_offsets([req]).values()
        return {tp.partition: tp.offset for tp in res.result(15).topic_partitions}

    reset = ("--reset-offsets", "--group", group, "--topic", topic_name, "--to-earliest")
    dry = tool("kafka-consumer-groups", b, *reset, "--dry-run").stdout
    assert {p: cols[3] for p, cols in group_rows(dry, group).items()} == {
        p: "0" for p in range(partitions)}, dry
    assert committed_offsets() == ends, "a dry run changed the offsets"
    tool("kafka-consumer-groups", b, *reset, "--execute")
    assert committed_offsets() == {p: 0 for p in range(partitions)}
    desc = tool("kafka-consumer-groups", b, "--describe", "--group", group).stdout
    assert {p: int(cols[5]) for p, cols in group_rows(desc, group).items()} == ends, desc

    out = tool("kafka-consumer-groups", b, "--delete", "--group", group).stdout
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out, out
    listed = admin.list_consumer_groups().result(15).valid
    assert group not in {g.group_id for g in listed}


# --- transactions ---------------------------------------------------------------------


def table(out: str) -> list[dict[str, str]]:
    """kafka-transactions' tab-separated tables as dicts (header row first)."""
    lines = [line.split("\t") for line in out.strip().splitlines() if line.strip()]
    header = [h.strip() for h in lines[0]]
    return [dict(zip(header, (c.strip() for c in row), strict=False)) for row in lines[1:]]


def test_java_transactional_producer_and_kafka_transactions(broker: BrokerProcess,
                                                            topic_name: str) -> None:
    """Kafka's perf producer in transactions of ~100 ms (a Java transactional producer),
    then kafka-transactions lists and describes its id, and a read_committed console
    consumer sees every committed record exactly once."""
    b = broker.bootstrap
    count, txn_id = 3000, f"tx-{topic_name}"
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(topic_name, 3, 1)])[topic_name].result(15)
    perf = run_tool("kafka-producer-perf-test", "--bootstrap-server", b, "--topic", topic_name,
                    "--num-records", str(count), "--payload-monotonic", "--throughput", "-1",
                    "--transactional-id", txn_id, "--transaction-duration-ms", "100",
                    timeout=120)
    assert re.search(rf"^{count} records sent", perf.stdout, re.M), perf.stdout

    listed = [r for r in table(tool("kafka-transactions", b, "list").stdout)
              if r["TransactionalId"] == txn_id]
    assert len(listed) == 1 and listed[0]["TransactionState"] == "CompleteCommit", listed
    (desc,) = table(tool("kafka-transactions", b, "describe", "--transactional-id",
                         txn_id).stdout)
    assert desc["TransactionalId"] == txn_id
    assert desc["TransactionState"] == "CompleteCommit"
    assert desc["ProducerId"] == listed[0]["ProducerId"]
    host, port = b.split(",")[0].rsplit(":", 1)
    finder = RawClient(host, int(port))
    try:  # the broker FindCoordinator names (on one node the broker, node 1)
        found = finder.request(10, 4, {"key_type": 1, "coordinator_keys": [txn_id]})
    finally:
        finder.close()
    assert desc["CoordinatorId"] == str(found.coordinators[0].node_id)

    consumed = tool("kafka-console-consumer", b, "--topic", topic_name, "--from-beginning",
                    "--isolation-level", "read_committed", "--max-messages", str(count),
                    "--timeout-ms", "30000", timeout=90)
    values = consumed.stdout.split()
    assert sorted(map(int, values)) == list(range(count)), consumed.stderr[-2000:]
    assert f"Processed a total of {count} messages" in consumed.stderr


# --- kafka-dump-log over headwater's internal topics ------------------------------------


def segment_files(data_dirs: list[Path], topic: str) -> list[str]:
    """The non-empty segment files of every partition of an internal topic, in every
    broker's data dir (on the shared log, those of each broker's cache of the
    partitions it serves)."""
    return sorted(str(f) for data_dir in data_dirs
                  for pattern in (f"{topic}-*/*.log", f"shared-cache/{topic}-*/*.log")
                  for f in data_dir.glob(pattern) if f.stat().st_size)


def decoded(out: str) -> list[tuple[dict, dict | None]]:
    """(key, payload) of every record kafka-dump-log decoded."""
    pairs = []
    for line in out.splitlines():
        m = re.search(r" key: (\{.*\}) payload: (.*)$", line)
        if m:
            payload = m.group(2).strip()
            pairs.append((json.loads(m.group(1)),
                          None if payload in ("", "null", "<DELETE>") else json.loads(payload)))
    return pairs


def test_kafka_dump_log_decodes_headwater_internal_topics(broker: BrokerProcess,
                                                          topic_name: str) -> None:
    """Kafka's own decoders read headwater's `__consumer_offsets` (a group's committed
    offsets, transactional ones included) and `__transaction_state` segment files."""
    b = broker.bootstrap
    group, txn_id = f"g-{topic_name}", f"tx-{topic_name}"
    produce(b, topic_name, 5, partition=0)
    consumer = Consumer({"bootstrap.servers": b, "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 3)], asynchronous=False)
    finally:
        consumer.close()
    producer = Producer({"bootstrap.servers": b, "transactional.id": txn_id})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic_name, b"in-txn", partition=0)
    meta = Consumer({"bootstrap.servers": b, "group.id": group})
    try:
        producer.send_offsets_to_transaction([TopicPartition(topic_name, 0, 5)],
                                             meta.consumer_group_metadata())
    finally:
        meta.close()
    producer.commit_transaction(15)

    offsets = run_tool("kafka-dump-log", "--offsets-decoder", "--files",
                   ",".join(segment_files(broker.data_dirs, "__consumer_offsets")))
    ours = [(k, v) for k, v in decoded(offsets.stdout)
            if k.get("type") == "1" and k["data"].get("group") == group]
    assert [(k["data"]["topic"], k["data"]["partition"], v["data"]["offset"])
            for k, v in ours] == [(topic_name, 0, 3), (topic_name, 0, 5)], offsets.stdout[-3000:]
    assert "endTxnMarker: COMMIT" in offsets.stdout

    txns = run_tool("kafka-dump-log", "--transaction-log-decoder", "--files",
                ",".join(segment_files(broker.data_dirs, "__transaction_state")))
    ours = [v["data"] for k, v in decoded(txns.stdout)
            if v is not None and k["data"].get("transactionalId") == txn_id]
    # Kafka 4.4's decoder prints the TransactionState by name (4.3 printed its id).
    assert [v["transactionStatus"] for v in ours] == [
        "Empty", "Ongoing", "Ongoing", "PrepareCommit", "CompleteCommit"], txns.stdout[-3000:]
    prepare = {p["topic"]: p["partitionIds"] for p in ours[3]["transactionPartitions"]}
    assert set(prepare) == {"__consumer_offsets", topic_name} and prepare[topic_name] == [0]
    assert ours[-1]["transactionPartitions"] == []
