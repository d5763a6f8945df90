"""The native reader (raw Fetch + compiled decoder) against the librdkafka reader.

Both executor paths read the same ranges of the same topics; their Arrow output must be
identical, for every codec, nulls, headers, transactions and sub-ranges. These tests
call the executor functions directly (no Spark session), against a running broker.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql.pandas.types import to_arrow_schema

from pyspark_headwater import executor, fetcher
from pyspark_headwater.cluster import DataLossError
from pyspark_headwater.decode import ColumnBuilder, CorruptRecordsError
from pyspark_headwater.executor import RangePartition, read_range_librdkafka
from pyspark_headwater.options import parse_source_options
from pyspark_headwater.schema import source_schema

from .helpers import create_topic, end_offsets, produce

T0 = 1_700_000_000_000


@pytest.fixture(scope="module", autouse=True)
def _close_cached_clients():
    """The readers cache clients per process; close them before the broker stops."""
    yield
    for consumer in executor._consumers.values():
        consumer.close()
    executor._consumers.clear()
    for bootstrap in {b for b, _security in fetcher._sessions}:
        fetcher.drop_session(bootstrap)


def _schema(headers: bool) -> pa.Schema:
    return to_arrow_schema(source_schema(headers), timezone="UTC")


def _opts(bootstrap: str, topic: str, **extra: str):
    return parse_source_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                                 **extra})


def _read(path: str, opts, part: RangePartition, headers: bool = True,
          chunk_rows: int = 700) -> pa.Table:
    schema = _schema(headers)
    opts = dataclasses.replace(opts, include_headers=headers)
    if path == "native":
        batches = list(fetcher.read_range(opts, schema, part, chunk_rows, 64 << 10))
    else:
        batches = list(read_range_librdkafka(opts, schema, part, chunk_rows))
    return pa.Table.from_batches(batches, schema=schema)


def _varied_records(n: int) -> list[dict]:
    out = []
    for i in range(n):
        r: dict = {"value": None if i % 97 == 5 else bytes([i % 251]) * (i % 300),
                   "timestamp": T0 + i}
        if i % 3:
            r["key"] = b"k%d" % (i % 17)
        if i % 4 == 1:
            r["headers"] = [("h1", b"v%d" % i), ("h2", None), ("", b"")]
        out.append(r)
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_same_rows_as_librdkafka_for_every_codec(broker, topic_name, codec):
    create_topic(broker.bootstrap, topic_name, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                  "linger.ms": 20, "batch.num.messages": 300, "acks": "all"})
    for r in _varied_records(3000):
        p.produce(topic_name, r["value"], key=r.get("key"), headers=r.get("headers"),
                  timestamp=r["timestamp"])
    assert p.flush(30) == 0
    end = end_offsets(broker.bootstrap, topic_name, 1)[0]
    assert end == 3000
    opts = _opts(broker.bootstrap, topic_name)
    for lo, hi in ((0, end), (1234, 2345)):  # the whole log, and a range cut mid-batch
        part = RangePartition(topic_name, 0, lo, hi)
        native = _read("native", opts, part)
        assert native.num_rows == hi - lo
        assert native.column("offset").to_pylist() == list(range(lo, hi))
        assert native.equals(_read("librdkafka", opts, part))
    plain = _read("native", opts, RangePartition(topic_name, 0, 0, end), headers=False)
    assert "headers" not in plain.column_names
    assert plain.column("value").null_count == len(range(5, 3000, 97))


def test_read_committed_drops_aborted_transactions(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic_name})
    p.init_transactions(30)
    for i, commit in enumerate((True, False, True, False, True)):
        p.begin_transaction()
        for j in range(10):
            p.produce(topic_name, b"t%d-%d" % (i, j), key=b"%d" % i)
        assert p.flush(30) == 0  # on the broker: abort_transaction purges unsent records
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    produce(broker.bootstrap, topic_name, [{"value": b"plain"}])
    end = end_offsets(broker.bootstrap, topic_name, 1, "read_committed")[0]
    part = RangePartition(topic_name, 0, 0, end)
    for level, expected in (("read_committed", 31), ("read_uncommitted", 51)):
        opts = _opts(broker.bootstrap, topic_name, **{"kafka.isolation.level": level})
        native = _read("native", opts, part)
        assert native.num_rows == expected
        assert native.equals(_read("librdkafka", opts, part))
    committed = _read("native", _opts(broker.bootstrap, topic_name, **{
        "kafka.isolation.level": "read_committed"}), part).column("value").to_pylist()
    assert {v[:2] for v in committed} == {b"t0", b"t2", b"t4", b"pl"}


def test_log_append_time_topic(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1, config={
        "message.timestamp.type": "LogAppendTime"})])[topic_name].result(30)
    produce(broker.bootstrap, topic_name, [{"value": b"%d" % i, "timestamp": T0}
                                           for i in range(50)])
    opts = _opts(broker.bootstrap, topic_name)
    part = RangePartition(topic_name, 0, 0, 50)
    native = _read("native", opts, part)
    assert set(native.column("timestampType").to_pylist()) == {1}
    assert min(native.column("timestamp").to_pylist()).timestamp() * 1000 > T0
    assert native.equals(_read("librdkafka", opts, part))


def test_deleted_offsets_are_data_loss(broker, topic_name):
    from confluent_kafka import TopicPartition

    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [{"value": b"%d" % i} for i in range(100)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_records([TopicPartition(topic_name, 0, 50)]).values():
        future.result(30)
    part = RangePartition(topic_name, 0, 10, 100)
    with pytest.raises(DataLossError, match="earliest available offset is 50"):
        _read("native", _opts(broker.bootstrap, topic_name), part)
    lenient = _read("native", _opts(broker.bootstrap, topic_name, failOnDataLoss="false"),
                    part)
    assert lenient.column("offset").to_pylist() == list(range(50, 100))


def test_range_beyond_the_log_end_times_out_as_data_loss(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [{"value": b"x"}] * 5)
    opts = _opts(broker.bootstrap, topic_name, **{"kafkaConsumer.pollTimeoutMs": "1000"})
    with pytest.raises(DataLossError, match=r"reading offsets \[5, 8\)"):
        _read("native", opts, RangePartition(topic_name, 0, 0, 8))


def _builder() -> ColumnBuilder:
    return ColumnBuilder(_schema(True), "t", 0, True, rows_hint=4, bytes_hint=16)


def test_decoder_rejects_a_truncated_section():
    # one record (zig-zag varints): length 9, attributes, ts delta 0, offset delta 0,
    # key -1 (null), value 3 "abc", 0 headers
    record = bytes([18, 0, 0, 0, 1, 6]) + b"abc" + bytes([0])
    good = _builder()
    good.add_records(np.frombuffer(record, np.uint8), 1, 7, T0, False, 0, 100)
    batch = good.flush()
    assert batch.column("value").to_pylist() == [b"abc"]
    assert batch.column("offset").to_pylist() == [7]
    assert batch.column("key").to_pylist() == [None]
    assert batch.column("headers").to_pylist() == [None]
    bad = _builder()
    with pytest.raises(CorruptRecordsError):
        bad.add_records(np.frombuffer(record[:-3], np.uint8), 1, 7, T0, False, 0, 100)
    with pytest.raises(CorruptRecordsError):  # more records announced than present
        bad.add_records(np.frombuffer(record, np.uint8), 2, 7, T0, False, 0, 100)
    null_header_key = bytes([14, 0, 0, 0, 1, 0, 2, 1])  # one header whose key is null
    with pytest.raises(CorruptRecordsError):
        bad.add_records(np.frombuffer(null_header_key, np.uint8), 1, 7, T0, False, 0, 100)
    assert bad.rows == 0  # nothing of a bad batch is kept
    bad.add_records(np.frombuffer(record, np.uint8), 1, 8, T0, False, 0, 100)
    assert bad.flush().column("value").to_pylist() == [b"abc"]  # still usable


def test_builder_grows_past_its_hints():
    b = _builder()
    value = b"v" * 200
    # attributes, ts delta, offset delta, null key, value length 200 (varint 0x90 0x03)
    body = bytes([0, 0, 0, 1, 0x90, 0x03]) + value + bytes([0])
    section = bytes([len(body) * 2 & 0x7F | 0x80, len(body) * 2 >> 7]) + body
    for i in range(50):  # 50 single-record batches, each larger than the hints
        b.add_records(np.frombuffer(section, np.uint8), 1, i, T0, False, 0, 100)
    batch = b.flush()
    assert batch.num_rows == 50
    assert batch.column("value").to_pylist() == [value] * 50
    assert batch.column("key").to_pylist() == [None] * 50
    assert batch.column("offset").to_pylist() == list(range(50))


def test_reconnects_when_a_cached_connection_died(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [{"value": b"%d" % i} for i in range(20)])
    opts = _opts(broker.bootstrap, topic_name)
    part = RangePartition(topic_name, 0, 0, 20)
    assert _read("native", opts, part).num_rows == 20
    session = fetcher.session_for(opts.bootstrap, 30.0)
    assert session._conns  # cached for the next task of this worker process
    for conn in session._conns.values():
        conn.sock.close()  # as if the broker had restarted in between
    again = _read("native", opts, part)
    assert again.column("value").to_pylist() == [b"%d" % i for i in range(20)]


@pytest.mark.parametrize(("client", "codec"), [("kafka-python", "gzip"),
                                               ("kafka-python", "snappy"),
                                               ("aiokafka", "lz4"), ("aiokafka", "zstd")])
def test_batches_of_other_clients(broker, topic_name, client, codec):
    """Each client lays out batches and records its own way (varint widths, batch sizes,
    codec framing): the native reader decodes them like librdkafka does."""
    create_topic(broker.bootstrap, topic_name, 1)
    records = [(None if i % 5 == 0 else b"k%d" % i, bytes([i % 256]) * (i * 7 % 500),
                [("h", b"%d" % i)] if i % 3 == 0 else [], T0 + i) for i in range(400)]
    if client == "kafka-python":
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                                 compression_type=codec, linger_ms=20)
        for k, v, h, ts in records:
            producer.send(topic_name, value=v, key=k, headers=h, timestamp_ms=ts)
        producer.flush(30)
        producer.close()
    else:
        import asyncio

        from aiokafka import AIOKafkaProducer

        async def send() -> None:
            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                                        compression_type=codec, linger_ms=20)
            await producer.start()
            try:
                for k, v, h, ts in records:
                    await producer.send(topic_name, value=v, key=k, headers=h,
                                        timestamp_ms=ts)
            finally:
                await producer.stop()

        asyncio.run(send())
    opts = _opts(broker.bootstrap, topic_name)
    part = RangePartition(topic_name, 0, 0, 400)
    native = _read("native", opts, part)
    assert native.column("value").to_pylist() == [v for _, v, _, _ in records]
    assert native.equals(_read("librdkafka", opts, part))


def test_undecompressable_records_are_a_clear_error():
    from pyspark_headwater.codecs import GZIP, LZ4, SNAPPY, ZSTD, CodecError, decompress

    for codec in (GZIP, LZ4, ZSTD, SNAPPY):
        with pytest.raises(CodecError):
            decompress(codec, b"\x82SNAPPY\x00" + b"\x00" * 8 + b"\x7f\xff\xff\xff garbage")
    with pytest.raises(CodecError, match="unknown compression codec 7"):
        decompress(7, b"x")
