"""The committed records of fetched batches as the columns of a `key_value` table:
partition, offset, timestamp, key, value, headers (docs/iceberg.md)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..records.batch import decode_records, iter_batches
from ..records.transactions import committed_batches


class RecordColumns:
    """Column builders for one table commit, filled a fetch response at a time."""

    def __init__(self) -> None:
        self.partition: list[int] = []
        self.offset: list[int] = []
        self.timestamp: list[int] = []  # microseconds (Iceberg's timestamptz)
        self.key: list[bytes | None] = []
        self.value: list[bytes | None] = []
        self.headers: list[list[dict[str, Any]]] = []
        self.bytes = 0

    def __len__(self) -> int:
        return len(self.offset)

    def add(self, partition: int, data: bytes, aborted: list[tuple[int, int]], start: int,
            upto: int) -> int:
        """The records of `data` (whole batches of a read_committed Fetch from `start`)
        at `start` or after and before `upto` (the last stable offset), but none of
        aborted transactions nor markers. Returns the next offset to read: past the last
        complete batch below `upto`, or `start` if none was complete."""
        view = memoryview(data)
        headers = [h for _pos, h in iter_batches(view)]
        positions = [pos for pos, _h in iter_batches(view)]
        following = start
        for (h, kept), pos in zip(committed_batches(headers, aborted), positions, strict=True):
            if h.base_offset >= upto:
                break
            following = max(following, min(h.next_offset, upto))
            if not kept or h.last_offset < start:
                continue
            for r in decode_records(view[pos:pos + h.size]):
                if r.offset < start or r.offset >= upto:
                    continue
                self.partition.append(partition)
                self.offset.append(r.offset)
                self.timestamp.append(r.timestamp * 1000)
                self.key.append(r.key)
                self.value.append(r.value)
                self.headers.append([{"key": k, "value": v} for k, v in r.headers])
                self.bytes += len(r.key or b"") + len(r.value or b"")
        return following

    def table(self, schema: pa.Schema) -> pa.Table:
        """The rows gathered, as `schema` (the table's, with its field ids)."""
        return pa.table({
            "partition": pa.array(self.partition, pa.int32()),
            "offset": pa.array(self.offset, pa.int64()),
            "timestamp": pa.array(self.timestamp, pa.timestamp("us", tz="UTC")),
            "key": pa.array(self.key, pa.binary()),
            "value": pa.array(self.value, pa.binary()),
            "headers": pa.array(self.headers, schema.field("headers").type),
        }, schema=schema)
