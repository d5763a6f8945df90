"""RecordBatch v2: build/validate/decode round trips, rejection codes, header patches."""

from __future__ import annotations

import struct

import cramjam
import pytest
from crc32c import crc32c
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode as E

from headwater.records.batch import (
    HEADER_SIZE,
    build_batch,
    decode_records,
    iter_batches,
    parse_header,
    set_base_offset,
    set_log_append_time,
    validate_produce_records,
)
from headwater.records.compression import compress, decompress
from headwater.storage.errors import LogError

RECORDS = [
    (b"key-1", b"value-1", [("trace", b"abc"), ("empty", None)], 1_700_000_000_000),
    (None, b"no key", [], 1_700_000_000_005),
    (b"tombstone", None, [("h", b"")], 1_699_999_999_990),  # timestamps may go backwards
    (b"", b"x" * 3000, [], 1_700_000_000_100),
]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_round_trip_each_codec(codec: int) -> None:
    data = build_batch(RECORDS, base_offset=0, compression=codec, producer_id=7,
                       producer_epoch=2, base_sequence=11, partition_leader_epoch=3)
    [h] = validate_produce_records(data, 1 << 20)
    assert h.compression == codec
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, 11)
    assert h.last_sequence == 14 and h.records_count == 4 and h.last_offset_delta == 3
    assert h.base_timestamp == 1_700_000_000_000 and h.max_timestamp == 1_700_000_000_100
    assert h.size == len(data)
    if codec:
        assert len(data) < 3000  # the repetitive value really was compressed
    buf = bytearray(data)
    set_base_offset(buf, 0, 500)
    validate_produce_records(buf, 1 << 20)  # base offset is outside the CRC
    decoded = decode_records(buf)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == [
        (500 + i, ts, key, value, list(headers))
        for i, (key, value, headers, ts) in enumerate(RECORDS)
    ]


@pytest.mark.parametrize("codec", [0, 1])
def test_kafka_python_reads_our_batches_and_we_read_theirs(codec: int) -> None:
    ours = build_batch(RECORDS, compression=codec)
    theirs_view = MemoryRecords(ours).next_batch()
    assert [(r.offset, r.timestamp, r.key, r.value) for r in theirs_view] == [
        (i, ts, key, value) for i, (key, value, _, ts) in enumerate(RECORDS)
    ]
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0,
                                        producer_id=9, producer_epoch=0, base_sequence=0,
                                        batch_size=1 << 20)
    for i, (key, value, headers, ts) in enumerate(RECORDS):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    theirs = bytes(builder.build())
    [h] = validate_produce_records(theirs, 1 << 20)
    assert h.producer_id == 9 and h.compression == codec
    assert [r.value for r in decode_records(theirs)] == [r[1] for r in RECORDS]


def test_snappy_accepts_raw_and_xerial_framing() -> None:
    payload = bytes(range(256)) * 400  # > one 32 KiB xerial block
    raw = bytes(cramjam.snappy.compress_raw(payload))
    assert decompress(2, raw) == payload
    framed = compress(2, payload)
    assert framed.startswith(b"\x82SNAPPY\x00")
    assert decompress(2, framed) == payload
    # A hand-built xerial stream, as kafka-python writes it, split into two chunks.
    half = len(payload) // 2
    chunks = [bytes(cramjam.snappy.compress_raw(p)) for p in (payload[:half], payload[half:])]
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"".join(
        struct.pack(">i", len(c)) + c for c in chunks)
    assert decompress(2, xerial) == payload


def test_lz4_frames_use_independent_blocks() -> None:
    framed = compress(3, b"a" * 200_000)
    flg = framed[4]
    assert flg & 0x20, "Kafka's Java client rejects linked lz4 blocks"
    assert decompress(3, framed) == b"a" * 200_000


def test_unknown_codec_and_garbage_are_corrupt() -> None:
    with pytest.raises(LogError) as exc:
        decompress(6, b"abc")
    assert exc.value.code == E.corrupt_message
    with pytest.raises(LogError) as exc:
        decompress(1, b"not gzip at all")
    assert exc.value.code == E.corrupt_message


