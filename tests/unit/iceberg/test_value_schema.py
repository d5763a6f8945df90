"""`value_schema` tables: an Avro record schema as the value's Iceberg struct, JSON
values parsed a commit at a time, the bad ones told apart for the dead-letter table
(headwater/iceberg/value_schema.py)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from headwater.iceberg.tables import key_value_schema
from headwater.iceberg.value_schema import ValueSchema, ValueSchemaError, split

SCHEMA = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": ["null", "string"]},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "where", "type": {"type": "record", "name": "W", "fields": [
        {"name": "x", "type": "double"}]}}]})


def key_value_rows(*values: bytes | None) -> pa.Table:
    n = len(values)
    schema = key_value_schema().as_arrow()
    return pa.table({
        "partition": pa.array([0] * n, pa.int32()), "offset": pa.array(range(n), pa.int64()),
        "timestamp": pa.array([0] * n, pa.timestamp("us", tz="UTC")),
        "key": pa.array([None] * n, pa.large_binary()),
        "value": pa.array(values, pa.large_binary()),
        "headers": pa.array([None] * n, schema.field("headers").type)}).cast(schema)


def test_the_schemas_fields_become_the_value_struct() -> None:
    struct = ValueSchema(SCHEMA).table_schema().find_field("value").field_type
    assert [f.name for f in struct.fields] == ["id", "name", "tags", "where"]
    assert all(not f.required for f in struct.fields)


@pytest.mark.parametrize("text", ["nope", '{"type": "string"}', json.dumps(
    {"type": "record", "name": "R", "fields": [{"name": "m", "type": {"type": "map",
                                                                     "values": "long"}}]})])
def test_schemas_it_cannot_use_are_refused(text: str) -> None:
    with pytest.raises(ValueSchemaError):
        ValueSchema(text)


def test_good_values_typed_bad_ones_dead_lettered_with_why() -> None:
    schema = ValueSchema(SCHEMA)
    table_arrow = schema.table_schema().as_arrow()
    rows = key_value_rows(
        b'{"id": 1, "name": "a", "tags": ["x"], "where": {"x": 1.5}}',
        b"not json",
        b'{"id": "two"}',
        None,
        b'{\n "id": 5, "extra": true\n}')
    good, dead = split(rows, schema, table_arrow)
    assert good.schema == table_arrow
    assert good["offset"].to_pylist() == [0, 3, 4]
    assert good["value"].to_pylist() == [
        {"id": 1, "name": "a", "tags": ["x"], "where": {"x": 1.5}}, None,
        {"id": 5, "name": None, "tags": None, "where": None}]
    assert dead["offset"].to_pylist() == [1, 2]
    assert dead["value"].to_pylist() == [b"not json", b'{"id": "two"}']
    assert all(dead["error"].to_pylist())


def _avro(record: dict[str, object], framed: bool = False) -> bytes:
    import io
    import struct

    import fastavro

    out = io.BytesIO()
    if framed:  # Confluent's serializers: a zero byte, then the schema id
        out.write(b"\x00" + struct.pack(">i", 7))
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(SCHEMA)), record)
    return out.getvalue()


ORDER = {"id": 1, "name": "a", "tags": ["x", "y"], "where": {"x": 1.5}}


@pytest.mark.parametrize("encoding", ["avro", "confluent-avro"])
def test_avro_values_decoded_bad_ones_dead_lettered(encoding: str) -> None:
    framed = encoding == "confluent-avro"
    schema = ValueSchema(SCHEMA, encoding)
    table_arrow = schema.table_schema().as_arrow()
    whole = _avro(ORDER, framed)
    rows = key_value_rows(
        whole,
        _avro({**ORDER, "id": 2, "name": None, "tags": []}, framed),
        whole[:-3],  # cut short
        whole + b"\x02",  # a byte too many
        None,
        b'{"id": 3}')  # JSON, not Avro
    good, dead = split(rows, schema, table_arrow)
    assert good["offset"].to_pylist() == [0, 1, 4]
    assert good["value"].to_pylist() == [
        ORDER, {"id": 2, "name": None, "tags": [], "where": {"x": 1.5}}, None]
    assert dead["offset"].to_pylist() == [2, 3, 5]
    assert all(dead["error"].to_pylist())
    if framed:
        assert "Confluent" in dead["error"].to_pylist()[2]


def test_an_unknown_encoding_is_refused() -> None:
    with pytest.raises(ValueSchemaError, match="encoding"):
        ValueSchema(SCHEMA, "protobuf")
