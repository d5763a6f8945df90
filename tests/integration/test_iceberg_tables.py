"""Topics that are also Iceberg tables (`headwater.iceberg.mode=key_value`): the table
holds exactly the topic's read_committed records, each once with its offset, through
aborted transactions and a broker killed -9 and restarted; turning the table on for an
existing topic backfills it from the log start. Read back with pyiceberg over the
broker's catalog: SQLite on one node; on the shared log the catalog in its PostgreSQL
and the files in its object store, every broker writing the partitions it leads
(docs/iceberg.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tests.support.broker_process import BrokerProcess
from tests.support.iceberg_tables import broker_catalog, committed_records, table_rows
from tests.support.kafka_reference import create_topic

pytestmark = [pytest.mark.timeout(240)]

INTERVAL = "headwater.iceberg.commit.interval.ms"
FAST = {"headwater.iceberg.mode": "key_value", INTERVAL: "300"}


@pytest.fixture
def broker(new_broker: Callable[..., BrokerProcess], tmp_path: Path
           ) -> Iterator[BrokerProcess]:
    proc = new_broker(tmp_path / "data").start()
    yield proc
    proc.kill()


def set_topic_configs(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]
    for done in admin.incremental_alter_configs(
            [ConfigResource("topic", topic, incremental_configs=entries)]).values():
        done.result(30)


def until_table_matches(broker: BrokerProcess, topic: str, partitions: int) -> list[Any]:
    want = committed_records(broker.bootstrap, topic, partitions)
    deadline = time.monotonic() + 60
    while (got := table_rows(broker_catalog(broker), topic)) != want:
        assert time.monotonic() < deadline, (len(got), len(want), got[-3:], want[-3:])
        time.sleep(0.3)
    return got


def describe_topic(bootstrap: str, topic: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "headwater.cli", "topic", "describe", topic,
                          "--json", "--bootstrap-server", bootstrap],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def until_caught_up(bootstrap: str, topic: str) -> dict[str, Any]:
    """`headwater topic describe` until it shows the table holding the whole topic."""
    deadline = time.monotonic() + 60
    while True:
        described = describe_topic(bootstrap, topic)
        if described["table"]["lag"] == 0 and all(
                row["table_offset"] is not None for row in described["partitions"]):
            return described
        assert time.monotonic() < deadline, described
        time.sleep(0.3)


def produce_mix(bootstrap: str, topic: str, tag: str, partitions: int) -> None:
    """Plain records, a committed transaction and an aborted one on every partition."""
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(partitions):
        for i in range(50):
            plain.produce(topic, f"{tag}-plain-{i}".encode(), key=f"k{i}".encode(),
                          partition=p, headers=[("h", b"1")])
    assert plain.flush(30) == 0
    txn = Producer({"bootstrap.servers": bootstrap,
                    "transactional.id": f"tx-{tag}-{uuid.uuid4().hex[:6]}"})
    txn.init_transactions(30)
    for commit in (True, False, True):
        txn.begin_transaction()
        for p in range(partitions):
            for i in range(20):
                txn.produce(topic, f"{tag}-{'c' if commit else 'a'}-{i}".encode(), partition=p)
        if commit:
            txn.commit_transaction(30)
        else:
            txn.abort_transaction(30)


def test_the_table_holds_the_committed_records_once_through_a_kill(
        broker: BrokerProcess) -> None:
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    from confluent_kafka.admin import NewTopic

    for f in admin.create_topics([NewTopic(topic, 3, 1, config=FAST)]).values():
        f.result(30)
    produce_mix(broker.bootstrap, topic, "one", 3)
    rows = until_table_matches(broker, topic, 3)
    assert len(rows) == 3 * (50 + 40)  # the aborted 20 per partition never appear
    assert not any(b"-a-" in (value or b"") for *_, value in rows)
    # Its lag, as `headwater topic describe` shows it: each partition's table offset is
    # the topic's end (the last commit marker included), and 0 records behind.
    described = until_caught_up(broker.bootstrap, topic)
    assert described["table"]["seconds_behind"] == 0.0, described
    for row in described["partitions"]:
        assert (row["table_offset"], row["table_lag"]) == (row["latest"], 0), described
    # With commits a long interval apart the table falls behind, and says so.
    set_topic_configs(broker.bootstrap, topic, {**FAST, INTERVAL: "3600000"})
    behind, late = Producer({"bootstrap.servers": broker.bootstrap}), 0
    deadline = time.monotonic() + 30
    while True:  # a pass of the writer begun before the change may still take a record
        behind.produce(topic, f"late-{late}".encode(), partition=0)
        assert behind.flush(30) == 0
        late += 1
        table = describe_topic(broker.bootstrap, topic)["table"]
        if table["lag"] >= 1 and table["seconds_behind"] > 0:
            break
        assert time.monotonic() < deadline, table
    broker.kill()  # -9: the writer child goes with it (PDEATHSIG)
    broker.start()
    set_topic_configs(broker.bootstrap, topic, FAST)
    produce_mix(broker.bootstrap, topic, "two", 3)
    rows = until_table_matches(broker, topic, 3)
    assert len(rows) == 2 * 3 * 90 + late
    assert len({(p, o) for p, o, *_ in rows}) == len(rows)  # each offset once


def test_turning_the_table_on_backfills_an_existing_topic(broker: BrokerProcess) -> None:
    topic = f"history-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 2)
    produce_mix(broker.bootstrap, topic, "old", 2)
    assert table_rows(broker_catalog(broker), topic) == []
    described = describe_topic(broker.bootstrap, topic)
    assert "table" not in described and "table_lag" not in described["partitions"][0]
    set_topic_configs(broker.bootstrap, topic, FAST)
    rows = until_table_matches(broker, topic, 2)
    assert len(rows) == 2 * 90
    until_caught_up(broker.bootstrap, topic)


def test_a_compacted_topic_is_a_table_of_each_keys_latest_value(
        broker: BrokerProcess) -> None:
    """cleanup.policy=compact: the table keeps what compaction keeps, the latest value of
    each key of each partition; a tombstone deletes its key; keys updated across
    commits are replaced, not repeated."""
    topic = f"latest-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    from confluent_kafka.admin import NewTopic

    for f in admin.create_topics([NewTopic(topic, 2, 1, config={
            **FAST, "cleanup.policy": "compact"})]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    latest: dict[tuple[int, bytes], tuple[int, bytes]] = {}

    def send(rounds: list[tuple[int, bytes | None]]) -> None:
        def record(err: Any, msg: Any) -> None:
            assert err is None, err
            key = (msg.partition(), msg.key())
            if msg.value() is None:
                latest.pop(key, None)
            else:
                latest[key] = (msg.offset(), msg.value())
        for i, value in rounds:
            producer.produce(topic, value, key=f"k{i}".encode(), partition=i % 2,
                             on_delivery=record)
        assert producer.flush(30) == 0

    def until_table_is_latest() -> None:
        want = sorted((p, o, k, v) for (p, k), (o, v) in latest.items())
        deadline = time.monotonic() + 60
        while (got := table_rows(broker_catalog(broker), topic)) != want:
            assert time.monotonic() < deadline, (got, want)
            time.sleep(0.3)

    send([(i, b"v1") for i in range(10)])
    until_table_is_latest()
    send([(i, b"v2") for i in range(5)] + [(5, None), (6, None), (0, b"v3")])
    until_table_is_latest()
    send([(5, b"back"), (1, None)])
    until_table_is_latest()
    assert {k: v for (_p, k), (_o, v) in latest.items()} == {
        b"k0": b"v3", b"k2": b"v2", b"k3": b"v2", b"k4": b"v2", b"k5": b"back",
        b"k7": b"v1", b"k8": b"v1", b"k9": b"v1"}


def test_value_schema_types_the_values_dead_letters_the_rest_and_evolves(
        broker: BrokerProcess) -> None:
    """mode value_schema: JSON values parsed into the typed fields of the table's `value`
    by the topic's Avro record schema; values that do not parse land in `<topic>~dlq`
    with why, the rest keep flowing; a field added to the schema adds a column, null in
    the rows before."""
    topic = f"typed-{uuid.uuid4().hex[:6]}"
    v1 = {"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "long"}, {"name": "item", "type": ["null", "string"]}]}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    from confluent_kafka.admin import NewTopic

    typed = {"headwater.iceberg.mode": "value_schema", INTERVAL: "300",
             "headwater.iceberg.value.schema": json.dumps(v1)}
    for f in admin.create_topics([NewTopic(topic, 2, 1, config=typed)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    sent: dict[tuple[int, int], bytes] = {}

    def send(values: list[bytes]) -> None:
        def record(err: Any, msg: Any) -> None:
            assert err is None, err
            sent[(msg.partition(), msg.offset())] = msg.value()
        for i, value in enumerate(values):
            producer.produce(topic, value, partition=i % 2, on_delivery=record)
        assert producer.flush(30) == 0

    def until(name: str, want: list[tuple[int, int, Any]]) -> None:
        deadline = time.monotonic() + 60
        while [(p, o, v) for p, o, _k, v in table_rows(broker_catalog(broker), name)] != want:
            assert time.monotonic() < deadline, (table_rows(broker_catalog(broker), name),
                                                 want)
            time.sleep(0.3)

    bad = [b"not json", b'{"id": "seven"}']
    send([json.dumps({"id": i, "item": f"i{i}"}).encode() for i in range(6)] + bad)
    good = sorted((p, o, json.loads(v)) for (p, o), v in sent.items() if v not in bad)
    until(topic, good)
    until(f"{topic}~dlq", sorted((p, o, v) for (p, o), v in sent.items() if v in bad))
    v2 = {**v1, "fields": [*v1["fields"], {"name": "score", "type": ["null", "double"]}]}
    set_topic_configs(broker.bootstrap, topic, {**typed,
                                                "headwater.iceberg.value.schema": json.dumps(v2)})
    before = dict(sent)
    send([json.dumps({"id": 10 + i, "item": "new", "score": i / 2}).encode()
          for i in range(4)])
    until(topic, sorted([(p, o, {**v, "score": None}) for p, o, v in good] + [
        (p, o, json.loads(v)) for (p, o), v in sent.items() if (p, o) not in before]))


def test_avro_values_in_confluents_wire_format_are_typed(broker: BrokerProcess) -> None:
    """headwater.iceberg.value.encoding=confluent-avro: values as Confluent's Avro
    serializers write them (a zero byte, the schema id, Avro's binary encoding) typed by
    the topic's schema; a value that is not Avro of it lands in `<topic>~dlq`."""
    import io
    import struct

    import fastavro

    topic = f"avro-{uuid.uuid4().hex[:6]}"
    schema = {"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "long"}, {"name": "item", "type": ["null", "string"]},
        {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}}]}
    parsed = fastavro.parse_schema(schema)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    from confluent_kafka.admin import NewTopic

    for f in admin.create_topics([NewTopic(topic, 2, 1, config={
            "headwater.iceberg.mode": "value_schema", INTERVAL: "300",
            "headwater.iceberg.value.encoding": "confluent-avro",
            "headwater.iceberg.value.schema": json.dumps(schema)})]).values():
        f.result(30)

    def encoded(record: dict[str, Any]) -> bytes:
        out = io.BytesIO(b"\x00" + struct.pack(">i", 1))
        out.seek(5)
        fastavro.schemaless_writer(out, parsed, record)
        return out.getvalue()

    records = [{"id": i, "item": None if i % 3 == 0 else f"i{i}", "kind": "AB"[i % 2]}
               for i in range(6)]
    bad = [b'{"id": 1}', encoded(records[0])[:-1]]
    sent: dict[tuple[int, int], bytes] = {}

    def record(err: Any, msg: Any) -> None:
        assert err is None, err
        sent[(msg.partition(), msg.offset())] = msg.value()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i, value in enumerate([encoded(r) for r in records] + bad):
        producer.produce(topic, value, partition=i % 2, on_delivery=record)
    assert producer.flush(30) == 0
    by_value = {encoded(r): r for r in records}
    want = sorted((p, o, by_value[v]) for (p, o), v in sent.items() if v in by_value)
    dead = sorted((p, o, v) for (p, o), v in sent.items() if v in bad)
    for name, rows in ((topic, want), (f"{topic}~dlq", dead)):
        deadline = time.monotonic() + 60
        while [(p, o, v) for p, o, _k, v in table_rows(broker_catalog(broker), name)] != rows:
            assert time.monotonic() < deadline, (table_rows(broker_catalog(broker), name), rows)
            time.sleep(0.3)
