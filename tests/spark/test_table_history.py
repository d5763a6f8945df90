"""`historyFromTable` (pyspark_headwater/table_history.py, docs/iceberg.md): one streaming
query reads a topic's history from its Iceberg table and goes on from the topic at the
offsets the table's snapshot ends at, with a producer still writing; every read_committed
record arrives once, including records the topic itself no longer holds."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.test_iceberg_tables import FAST, produce_mix, until_table_matches
from tests.support.broker_process import BrokerProcess
from tests.support.iceberg_tables import broker_catalog, committed_records

pytestmark = [pytest.mark.timeout(300)]

Row = tuple[int, int, bytes | None, bytes | None]


def _rows(df: Any, stamps: set[int]) -> list[Row]:
    """The batch's rows; the timestamp types they carry into `stamps`."""
    rows = df.select("partition", "offset", "key", "value", "timestampType").collect()
    stamps.update(r.timestampType for r in rows)
    return [(r.partition, r.offset, None if r.key is None else bytes(r.key),
             None if r.value is None else bytes(r.value)) for r in rows]


def test_history_from_the_table_then_the_topic_each_record_once(
        spark: Any, new_broker: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    """One node, or (make test-cluster) three brokers whose catalog is the shared log's
    PostgreSQL and whose files are in its object store."""
    broker = new_broker(tmp_path / "data").start()
    query = None
    try:
        bs, topic = broker.bootstrap, f"history-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic(topic, 3, 1, config=FAST)]).values():
            f.result(30)
        produce_mix(bs, topic, "a", 3)
        history: list[Row] = until_table_matches(broker, topic, 3)
        # The topic forgets partition 0's first 60 records: only the table has them now.
        for f in admin.delete_records([TopicPartition(topic, 0, 60)]).values():
            f.result(30)
        forgotten = [r for r in history if r[0] == 0 and r[1] < 60]
        assert len(forgotten) == 60

        uri, warehouse, properties = broker_catalog(broker)
        catalog = {"iceberg.uri": uri, "iceberg.warehouse": warehouse,
                   **{f"iceberg.{k}": v for k, v in properties.items()}}
        seen: list[Row] = []
        stamps: set[int] = set()

        def batch(df: Any, _: int) -> None:
            seen.extend(_rows(df, stamps))

        writer = threading.Thread(target=produce_mix, args=(bs, topic, "b", 3))

        def start() -> Any:
            return (spark.readStream.format("headwater")
                    .option("kafka.bootstrap.servers", bs).option("subscribe", topic)
                    .option("historyFromTable", "true").options(**catalog)
                    .option("includeHeaders", "true").load().writeStream.foreachBatch(batch)
                    .option("checkpointLocation", str(tmp_path / "ckpt"))
                    .trigger(processingTime="200 milliseconds").start())

        query = start()
        writer.start()  # while the query starts: the switch happens with records arriving
        writer.join(120)
        assert not writer.is_alive()
        want = sorted(set(history) | set(committed_records(bs, topic, 3)))
        assert len(want) == 2 * 3 * 90
        deadline = time.monotonic() + 120
        while sorted(seen) != want:
            assert query.exception() is None, query.exception()
            assert len(seen) <= len(want) and time.monotonic() < deadline, \
                (len(seen), len(want), sorted(set(want) - set(seen))[:3])
            time.sleep(0.2)
        assert set(forgotten) <= set(seen)
        assert stamps == {0}  # CreateTime, from the topic's message.timestamp.type

        # Restarted from its checkpoint, the query goes on from the topic: the table's
        # rows do not come again, the records produced while it was stopped do.
        query.stop()
        produce_mix(bs, topic, "c", 3)
        want = sorted(set(want) | set(committed_records(bs, topic, 3)))
        query = start()
        while sorted(seen) != want:
            assert query.exception() is None, query.exception()
            assert len(seen) <= len(want) and time.monotonic() < deadline + 60, \
                (len(seen), len(want))
            time.sleep(0.2)

        # A batch read takes the option too: the table, then the topic to its end.
        batch_read = (spark.read.format("headwater").option("kafka.bootstrap.servers", bs)
                      .option("subscribe", topic).option("historyFromTable", "true")
                      .options(**catalog).load())
        assert sorted(_rows(batch_read, set())) == want
    finally:
        if query is not None:
            query.stop()
        broker.kill()
