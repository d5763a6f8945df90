"""``historyFromTable``: a topic's history read from its Iceberg table (the broker's table
writer, docs/iceberg.md), then the topic itself from the offsets the table ends at, in one
query and each record once.

The table's snapshot says where it ends: its summary property ``headwater.offsets`` holds
the next offset of every partition whose records it holds. The query's first offsets are
those, tagged with the snapshot read (``MARKER``), so the first batch is the snapshot's
files plus the topic from there; every later batch is the topic alone. A restart from a
checkpoint taken before the first batch committed reads the same snapshot again (its id
is in the offsets), so the switch is exactly once. The table holds committed records
only, so the topic is read read_committed.

pyiceberg reads the files (the project's pyspark has no Iceberg runtime of its own, and
the catalog is the same SQL catalog the broker writes): the driver plans the snapshot's
file tasks, each becomes one Spark task, and the executor reads its file with
pyiceberg's Arrow scan.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.table import FileScanTask, Table
from pyiceberg.types import BinaryType
from pyspark.sql.datasource import InputPartition

from .options import HeadwaterOptionError, SourceOptions, TopicPartition

#: The offsets' key naming the snapshots the first batch reads; never a topic's name
#: (topic names have no '/').
MARKER = "headwater/table-snapshots"
#: The snapshot summary property the broker's writer commits offsets in.
OFFSETS_PROPERTY = "headwater.offsets"
#: Spark's catalog name for the tables, as the broker's writer names its catalog.
CATALOG_NAME = "headwater"


@dataclass(frozen=True)
class TableSource:
    """Where the topics' tables are: the SQL catalog's properties (``iceberg.uri``,
    ``iceberg.warehouse``, an object store's ``iceberg.s3.*``) and the namespace
    (``iceberg.namespace``, the broker's ``headwater.iceberg.namespace``)."""

    catalog: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, opts: SourceOptions) -> TableSource:
        assert opts.history_table is not None
        return cls(opts.history_table)

    def load(self, topic: str) -> Table | None:
        """The topic's table, or None while its writer has created none."""
        props = dict(self.catalog)
        namespace = props.pop("namespace", "db")
        try:
            return SqlCatalog(CATALOG_NAME, **props).load_table((namespace, topic))
        except NoSuchTableError:
            return None


@dataclass
class TablePartition(InputPartition):
    """One Spark task: one data file of a topic's table snapshot."""

    topic: str
    snapshot_id: int
    task: FileScanTask
    timestamp_type: int

    def __repr__(self) -> str:
        return f"{self.topic}@{self.snapshot_id}:{self.task.file.file_path}"


def split_marker(offsets: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, int] | None]:
    """Offsets JSON without the marker, and the marker's snapshots (None: no table)."""
    rest = {k: v for k, v in offsets.items() if k != MARKER}
    marked = offsets.get(MARKER)
    return rest, None if marked is None else {t: int(s) for t, s in marked.items()}


def table_start(source: TableSource, topics: list[str]
                ) -> tuple[dict[str, int], dict[TopicPartition, int]]:
    """Each topic's current snapshot and the offsets it ends at (partitions the table
    holds nothing of are absent: the topic is read from its start)."""
    snapshots: dict[str, int] = {}
    offsets: dict[TopicPartition, int] = {}
    for topic in topics:
        table = source.load(topic)
        snapshot = None if table is None else table.current_snapshot()
        if table is None or snapshot is None:
            continue
        value = table.schema().find_field("value").field_type
        if not isinstance(value, BinaryType):
            raise HeadwaterOptionError(
                f"Option 'historyFromTable': the table of topic '{topic}' types its values "
                "(headwater.iceberg.mode=value_schema); only key_value tables are read as "
                "the topic's records")
        snapshots[topic] = snapshot.snapshot_id
        raw = snapshot.summary.get(OFFSETS_PROPERTY) if snapshot.summary else None
        for part, offset in (json.loads(raw) if raw else {}).items():
            offsets[(topic, int(part))] = int(offset)
    return snapshots, offsets


def table_partitions(source: TableSource, snapshots: Mapping[str, int],
                     timestamp_types: Mapping[str, int]) -> list[TablePartition]:
    """The snapshots' data files, one Spark task each."""
    out = []
    for topic, snapshot_id in sorted(snapshots.items()):
        table = source.load(topic)
        if table is None:
            raise HeadwaterOptionError(
                f"The Iceberg table of topic '{topic}' is gone: the query started from its "
                f"snapshot {snapshot_id}")
        for task in table.scan(snapshot_id=snapshot_id).plan_files():
            out.append(TablePartition(topic, snapshot_id, task,
                                      timestamp_types.get(topic, 0)))
    return out


def read_table(source: TableSource, schema: pa.Schema, part: TablePartition
               ) -> Iterator[pa.RecordBatch]:
    """The rows of one data file as the source's schema, in offset order."""
    table = source.load(part.topic)
    if table is None:
        return
    snapshot = table.snapshot_by_id(part.snapshot_id)
    if snapshot is None:
        raise RuntimeError(f"snapshot {part.snapshot_id} of topic '{part.topic}' has been "
                           "expired: restart the query without its checkpoint")
    rows = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()
                     ).to_table([part.task])
    if rows.num_rows == 0:
        return
    rows = rows.sort_by([("partition", "ascending"), ("offset", "ascending")])
    yield from as_source_rows(rows, part.topic, part.timestamp_type, schema).to_batches()


def as_source_rows(rows: pa.Table, topic: str, timestamp_type: int, schema: pa.Schema
                   ) -> pa.Table:
    """A key_value table's columns as the Kafka source's (topic and timestampType added,
    headers only when the schema has them)."""
    n = rows.num_rows
    columns = {
        "key": rows["key"].cast(pa.binary()),
        "value": rows["value"].cast(pa.binary()),
        "topic": pa.array([topic] * n, pa.string()),
        "partition": rows["partition"].cast(pa.int32()),
        "offset": rows["offset"].cast(pa.int64()),
        "timestamp": pc.cast(rows["timestamp"], schema.field("timestamp").type),
        "timestampType": pa.array([timestamp_type] * n, pa.int32()),
    }
    if "headers" in schema.names:
        columns["headers"] = rows["headers"].cast(schema.field("headers").type)
    return pa.table([columns[name] for name in schema.names], schema=schema)
