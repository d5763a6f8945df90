"""`headwater.iceberg.mode=value_schema`: each record's value parsed into the typed
fields of the table's `value` column, by the schema in `headwater.iceberg.value.schema`
(an Avro record schema, the language Kafka users write schemas in); records whose value
does not parse go to the dead-letter table `<topic>~dlq` (docs/iceberg.md).

`headwater.iceberg.value.encoding` says what a value is: `json` (the default), `avro`
(Avro's binary encoding of that schema), or `confluent-avro` (the same after Confluent's
five-byte prefix: a zero byte and the schema id, as Confluent's serializers write it).

JSON values are parsed a commit at a time by Arrow's JSON reader (one line per value),
not one by one; only a commit holding a value that does not parse is parsed again value
by value, to tell the bad from the good. Avro values are decoded by fastavro, one by one
(Avro's binary form has no batch reader in Arrow).
"""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BooleanType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
)

from .tables import key_value_schema

#: The dead-letter table's name beside the topic's (Redpanda's).
DLQ_SUFFIX = "~dlq"
#: `headwater.iceberg.value.encoding`'s values.
ENCODINGS = ("json", "avro", "confluent-avro")

_PRIMITIVES: dict[str, tuple[IcebergType, pa.DataType]] = {
    "boolean": (BooleanType(), pa.bool_()), "int": (IntegerType(), pa.int32()),
    "long": (LongType(), pa.int64()), "float": (FloatType(), pa.float32()),
    "double": (DoubleType(), pa.float64()), "string": (StringType(), pa.string()),
    "enum": (StringType(), pa.string()),
}


class ValueSchemaError(ValueError):
    """A `headwater.iceberg.value.schema` this writer cannot use."""


class ValueSchema:
    """The value's fields as an Iceberg struct (every field optional: a value that
    lacks one has it null) and as the Arrow schema the JSON reader parses with."""

    def __init__(self, text: str, encoding: str = "json") -> None:
        try:
            avro = json.loads(text)
        except ValueError as exc:
            raise ValueSchemaError(f"not JSON: {exc}") from None
        if not isinstance(avro, dict) or avro.get("type") != "record":
            raise ValueSchemaError('an Avro record schema is needed: {"type": "record", '
                                   '"name": ..., "fields": [...]}')
        if encoding not in ENCODINGS:
            raise ValueSchemaError(f"encoding {encoding!r} is not one of "
                                   + ", ".join(ENCODINGS))
        self.encoding = encoding
        self._ids = iter(range(100, 1 << 30))
        self.struct, arrow = self._record(avro)
        self.arrow = pa.schema(list(arrow))
        try:  # what the Avro decoder reads values with (checked even for JSON values)
            self.avro = fastavro.parse_schema(avro)
        except Exception as exc:  # noqa: BLE001 - fastavro's errors have no common base
            raise ValueSchemaError(f"not a valid Avro schema: {exc}") from None

    def table_schema(self) -> Schema:
        """key_value's columns, with `value` this struct."""
        fields = [f if f.name != "value" else NestedField(5, "value", self.struct,
                                                          required=False)
                  for f in key_value_schema().fields]
        return Schema(*fields)

    def _record(self, avro: dict[str, Any]) -> tuple[StructType, pa.StructType]:
        fields = avro.get("fields")
        if not isinstance(fields, list):
            raise ValueSchemaError(f"record {avro.get('name')!r} has no fields list")
        iceberg, arrow = [], []
        for f in fields:
            if not isinstance(f, dict) or not isinstance(f.get("name"), str):
                raise ValueSchemaError(f"a field without a name: {f!r}")
            itype, atype = self._type(f.get("type"), f["name"])
            iceberg.append(NestedField(next(self._ids), f["name"], itype, required=False))
            arrow.append(pa.field(f["name"], atype))
        return StructType(*iceberg), pa.struct(arrow)

    def _type(self, avro: Any, name: str) -> tuple[IcebergType, pa.DataType]:
        if isinstance(avro, list):  # a union: ["null", T] (T nullable; all fields are)
            others = [t for t in avro if t != "null"]
            if len(others) != 1:
                raise ValueSchemaError(f"field {name!r}: only unions of null and one type")
            return self._type(others[0], name)
        if isinstance(avro, dict):
            kind = avro.get("type")
            if kind == "record":
                return self._record(avro)
            if kind == "array":
                element, arrow = self._type(avro.get("items"), name)
                return (ListType(next(self._ids), element, element_required=False),
                        pa.list_(arrow))
            if kind in _PRIMITIVES:  # {"type": "long", "logicalType": ...}: the base type
                return _PRIMITIVES[kind]
        elif isinstance(avro, str) and avro in _PRIMITIVES:
            return _PRIMITIVES[avro]
        raise ValueSchemaError(f"field {name!r}: type {avro!r} is not supported (boolean, "
                               "int, long, float, double, string, enum, record, array, "
                               "unions with null)")


