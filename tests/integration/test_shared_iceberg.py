"""A topic's Iceberg table on three brokers of a shared log (docs/iceberg.md): every
broker's table writer commits the partitions it leads to one table, in the catalog in
PostgreSQL with the files in the object store. Transactions (some aborted) go into a
6-partition topic while the tables are committed every 200 ms, and a broker leading
some of its partitions is killed -9 in the middle: its writer dies with it, the
partitions move, and the new leaders' writers go on from the table's offsets. The table
then holds exactly the topic's read_committed records, each once, compared row by row,
as pyiceberg reads it and as Spark SQL does (Iceberg's runtime, tests/support/
iceberg_spark.py).

RECORDS defaults to a CI-sized 30,000; HEADWATER_ICEBERG_RECORDS=1000000 (make
iceberg-campaign) is issue 38's million.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import Cluster, leaders, victim
from tests.support.iceberg_spark import spark_read
from tests.support.iceberg_tables import Catalog, catalog_of, committed_records, table_rows

RECORDS = int(os.environ.get("HEADWATER_ICEBERG_RECORDS", "30000"))
PARTITIONS = 6
PER_TXN = 600  # records a transaction writes, over every partition
ABORT_EVERY = 5  # one transaction in five is aborted

pytestmark = [pytest.mark.timeout(300 + RECORDS // 1000 * 6), pytest.mark.cluster_campaign(
    "three brokers of their own, one killed -9 while the tables are committed")]


class TransactionalLoad:
    """Transactions until `records` were attempted, from a thread; a transaction cut by
    the kill is aborted (or its producer made anew): the table must match the topic's
    read_committed records, whatever became of each."""

    def __init__(self, bootstrap: str, topic: str, records: int) -> None:
        self.bootstrap, self.topic, self.records = bootstrap, topic, records
        self.attempted = self.committed = self.failed = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _producer(self) -> Producer:
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 20,
                      "transactional.id": f"iceberg-load-{self.topic}",
                      "transaction.timeout.ms": 20000})
        p.init_transactions(60)
        return p

    def _run(self) -> None:
        try:
            producer = self._producer()
            n = 0
            while self.attempted < self.records:
                n += 1
                try:
                    producer.begin_transaction()
                    for i in range(PER_TXN):
                        producer.produce(self.topic, f"t{n}-{i}".encode(),
                                         key=f"k{i % 50}".encode(), partition=i % PARTITIONS)
                        producer.poll(0)
                    self.attempted += PER_TXN
                    if n % ABORT_EVERY == 0:
                        producer.abort_transaction(60)
                    else:
                        producer.commit_transaction(60)
                        self.committed += 1
                except KafkaException as exc:  # the kill: give the transaction up
                    self.failed += 1
                    producer = self._recover(producer, exc.args[0])
            assert producer.flush(60) == 0
        except BaseException as exc:  # noqa: BLE001 - reported by wait()
            self.error = exc

    def _recover(self, producer: Producer, error: KafkaError) -> Producer:
        """Abort the cut transaction; where that fails too, a new producer of the same
        transactional id (its InitProducerId fences the old one and aborts what it left
        open), asked again until the cluster has moved the coordinator."""
        if error.txn_requires_abort():
            try:
                producer.abort_transaction(30)
                return producer
            except KafkaException:
                pass
        deadline = time.monotonic() + 120
        while True:
            try:
                return self._producer()
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def start(self) -> TransactionalLoad:
        self.thread.start()
        return self

    def wait(self, timeout: float) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"load not done: {self.attempted} attempted"
        if self.error is not None:
            raise self.error


def test_the_table_holds_the_read_committed_records_once_through_a_kill(
        cluster: Cluster) -> None:
    topic = f"iceberg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={
        "headwater.iceberg.mode": "key_value",
        "headwater.iceberg.commit.interval.ms": "200"})])[topic].result(30)
    node, led = victim(cluster, topic, PARTITIONS)
    catalog: Catalog = catalog_of(cluster.shared, cluster.base)
    load = TransactionalLoad(cluster.bootstrap(), topic, RECORDS).start()
    # Kill once the victim's writer has committed some of its partitions' rows and the
    # load is a third through: the writers commit every 200 ms, so mid-commit or close.
    deadline = time.monotonic() + 120
    while True:
        rows = table_rows(catalog, topic)
        if load.attempted >= RECORDS // 3 and {p for p, *_ in rows} & set(led):
            break
        assert load.error is None and time.monotonic() < deadline, (load.attempted, len(rows))
        time.sleep(0.1)
    cluster.brokers[node].kill()
    others = [n for n in (1, 2, 3) if n != node]
    leaders(cluster.bootstrap(*others), topic, PARTITIONS, set(others), timeout=60)
    load.wait(120 + RECORDS / 1000)
    want = committed_records(cluster.bootstrap(*others), topic, PARTITIONS)
    deadline = time.monotonic() + 120 + RECORDS / 2000
    while (got := table_rows(catalog, topic)) != want:
        assert time.monotonic() < deadline, (len(got), len(want), got[-3:], want[-3:])
        time.sleep(0.5)
    assert len({(p, o) for p, o, *_ in got}) == len(got)  # each offset once
    assert not any(v is not None and v.startswith(b"t") and int(v[1:].split(b"-")[0])
                   % ABORT_EVERY == 0 for *_, v in got)  # no aborted transaction's row
    assert load.committed >= RECORDS // PER_TXN // 2, (load.committed, load.failed)
    # Spark SQL over the table (Iceberg's runtime: the catalog in PostgreSQL, the files
    # through S3FileIO from the object store), row by row against the topic.
    read = spark_read(catalog, topic, timeout=240 + RECORDS / 2000)

    def hexed(b: bytes | None) -> str | None:
        return None if b is None else b.hex().upper()
    assert sorted((r[0], r[1], r[3], r[4]) for r in read["rows"]) == [
        (p, o, hexed(k), hexed(v)) for p, o, k, v in want]
    print(f"table {topic}: {len(got)} rows = the topic's read_committed records, broker "
          f"{node} (partitions {led}) killed -9; {load.committed} transactions committed, "
          f"{load.failed} cut by the kill")
