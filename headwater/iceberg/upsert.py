"""A compacted topic's table (`cleanup.policy` with `compact`): what compaction keeps,
the latest value of each key of each partition, with a tombstone (a null value) deleting
the key (docs/iceberg.md, "Compacted topics").

A commit deletes the table's rows of every (partition, key) its records touch and
appends the latest record of each that is not a tombstone, in one catalog commit (one
transaction of two snapshots, both carrying the new offsets): a reader sees the keys as
before the commit or as after it, never both. Keys are per partition as compaction's
are; a record without a key (which a compacted topic refuses) is left out.
"""

from __future__ import annotations

import warnings
from collections import defaultdict

import pyarrow as pa
from pyiceberg.expressions import And, BooleanExpression, EqualTo, In, Or
from pyiceberg.table import Table


def latest(rows: pa.Table) -> tuple[pa.Table, dict[int, set[bytes]]]:
    """The last row of each (partition, key) of `rows` that is not a tombstone, and the
    keys touched per partition (the rows to delete first)."""
    last: dict[tuple[int, bytes], int] = {}
    touched: dict[int, set[bytes]] = defaultdict(set)
    partitions = rows["partition"].to_pylist()
    keys = rows["key"].to_pylist()
    for i, (p, k) in enumerate(zip(partitions, keys, strict=True)):
        if k is None:
            continue
        last[(p, k)] = i  # rows come in offset order within a partition
        touched[p].add(k)
    values_valid = rows["value"].is_valid().to_pylist()
    kept = sorted(i for i in last.values() if values_valid[i])
    return rows.take(pa.array(kept, pa.int64())), dict(touched)


def key_filter(touched: dict[int, set[bytes]]) -> BooleanExpression:
    """The rows of these keys of these partitions."""
    terms: list[BooleanExpression] = [And(_equal("partition", p), _within("key", keys))
                                      for p, keys in sorted(touched.items())]
    return terms[0] if len(terms) == 1 else Or(*terms)


# pyiceberg's predicates take (term, value) positionally in their __new__; their
# pydantic fields are what mypy sees.
def _equal(column: str, value: int) -> BooleanExpression:
    return EqualTo(column, value)  # type: ignore[call-arg,arg-type]


def _within(column: str, values: set[bytes]) -> BooleanExpression:
    return In(column, values)  # type: ignore[call-arg,arg-type]


def commit_upsert(table: Table, rows: pa.Table, properties: dict[str, str]) -> int:
    """Delete the touched keys' rows and append their latest values, in one commit (a
    lost compare-and-swap raises CommitFailedException, as an append does). Returns
    the rows appended."""
    kept, touched = latest(rows)
    if not touched:
        return 0
    with table.transaction() as tx:
        with warnings.catch_warnings():  # new keys: nothing to delete is no news
            warnings.filterwarnings("ignore", "Delete operation did not match any records")
            tx.delete(key_filter(touched), snapshot_properties=properties)
        if kept.num_rows:
            tx.append(kept, snapshot_properties=properties)
    return int(kept.num_rows)
