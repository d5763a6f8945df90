"""The committed records of fetched batches as the columns of a `key_value` table:
partition, offset, timestamp, key, value, headers (docs/iceberg.md).

Batches, not records, are walked in Python (which to keep: committed ones, not markers);
each kept batch's records go to Arrow buffers through the compiled decoder the Spark
connector reads with (`records/arrow_decode.py`): no Python object per record."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..records.arrow_decode import KEY_BYTES, VALUE_BYTES, ColumnBuilder
from ..records.batch import HEADER_SIZE, iter_batches
from ..records.compression import decompress
from ..records.transactions import committed_batches

#: The table's columns, in the order its schema has them.
COLUMNS = ("partition", "offset", "timestamp", "key", "value", "headers")
_TIMESTAMP = pa.timestamp("us", tz="UTC")
#: What the decoder emits (the Spark connector's source schema); `table` casts it to the
#: table's own (pyiceberg's large_binary and large_list, its field ids).
_DECODED = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
    ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", _TIMESTAMP),
    ("timestampType", pa.int32()),
    ("headers", pa.list_(pa.field("element", pa.struct([
        pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())]),
        nullable=False)))])


class RecordColumns:
    """Column builders for one table commit, filled a fetch response at a time."""

    def __init__(self) -> None:
        self._builders: dict[int, ColumnBuilder] = {}
        self._batches: list[pa.RecordBatch] = []
        self._rows = 0

    def __len__(self) -> int:
        return self._rows + sum(b.rows for b in self._builders.values())

    @property
    def record_bytes(self) -> int:
        """Key and value bytes gathered (what a commit's size is counted in)."""
        flushed = sum(b.column("key").nbytes + b.column("value").nbytes
                      for b in self._batches)
        return int(flushed) + sum(int(b.fill[KEY_BYTES] + b.fill[VALUE_BYTES])
                             for b in self._builders.values())

    def add(self, partition: int, data: bytes, aborted: list[tuple[int, int]], start: int,
            upto: int) -> int:
        """The records of `data` (whole batches of a read_committed Fetch from `start`)
        at `start` or after and before `upto` (the last stable offset), but none of
        aborted transactions nor markers. Returns the next offset to read: past the last
        complete batch below `upto`, or `start` if none was complete."""
        view = memoryview(data)
        found = list(iter_batches(view))
        builder = self._builders.get(partition)
        if builder is None:
            builder = self._builders[partition] = ColumnBuilder(
                _DECODED, "", partition, headers=True)
        following = start
        for (h, kept), (pos, _h) in zip(committed_batches([h for _p, h in found], aborted),
                                        found, strict=True):
            if h.base_offset >= upto:
                break
            following = max(following, min(h.next_offset, upto))
            if not kept or h.last_offset < start:
                continue
            section = view[pos + HEADER_SIZE:pos + h.size]
            if h.compression:
                section = memoryview(decompress(h.compression, section))
            log_append_time = h.timestamp_type == 1
            builder.add_records(np.frombuffer(section, dtype=np.uint8), h.records_count,
                                h.base_offset,
                                h.max_timestamp if log_append_time else h.base_timestamp,
                                log_append_time, start, upto)
        return following

    def table(self, schema: pa.Schema) -> pa.Table:
        """The rows gathered, as `schema` (the table's, with its field ids)."""
        for partition in sorted(self._builders):
            builder = self._builders.pop(partition)
            if builder.rows:
                self._rows += builder.rows
                self._batches.append(builder.flush())
        if not self._batches:
            return schema.empty_table()
        gathered = pa.Table.from_batches(self._batches).select(list(COLUMNS))
        return gathered.cast(schema)
