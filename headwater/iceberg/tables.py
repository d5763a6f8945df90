"""The catalog and the topics' tables (pyiceberg): a `key_value` table's schema, its
partition spec from `headwater.iceberg.partition.spec`, and the offsets its snapshots
carry."""

from __future__ import annotations

import json
import re
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import (
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    YearTransform,
)
from pyiceberg.types import (
    BinaryType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

#: The snapshot summary property holding, as JSON, the next offset of every partition
#: whose records the table holds ({"0": 1500, "3": 98}): what a writer resumes from.
OFFSETS_PROPERTY = "headwater.offsets"
#: Spark's catalog name for the tables (`spark.table("headwater.db.orders")`), stored in
#: the SQL catalog's rows as Iceberg's JDBC catalog stores its name.
CATALOG_NAME = "headwater"

_TRANSFORMS: dict[str, Transform[Any, Any]] = {
    "hour": HourTransform(), "day": DayTransform(), "month": MonthTransform(),
    "year": YearTransform(), "identity": IdentityTransform()}
_FIELD = re.compile(r"^\s*(?:(\w+)\s*\(\s*(\w+)\s*\)|(\w+))\s*$")


class SpecError(ValueError):
    """A `headwater.iceberg.partition.spec` this writer cannot read."""


def open_catalog(uri: str, warehouse: str, properties: dict[str, str] | None = None
                 ) -> Catalog:
    """Iceberg's SQL catalog at `uri` (SQLite on one node, the shared log's PostgreSQL
    on a cluster), data and metadata files under `warehouse` (`properties`: the file
    IO's, such as an object store's `s3.endpoint` and keys)."""
    return SqlCatalog(CATALOG_NAME, uri=uri, warehouse=warehouse, **(properties or {}))


def key_value_schema() -> Schema:
    header = StructType(NestedField(8, "key", StringType(), required=True),
                        NestedField(9, "value", BinaryType(), required=False))
    return Schema(
        NestedField(1, "partition", IntegerType(), required=True),
        NestedField(2, "offset", LongType(), required=True),
        NestedField(3, "timestamp", TimestamptzType(), required=True),
        NestedField(4, "key", BinaryType(), required=False),
        NestedField(5, "value", BinaryType(), required=False),
        NestedField(6, "headers", ListType(7, header, element_required=True),
                    required=False))


def partition_spec(text: str, schema: Schema) -> PartitionSpec:
    """`hour(timestamp)` (the default), `day(timestamp)`, `identity(partition)`,
    `partition`, several separated by commas; empty or `none`: unpartitioned."""
    text = text.strip()
    if text == "none":
        text = ""
    if text.startswith("(") and text.endswith(")"):  # Redpanda's "(hour(...), ...)"
        text = text[1:-1]
    fields = []
    for i, part in enumerate(p for p in text.split(",") if p.strip()):
        m = _FIELD.match(part)
        if m is None:
            raise SpecError(f"cannot read partition field {part.strip()!r}")
        transform_name, column = (m.group(1), m.group(2)) if m.group(1) else \
            ("identity", m.group(3))
        transform = _TRANSFORMS.get(transform_name.lower())
        if transform is None:
            raise SpecError(f"unknown transform {transform_name!r} (hour, day, month, "
                            "year, identity)")
        try:
            source = schema.find_field(column)
        except ValueError:
            raise SpecError(f"no column {column!r} to partition by") from None
        name = column if isinstance(transform, IdentityTransform) else \
            f"{column}_{transform_name.lower()}"
        fields.append(PartitionField(source_id=source.field_id, field_id=1000 + i,
                                     transform=transform, name=name))
    return PartitionSpec(*fields)


#: pyiceberg's own retry of a commit that lost the catalog's compare-and-swap re-applies
#: the append on the new snapshot with the snapshot properties it was built with: the
#: offsets of the partitions the other writer just moved would go back, and that writer
#: would write its last rows again. The writer retries itself, from the new offsets.
NO_RETRIES = {"commit.retry.num-retries": "0"}


def topic_table(catalog: Catalog, namespace: str, topic: str, spec: str,
                schema: Schema | None = None) -> Table:
    """The topic's table (`schema`: key_value's unless given), created (with its
    namespace) on first use; pyiceberg's commit retries off (`NO_RETRIES`), on a table
    created before they were too; fields `schema` has that the table lacks are added
    (a value schema that gained a field: Iceberg's schema evolution)."""
    identifier = (namespace, topic)
    schema = schema or key_value_schema()
    try:
        table = catalog.load_table(identifier)
    except NoSuchTableError:
        catalog.create_namespace_if_not_exists(namespace)
        table = catalog.create_table_if_not_exists(
            identifier, schema=schema, partition_spec=partition_spec(spec, schema),
            properties=NO_RETRIES)
    if any(table.properties.get(k) != v for k, v in NO_RETRIES.items()):
        table = table.transaction().set_properties(NO_RETRIES).commit_transaction()
    if _lacks(table.schema().as_struct(), schema.as_struct()):
        with table.update_schema() as update:
            update.union_by_name(schema)
        table = catalog.load_table(identifier)
    return table


def _lacks(have: StructType, want: StructType) -> bool:
    """`want` has a field, at any depth, that `have` has not (by name)."""
    for field in want.fields:
        mine = have.field_by_name(field.name)
        if mine is None:
            return True
        if isinstance(field.field_type, StructType) and isinstance(mine.field_type,
                                                                    StructType):
            if _lacks(mine.field_type, field.field_type):
                return True
    return False


def table_offsets(table: Table) -> dict[int, int]:
    """The next offset of each partition as of the table's current snapshot ({} for a
    table nothing was written to yet)."""
    snapshot = table.current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return {}
    raw = snapshot.summary.get(OFFSETS_PROPERTY)
    return {int(p): int(o) for p, o in json.loads(raw).items()} if raw else {}


def offsets_property(offsets: dict[int, int]) -> dict[str, str]:
    return {OFFSETS_PROPERTY: json.dumps({str(p): o for p, o in sorted(offsets.items())})}
