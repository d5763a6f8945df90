"""The table writer's rows from fetched batches: committed records only (no markers, no
aborted transaction's records), none before the fetch offset nor at or past the last
stable offset, and the next offset to read."""

from __future__ import annotations

import struct

import pytest

from headwater.iceberg.columns import RecordColumns
from headwater.iceberg.tables import SpecError, key_value_schema, partition_spec
from headwater.records.batch import build_batch
from headwater.records.control import build_marker

pytestmark = pytest.mark.timeout(30)


def at(batch: bytes, base_offset: int) -> bytes:
    """`batch` with its base offset set (the CRC does not cover it)."""
    return struct.pack(">q", base_offset) + batch[8:]


def records(*values: str, ts: int = 1_700_000_000_000) -> list:
    return [(f"k{v}".encode(), v.encode(), [("h", b"x")], ts + i) for i, v in enumerate(values)]


def log() -> tuple[bytes, list[tuple[int, int]]]:
    """0-1 plain; 2-3 producer 7's transaction, committed by the marker at 4; 5-6
    producer 8's, aborted by the marker at 7; 8 plain."""
    data = b"".join([
        at(build_batch(records("a", "b")), 0),
        at(build_batch(records("t1", "t2"), producer_id=7, producer_epoch=0,
                       base_sequence=0, is_transactional=True), 2),
        at(build_marker(7, 0, True, 0, 1_700_000_000_500), 4),
        at(build_batch(records("x1", "x2"), producer_id=8, producer_epoch=0,
                       base_sequence=0, is_transactional=True), 5),
        at(build_marker(8, 0, False, 0, 1_700_000_000_600), 7),
        at(build_batch(records("c")), 8),
    ])
    return data, [(8, 5)]


SCHEMA = key_value_schema().as_arrow()


def columns() -> RecordColumns:
    return RecordColumns()


def test_committed_records_only_with_their_offsets_and_the_next_offset() -> None:
    data, aborted = log()
    cols = columns()
    assert cols.add(3, data, aborted, 0, 9) == 9
    assert len(cols) == 5 and cols.record_bytes == 12 + 7  # keys ka..kc, values a..c
    table = cols.table(SCHEMA)
    assert table.schema == SCHEMA  # the table's field ids kept
    assert table["offset"].to_pylist() == [0, 1, 2, 3, 8]
    assert table["value"].to_pylist() == [b"a", b"b", b"t1", b"t2", b"c"]
    assert table["partition"].to_pylist() == [3] * 5
    stamps = [t.timestamp() for t in table["timestamp"].to_pylist()[:2]]
    assert stamps == [1_700_000_000.0, 1_700_000_000.001]
    assert table["headers"].to_pylist()[0] == [{"key": "h", "value": b"x"}]


def test_partitions_compressed_batches_and_no_headers() -> None:
    cols = columns()
    plain = build_batch([(None, b"v1", [], 5), (b"k", None, [], 6)])
    assert cols.add(1, at(build_batch(records("z1", "z2"), compression=4), 0), [], 0, 2) == 2
    assert cols.add(0, plain, [], 0, 2) == 2
    table = cols.table(SCHEMA)
    assert table.to_pydict()["partition"] == [0, 0, 1, 1]  # by partition
    assert table["key"].to_pylist()[:2] == [None, b"k"]
    assert table["value"].to_pylist() == [b"v1", None, b"z1", b"z2"]
    assert table["headers"].to_pylist()[0] is None  # a record without headers


def test_a_fetch_from_inside_a_batch_and_below_the_last_stable_offset() -> None:
    data, aborted = log()
    cols = columns()
    # from offset 1 (inside the first batch) up to 5 (an open transaction there)
    assert cols.add(0, data, aborted, 1, 5) == 5
    assert cols.table(SCHEMA)["offset"].to_pylist() == [1, 2, 3]


def test_nothing_complete_reads_nothing_and_stays() -> None:
    data, aborted = log()
    cols = columns()
    assert cols.add(0, data[:30], aborted, 0, 9) == 0
    assert len(cols) == 0 and cols.table(SCHEMA).num_rows == 0


@pytest.mark.parametrize(("text", "fields"), [
    ("hour(timestamp)", [("timestamp_hour", "hour")]),
    ("(day(timestamp), identity(partition))", [("timestamp_day", "day"),
                                                ("partition", "identity")]),
    ("partition", [("partition", "identity")]),
    ("none", []), ("", []),
])
def test_partition_specs(text: str, fields: list[tuple[str, str]]) -> None:
    spec = partition_spec(text, key_value_schema())
    assert [(f.name, str(f.transform)) for f in spec.fields] == fields


@pytest.mark.parametrize("text", ["bucket(key)", "hour(nothing)", "hour(timestamp"])
def test_a_spec_that_does_not_read_is_named(text: str) -> None:
    with pytest.raises(SpecError):
        partition_spec(text, key_value_schema())