def parse(values: pa.Array, schema: ValueSchema
          ) -> tuple[pa.StructArray, list[int], list[str]]:
    """`values` (binary, in the schema's encoding) as a struct array of `schema` (a null
    value stays null), and the indices of the values that do not parse with why."""
    raw = values.to_pylist()
    if schema.encoding != "json":
        return _parse_avro(raw, schema)
    good = [i for i, v in enumerate(raw) if v is not None]
    lines = [_one_line(raw[i]) for i in good]
    bad: dict[int, str] = {}
    try:
        parsed = _read(lines, schema)
    except (pa.ArrowInvalid, ValueError):  # some value is bad: which, one at a time
        kept_lines, kept = [], []
        for i, line in zip(good, lines, strict=True):
            try:
                _read([line], schema)
            except (pa.ArrowInvalid, ValueError) as exc:
                bad[i] = str(exc).splitlines()[0][:500]
                continue
            kept.append(i)
            kept_lines.append(line)
        good = kept
        parsed = _read(kept_lines, schema)
    # the parsed values at their rows, nulls where the value was null or bad
    positions = {i: n for n, i in enumerate(good)}
    take = pa.array([positions.get(i) for i in range(len(raw))], pa.int64())
    return parsed.take(take), sorted(bad), [bad[i] for i in sorted(bad)]


def _parse_avro(raw: list[bytes | None], schema: ValueSchema
                ) -> tuple[pa.StructArray, list[int], list[str]]:
    framed = schema.encoding == "confluent-avro"
    decoded: list[dict[str, Any] | None] = []
    bad: list[int] = []
    errors: list[str] = []
    for i, value in enumerate(raw):
        if value is None:
            decoded.append(None)
            continue
        try:
            decoded.append(_decode_avro(value, schema.avro, framed))
        except Exception as exc:  # noqa: BLE001 - any failure to decode: a dead letter
            decoded.append(None)
            bad.append(i)
            errors.append(f"{type(exc).__name__}: {exc}"[:500])
    return pa.array(decoded, pa.struct(list(schema.arrow))), bad, errors


def _decode_avro(value: bytes, avro: Any, framed: bool) -> dict[str, Any]:
    if framed:
        if len(value) < 5 or value[0] != 0:
            raise ValueError("not Confluent's wire format (a zero byte, then a 4-byte "
                             "schema id)")
        value = value[5:]
    buffer = io.BytesIO(value)
    record = fastavro.schemaless_reader(buffer, avro, None)
    if buffer.tell() != len(value):
        raise ValueError(f"{len(value) - buffer.tell()} bytes left after the record")
    if not isinstance(record, dict):
        raise ValueError("not a record")
    return record


def _one_line(value: bytes) -> bytes:
    if b"\n" not in value and b"\r" not in value:
        return value
    try:
        return json.dumps(json.loads(value)).encode()
    except ValueError:
        return value.replace(b"\n", b" ").replace(b"\r", b" ")  # fails to parse below


def _read(lines: list[bytes], schema: ValueSchema) -> pa.StructArray:
    if not lines:
        return pa.array([], pa.struct(list(schema.arrow)))
    data = b"\n".join(lines) + b"\n"
    table = pj.read_json(
        io.BytesIO(data), read_options=pj.ReadOptions(block_size=len(data) + 1),
        parse_options=pj.ParseOptions(explicit_schema=schema.arrow,
                                      unexpected_field_behavior="ignore"))
    if table.num_rows != len(lines):
        raise ValueError(f"{len(lines)} values read as {table.num_rows} rows")
    return pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns],
                                      fields=list(schema.arrow))


def dead_letter_schema() -> Schema:
    """key_value's columns and why the value did not parse."""
    fields = list(key_value_schema().fields)
    return Schema(*fields, NestedField(10, "error", StringType(), required=True))


def split(rows: pa.Table, schema: ValueSchema, main: pa.Schema
          ) -> tuple[pa.Table, pa.Table]:
    """key_value `rows` as the value-schema table's (`main`, its Arrow schema) and the
    dead-letter table's (key_value's columns and the error) rows."""
    parsed, bad, errors = parse(rows["value"], schema)
    keep = pa.array(sorted(set(range(rows.num_rows)) - set(bad)), pa.int64())
    value = conform(parsed.take(keep), main.field("value").type)
    columns = [value if name == "value" else rows[name].take(keep)
               for name in main.names]
    good = pa.Table.from_arrays(columns, schema=main)
    dead = rows.take(pa.array(bad, pa.int64())).append_column(
        "error", pa.array(errors, pa.large_string()))
    return good, dead


def conform(array: pa.Array, target: pa.DataType) -> pa.Array:
    """`array` as `target`, struct fields matched by name (a field the value schema
    dropped is null; the table's order, which evolution appends to, kept)."""
    if pa.types.is_struct(target) and pa.types.is_struct(array.type):
        children = []
        for i in range(target.num_fields):
            field = target.field(i)
            idx = array.type.get_field_index(field.name)
            children.append(conform(array.field(idx), field.type) if idx >= 0
                            else pa.nulls(len(array), field.type))
        return pa.StructArray.from_arrays(
            children, fields=[target.field(i) for i in range(target.num_fields)],
            mask=array.is_null())
    if pa.types.is_large_list(target) or pa.types.is_list(target):
        if pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
            values = conform(array.flatten(), target.value_type)
            offsets = pc.subtract(array.offsets, array.offsets[0]).cast(
                pa.int64() if pa.types.is_large_list(target) else pa.int32())
            cls = pa.LargeListArray if pa.types.is_large_list(target) else pa.ListArray
            return cls.from_arrays(offsets, values, type=target, mask=array.is_null())
    return array.cast(target)
