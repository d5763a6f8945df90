"""Topics that are also Iceberg tables (`headwater.iceberg.mode=key_value`, one node): the
table holds exactly the topic's read_committed records, each once with its offset,
through aborted transactions and a broker killed -9 and restarted; turning the table on
for an existing topic backfills it from the log start. Read back with pyiceberg over the
broker's SQLite catalog (docs/iceberg.md)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tests.support.broker_process import BrokerProcess
from tests.support.kafka_reference import create_topic

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.local_storage("the table writer runs beside a one-node broker; "
                                        "the cluster's is not built yet")]

FAST = {"headwater.iceberg.mode": "key_value",
        "headwater.iceberg.commit.interval.ms": "300"}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path / "data").start()
    yield proc
    proc.kill()


def set_topic_configs(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]
    for done in admin.incremental_alter_configs(
            [ConfigResource("topic", topic, incremental_configs=entries)]).values():
        done.result(30)


def table_rows(data_dir: Path, topic: str) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(partition, offset, key, value) of every row of the topic's table, sorted."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import NoSuchTableError

    root = data_dir / "iceberg"
    if not (root / "catalog.db").exists():
        return []
    catalog = SqlCatalog("headwater", uri=f"sqlite:///{root / 'catalog.db'}",
                         warehouse=(root / "warehouse").as_uri())
    try:
        table = catalog.load_table(("db", topic))
    except NoSuchTableError:
        return []
    rows = table.scan(selected_fields=("partition", "offset", "key", "value")).to_arrow()
    return sorted(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(),
                      rows["key"].to_pylist(), rows["value"].to_pylist(), strict=True))


def committed_records(bootstrap: str, topic: str, partitions: int
                      ) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """The topic as a read_committed consumer reads it, from the start to the end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Any] = []
        done: set[int] = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + 60
        while len(done) < partitions and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    out.append((m.partition(), m.offset(), m.key(), m.value()))
            for p, end in ends.items():
                position = c.position([TopicPartition(topic, p)])[0].offset
                if position >= end:
                    done.add(p)
        assert len(done) == partitions, (done, ends)
        return sorted(out)
    finally:
        c.close()


def until_table_matches(broker: BrokerProcess, topic: str, partitions: int) -> list[Any]:
    want = committed_records(broker.bootstrap, topic, partitions)
    deadline = time.monotonic() + 60
    while (got := table_rows(broker.data_dir, topic)) != want:
        assert time.monotonic() < deadline, (len(got), len(want), got[-3:], want[-3:])
        time.sleep(0.3)
    return got


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
    broker.kill()  # -9: the writer child goes with it (PDEATHSIG)
    broker.start()
    produce_mix(broker.bootstrap, topic, "two", 3)
    rows = until_table_matches(broker, topic, 3)
    assert len(rows) == 2 * 3 * 90
    assert len({(p, o) for p, o, *_ in rows}) == len(rows)  # each offset once


def test_turning_the_table_on_backfills_an_existing_topic(broker: BrokerProcess) -> None:
    topic = f"history-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 2)
    produce_mix(broker.bootstrap, topic, "old", 2)
    assert table_rows(broker.data_dir, topic) == []
    set_topic_configs(broker.bootstrap, topic, FAST)
    rows = until_table_matches(broker, topic, 2)
    assert len(rows) == 2 * 90
