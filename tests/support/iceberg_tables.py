"""Reading a topic's Iceberg table and the topic side by side, for the tests of
`headwater.iceberg.mode` (docs/iceberg.md): the catalog a broker's table writer commits
to, the table's rows with pyiceberg, and the topic as a read_committed consumer reads it."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from pyiceberg.exceptions import NoSuchTableError
from sqlalchemy.exc import IntegrityError, OperationalError

from headwater.config import BrokerConfig
from headwater.iceberg.launcher import default_catalog, shared_catalog
from headwater.iceberg.tables import open_catalog
from headwater.shared.settings import SharedSettings

from .broker_process import BrokerProcess

Catalog = tuple[str, str, dict[str, str]]  # SQLAlchemy URI, warehouse, file IO properties


def catalog_of(args: list[str], data_dir: Path) -> Catalog:
    """The catalog the table writer of a broker started with `args` commits to, as the
    broker works it out (SQLite in `data_dir`, or the shared log's)."""
    overrides = dict(arg.split("=", 1) for arg in args if "=" in arg)
    if overrides.get("headwater.storage") != "shared":
        return (*default_catalog(data_dir), {})
    return shared_catalog(SharedSettings.from_config(BrokerConfig(overrides)))


def broker_catalog(broker: BrokerProcess) -> Catalog:
    """A BrokerProcess's or a BrokerTrio's (broker 1's options are all three's)."""
    single = getattr(broker, "brokers", {1: broker})[1]
    return catalog_of(single.extra, broker.data_dir)


def table_rows(catalog: Catalog, topic: str
               ) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(partition, offset, key, value) of every row of the topic's table, sorted."""
    uri, warehouse, properties = catalog
    if uri.startswith("sqlite:") and not Path(uri.split("///", 1)[1]).exists():
        return []
    try:
        catalog = open_catalog(uri, warehouse, properties)
    except (IntegrityError, OperationalError):  # the writer creating the catalog's tables
        return []
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
        ends = {p: _end(c, topic, p) for p in range(partitions)}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: list[Any] = []
        done: set[int] = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + 60 + sum(ends.values()) / 5000
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


def _end(consumer: Consumer, topic: str, partition: int, timeout: float = 60) -> int:
    """The partition's high watermark, asked again while its leader moves (a broker of
    a cluster just killed: NOT_LEADER_OR_FOLLOWER, or a timeout asking the dead broker,
    until the client's metadata catches up)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return int(consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                      timeout=10)[1])
        except KafkaException as exc:
            if not exc.args[0].retriable() and exc.args[0].code() not in _MOVING:
                raise
            assert time.monotonic() < deadline, f"{topic}-{partition}: {exc}"
            time.sleep(0.2)


_MOVING = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
           KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT)  # asked of the dead one
