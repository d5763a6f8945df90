"""A compacted topic's table: the latest row of each (partition, key), tombstones and
keyless records (headwater/iceberg/upsert.py), and the delete-then-append commit on a
SQLite catalog."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from headwater.iceberg.tables import open_catalog, table_offsets, topic_table
from headwater.iceberg.upsert import commit_upsert, latest


def rows(*items: tuple[int, int, bytes | None, bytes | None]) -> pa.Table:
    partitions, offsets, keys, values = zip(*items, strict=True)
    return pa.table({"partition": pa.array(partitions, pa.int32()),
                     "offset": pa.array(offsets, pa.int64()),
                     "key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())})


def test_the_last_of_each_partitions_key_tombstones_deleting_keyless_left_out() -> None:
    kept, touched = latest(rows((0, 0, b"a", b"1"), (0, 1, b"b", b"1"), (1, 0, b"a", b"x"),
                                (0, 2, b"a", b"2"), (0, 3, b"b", None), (0, 4, None, b"n")))
    assert kept.to_pydict() == {"partition": [1, 0], "offset": [0, 2], "key": [b"a", b"a"],
                                "value": [b"x", b"2"]}
    assert touched == {0: {b"a", b"b"}, 1: {b"a"}}


def test_commits_replace_and_delete_keys_with_the_offsets(tmp_path: Path) -> None:
    catalog = open_catalog(f"sqlite:///{tmp_path / 'c.db'}", (tmp_path / "wh").as_uri())
    table = topic_table(catalog, "db", "t", "none")
    schema = table.schema().as_arrow()

    def full(*items: tuple[int, int, bytes | None, bytes | None]) -> pa.Table:
        t = rows(*items)
        n = t.num_rows
        return pa.table({"partition": t["partition"], "offset": t["offset"],
                         "timestamp": pa.array([0] * n, pa.timestamp("us", tz="UTC")),
                         "key": t["key"], "value": t["value"],
                         "headers": pa.array([None] * n, schema.field("headers").type)}
                        ).cast(schema)

    assert commit_upsert(table, full((0, 0, b"a", b"1"), (0, 1, b"b", b"1")),
                         {"headwater.offsets": '{"0": 2}'}) == 2
    table = catalog.load_table(("db", "t"))
    assert commit_upsert(table, full((0, 2, b"a", b"2"), (0, 3, b"b", None)),
                         {"headwater.offsets": '{"0": 4}'}) == 1
    table = catalog.load_table(("db", "t"))
    got = table.scan().to_arrow().select(["offset", "key", "value"]).to_pylist()
    assert got == [{"offset": 2, "key": b"a", "value": b"2"}]
    assert table_offsets(table) == {0: 4}
