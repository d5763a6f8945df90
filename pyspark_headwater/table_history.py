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
file tasks and packs them into Spark tasks of up to 128 MiB (Spark's own
``spark.sql.files.maxPartitionBytes``: a table committed every few seconds has many small
files), and the executor reads its files with pyiceberg's Arrow scan, the table loaded
once per Python worker.
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


#: Bytes of data files one Spark task reads at most (Spark's maxPartitionBytes default).
TASK_BYTES = 128 << 20


@dataclass
class TablePartition(InputPartition):
    """One Spark task: data files of a topic's table snapshot."""

    topic: str
    snapshot_id: int
    tasks: list[FileScanTask]
    timestamp_type: int

    def __repr__(self) -> str:
        return f"{self.topic}@{self.snapshot_id}:{len(self.tasks)} files"


def pack(tasks: list[FileScanTask], limit: int = TASK_BYTES,
         at_least: int = 1) -> list[list[FileScanTask]]:
    """`tasks` in groups of at most `limit` bytes (a bigger file alone), and at least
    `at_least` groups while there are files for them (minPartitions)."""
    total = sum(t.file.file_size_in_bytes for t in tasks)
    limit = max(1, min(limit, -(-total // max(at_least, 1))))
    groups: list[list[FileScanTask]] = []
    size = 0
    for task in tasks:
        n = task.file.file_size_in_bytes
        if not groups or size + n > limit:
            groups.append([])
            size = 0
        groups[-1].append(task)
        size += n
    return groups


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
                     timestamp_types: Mapping[str, int], at_least: int = 1
                     ) -> list[TablePartition]:
    """The snapshots' data files, packed into Spark tasks."""
    out = []
    for topic, snapshot_id in sorted(snapshots.items()):
        table = source.load(topic)
        if table is None:
            raise HeadwaterOptionError(
                f"The Iceberg table of topic '{topic}' is gone: the query started from its "
                f"snapshot {snapshot_id}")
        tasks = list(table.scan(snapshot_id=snapshot_id).plan_files())
        out += [TablePartition(topic, snapshot_id, group, timestamp_types.get(topic, 0))
                for group in pack(tasks, at_least=at_least)]
    return out


#: Tables an executor's Python worker loaded, by catalog, topic and snapshot: Spark
#: reuses its Python workers, so a worker's next task skips the catalog and metadata.
_loaded: dict[tuple[tuple[tuple[str, str], ...], str, int], Table] = {}


def _table_at(source: TableSource, topic: str, snapshot_id: int) -> Table:
    key = (source.catalog, topic, snapshot_id)
    table = _loaded.get(key)
    if table is None:
        table = source.load(topic)
        if table is None or table.snapshot_by_id(snapshot_id) is None:
            raise RuntimeError(f"snapshot {snapshot_id} of topic '{topic}''s table is gone "
                               "(table dropped or snapshot expired): restart the query "
                               "without its checkpoint")
        if len(_loaded) >= 16:
            _loaded.clear()
        _loaded[key] = table
    return table


def read_table(source: TableSource, schema: pa.Schema, part: TablePartition
               ) -> Iterator[pa.RecordBatch]:
    """The rows of the task's data files as the source's schema, each file's in offset
    order."""
    table = _table_at(source, part.topic, part.snapshot_id)
    scan = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue())
    for task in part.tasks:
        rows = scan.to_table([task])
        if rows.num_rows:
            rows = rows.sort_by([("partition", "ascending"), ("offset", "ascending")])
            yield from as_source_rows(rows, part.topic, part.timestamp_type,
                                      schema).to_batches()


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