def test_crc_tamper_is_corrupt_message() -> None:
    data = bytearray(build_batch(RECORDS))
    data[-1] ^= 0xFF
    with pytest.raises(LogError) as exc:
        validate_produce_records(data, 1 << 20)
    assert exc.value.code == E.corrupt_message


def test_magic_1_is_unsupported_for_message_format() -> None:
    data = bytearray(build_batch(RECORDS))
    data[16] = 1
    with pytest.raises(LogError) as exc:
        validate_produce_records(data, 1 << 20)
    assert exc.value.code == E.unsupported_for_message_format
    # A legacy v1 message set shorter than a v2 header is still recognised by its magic.
    legacy = struct.pack(">qiIbbq", 0, 22, 0, 1, 0, 0) + b"\xff\xff\xff\xff" * 2
    with pytest.raises(LogError) as exc:
        validate_produce_records(legacy, 1 << 20)
    assert exc.value.code == E.unsupported_for_message_format


def test_oversize_batch_is_message_too_large() -> None:
    data = build_batch([(None, b"v" * 2000, [], 0)])
    assert validate_produce_records(data, len(data))  # exactly at the limit: fine
    with pytest.raises(LogError) as exc:
        validate_produce_records(data, len(data) - 1)
    assert exc.value.code == E.message_too_large


@pytest.mark.parametrize("cut", [0, 10, HEADER_SIZE - 1, HEADER_SIZE + 3])
def test_empty_or_truncated_is_corrupt(cut: int) -> None:
    data = build_batch(RECORDS)[:cut]
    with pytest.raises(LogError) as exc:
        validate_produce_records(data, 1 << 20)
    assert exc.value.code == E.corrupt_message


def test_header_sanity_checks() -> None:
    data = bytearray(build_batch(RECORDS))
    struct.pack_into(">i", data, 8, 40)  # batchLength below the 49-byte minimum
    with pytest.raises(LogError) as exc:
        validate_produce_records(data, 1 << 20)
    assert exc.value.code == E.corrupt_message

    data = bytearray(build_batch(RECORDS))
    struct.pack_into(">i", data, 23, -1)  # lastOffsetDelta < 0, CRC fixed up
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    with pytest.raises(LogError) as exc:
        validate_produce_records(data, 1 << 20)
    assert exc.value.code == E.corrupt_message

    data = bytearray(build_batch(RECORDS))
    struct.pack_into(">i", data, 57, 9)  # recordsCount disagrees with lastOffsetDelta
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    with pytest.raises(LogError) as exc:
        validate_produce_records(data, 1 << 20)
    assert exc.value.code == E.invalid_record


def test_control_batch_from_client_is_invalid_record() -> None:
    data = build_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [], 5)],
                       is_control=True, is_transactional=True, producer_id=1, producer_epoch=0)
    with pytest.raises(LogError) as exc:
        validate_produce_records(data, 1 << 20)
    assert exc.value.code == E.invalid_record
    [h] = validate_produce_records(data, 1 << 20, allow_control=True)
    assert h.is_control and h.is_transactional


def test_several_batches_validate_and_iterate() -> None:
    parts = [build_batch([(None, b"a", [], 1)], producer_id=4, producer_epoch=0,
                         base_sequence=0),
             build_batch([(None, b"b", [], 2), (None, b"c", [], 3)], producer_id=4,
                         producer_epoch=0, base_sequence=1)]
    data = b"".join(parts)
    headers = validate_produce_records(data, 1 << 20)
    assert [h.records_count for h in headers] == [1, 2]
    assert [pos for pos, _ in iter_batches(data)] == [0, len(parts[0])]
    assert list(iter_batches(data[:-1]))[-1][0] == 0  # the torn second batch is skipped


def test_log_append_time_sets_bit_and_keeps_crc_valid() -> None:
    data = bytearray(build_batch(RECORDS, compression=1))
    set_log_append_time(data, 0, 42_000)
    [h] = validate_produce_records(data, 1 << 20)
    assert h.timestamp_type == 1 and h.max_timestamp == 42_000
    assert {r.timestamp for r in decode_records(data)} == {42_000}


def test_sequence_wraps_at_int32_max() -> None:
    data = build_batch([(None, b"a", [], 1)] * 3, producer_id=1, producer_epoch=0,
                       base_sequence=2**31 - 2)
    assert parse_header(data).last_sequence == 0
