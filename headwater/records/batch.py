"""RecordBatch v2: header parsing, produce validation, offset patching, record codec.

The hot path touches only the fixed 61-byte header: one `struct.unpack_from` per batch,
one C CRC-32C over the batch body, and an 8-byte patch of the base offset (the CRC starts
at `attributes`, so the offset can change without recomputing it). Records are decoded
only on cold paths (timestamp search, internal logs, tests).

Layout (big-endian): baseOffset i64, batchLength i32, partitionLeaderEpoch i32, magic i8,
crc u32, attributes i16, lastOffsetDelta i32, baseTimestamp i64, maxTimestamp i64,
producerId i64, producerEpoch i16, baseSequence i32, recordsCount i32, records...
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from crc32c import crc32c
from kio.schema.errors import ErrorCode as E

from headwater.records.compression import compress, decompress
from headwater.storage.errors import LogError, RecordValidationError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part batchLength does not count
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers from here to the end of the batch
MAX_TIMESTAMP_OFFSET = 35

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")

Buffer = bytes | bytearray | memoryview


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of one RecordBatch v2."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies on disk and on the wire."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return (self.attributes & TIMESTAMP_TYPE_BIT) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap from INT32_MAX to 0."""
        return increment_sequence(self.base_sequence, self.last_offset_delta)


class Record(NamedTuple):
    """One decoded record; `timestamp` already honours LogAppendTime."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def increment_sequence(sequence: int, increment: int) -> int:
    if sequence < 0:
        return sequence
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the header at `pos`; the caller guarantees HEADER_SIZE bytes are there."""
    return BatchHeader._make(HEADER.unpack_from(buf, pos))


def check_header(h: BatchHeader) -> str | None:
    """Why this header cannot start a well-formed v2 batch, or None if it can."""
    if h.magic != 2:
        return f"unsupported magic {h.magic}"
    if h.batch_length < MIN_BATCH_LENGTH:
        return f"batch length {h.batch_length} below minimum {MIN_BATCH_LENGTH}"
    if h.records_count < 0 or h.last_offset_delta < 0:
        return "negative record count or last offset delta"
    return None


def batch_crc(buf: Buffer, pos: int, size: int) -> int:
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:pos + size])


def validate_produce_records(
    data: Buffer, max_message_bytes: int, *, allow_control: bool = False
) -> list[BatchHeader]:
    """Validate a client's record set batch by batch (headers + CRC, never records).

    `allow_control` is for the broker's own writers (transaction markers); clients may not
    write control batches.
    """
    end = len(data)
    if end == 0:
        raise LogError(E.corrupt_message, "empty record set")
    view = memoryview(data)
    headers: list[BatchHeader] = []
    pos = 0
    while pos < end:
        remaining = end - pos
        if remaining < HEADER_SIZE:
            if remaining > MAGIC_OFFSET and view[pos + MAGIC_OFFSET] != 2:
                raise LogError(E.unsupported_for_message_format,
                               f"magic {view[pos + MAGIC_OFFSET]} is not supported")
            raise LogError(E.corrupt_message, f"truncated batch header at byte {pos}")
        h = parse_header(view, pos)
        if h.magic != 2:
            raise LogError(E.unsupported_for_message_format, f"magic {h.magic} is not supported")
        problem = check_header(h)
        if problem:
            raise LogError(E.corrupt_message, problem)
        size = h.size
        if size > remaining:
            raise LogError(E.corrupt_message, f"truncated batch at byte {pos}")
        if size > max_message_bytes:
            raise LogError(E.message_too_large,
                           f"batch of {size} bytes exceeds max.message.bytes {max_message_bytes}")
        if batch_crc(view, pos, size) != h.crc:
            raise LogError(E.corrupt_message, f"CRC mismatch in batch at byte {pos}")
        if h.is_control and not allow_control:
            raise LogError(E.invalid_record, "clients may not write control batches")
        if h.records_count != h.last_offset_delta + 1:
            raise LogError(E.invalid_record,
                           f"record count {h.records_count} disagrees with last offset delta "
                           f"{h.last_offset_delta}")
        headers.append(h)
        pos += size
    return headers


NO_LIMIT = 9223372036854775807
# Kafka's Records.SOFT_MAX_ARRAY_LENGTH: max.decompressed.message.bytes' default, at which
# nothing is decompressed just to check it.
NO_DECOMPRESSED_LIMIT = 2147483639
_U64 = 1 << 64


def _java_long(value: int) -> int:
    """`value` wrapped to a signed 64-bit long, as Kafka's message arithmetic wraps."""
    value %= _U64
    return value - _U64 if value > NO_LIMIT else value


def check_records(data: Buffer, headers: list[BatchHeader], now_ms: int, *, compacted: bool,
                  log_append_time: bool, before_max_ms: int, after_max_ms: int,
                  topic_partition: str, target_codec: int | None = None,
                  max_decompressed: int = NO_DECOMPRESSED_LIMIT) -> None:
    """Kafka's per-record produce checks (LogValidator.validateRecord): a key on compacted
    topics; on CreateTime topics a timestamp within message.timestamp.before/after.max.ms
    of `now_ms`; no LogAppendTime batch from a client on LogAppendTime topics (nor one
    without a timestamp on CreateTime topics). The first batch with failing records
    raises RecordValidationError listing every one of them.

    Records are walked only when a check needs them: on compacted topics, when the
    before bound is set (the header has no minimum timestamp) or when the header
    already shows a failure. Otherwise this is a few comparisons per batch header.
    `target_codec` is the topic's compression (None: the producer's), which decides how
    Kafka prints a record in one of its messages. `max_decompressed` is Kafka 4.4's
    max.decompressed.message.bytes: a compressed batch holding a larger record body fails
    whole with INVALID_RECORD (no record errors), as Kafka's decompressing iterator
    throws InvalidRecordException."""
    pos = 0
    for h in headers:
        if h.compression and max_decompressed < NO_DECOMPRESSED_LIMIT:
            _check_decompressed(memoryview(data)[pos:pos + h.size], h, max_decompressed)
        stamped = h.attributes & TIMESTAMP_TYPE_BIT
        if log_append_time:
            check_time = bool(stamped)
        elif stamped:  # every record's timestamp is the max timestamp
            m = h.max_timestamp
            check_time = (m == NO_TIMESTAMP or now_ms - m > before_max_ms
                          or m - now_ms > after_max_ms)
        else:
            m = h.max_timestamp
            check_time = before_max_ms < NO_LIMIT or (
                m != NO_TIMESTAMP and m - now_ms > after_max_ms)
        if compacted or check_time:
            errors = _record_errors(
                memoryview(data)[pos:pos + h.size], h, now_ms, compacted, check_time,
                log_append_time, before_max_ms, after_max_ms, topic_partition,
                h.compression != 0 and target_codec in (None, h.compression))
            if errors:
                raise _validation_error(errors)
        pos += h.size


def _check_decompressed(batch: memoryview, h: BatchHeader, limit: int) -> None:
    body = decompress(h.compression, batch[HEADER_SIZE:])
    pos = 0
    try:
        for _ in range(h.records_count):
            length, pos = _read_varint(body, pos)
            if length > limit:
                raise LogError(E.invalid_record, f"Record body of {length} bytes exceeds "
                                                 f"max.decompressed.message.bytes {limit}")
            pos += length
    except IndexError:
        raise LogError(E.corrupt_message, "truncated record") from None


def _record_errors(batch: memoryview, h: BatchHeader, now_ms: int, compacted: bool,
                   check_time: bool, log_append_time: bool, before_max_ms: int,
                   after_max_ms: int, topic_partition: str, partial: bool
                   ) -> list[tuple[int, int, str]]:
    """(error code, batch index, Kafka's message) of each failing record of one batch.
    A null key is reported before a timestamp problem, as in Kafka. `partial`: Kafka
    reads this batch with its key/value-skipping iterator (compressed, kept in place),
    which prints records as PartialDefaultRecord."""
    body = decompress(h.compression, batch[HEADER_SIZE:])
    stamped = bool(h.attributes & TIMESTAMP_TYPE_BIT)
    no_key = f"Compacted topic cannot accept message without key in topic partition " \
             f"{topic_partition}"
    errors: list[tuple[int, int, str]] = []
    pos = 0
    try:
        for index in range(h.records_count):
            length, pos = _read_varint(body, pos)
            end = pos + length
            ts_delta, pos = _read_varint(body, pos + 1)  # skip record attributes
            offset_delta, pos = _read_varint(body, pos)
            key_length, pos = _read_varint(body, pos)
            if end > len(body):
                raise LogError(E.corrupt_message, "record overruns the batch")
            if compacted and key_length < 0:
                errors.append((E.invalid_record, index, no_key))
            elif check_time:
                ts = h.max_timestamp if stamped else h.base_timestamp + ts_delta
                offset = h.base_offset + offset_delta
                if not log_append_time and ts != NO_TIMESTAMP:
                    if now_ms - ts > before_max_ms or ts - now_ms > after_max_ms:
                        errors.append((E.invalid_timestamp, index,
                                       f"Timestamp {ts} of message with offset {offset} is "
                                       "out of range. The timestamp should be within "
                                       f"[{_java_long(now_ms - before_max_ms)}, "
                                       f"{_java_long(now_ms + after_max_ms)}]"))
                elif stamped:
                    value_length, _ = _read_varint(body, pos + max(key_length, 0))
                    if partial:
                        shown = (f"PartialDefaultRecord(offset={offset}, timestamp={ts}, "
                                 f"key={key_length} bytes, value={value_length} bytes)")
                    else:
                        shown = (f"DefaultRecord(offset={offset}, timestamp={ts}, "
                                 f"key={max(key_length, 0)} bytes, "
                                 f"value={max(value_length, 0)} bytes)")
                    errors.append((E.invalid_timestamp, index,
                                   f"Invalid timestamp type in message {shown}. Producer "
                                   "should not set timestamp type to LogAppendTime."))
            pos = end
    except IndexError:
        raise LogError(E.corrupt_message, "truncated record") from None
    return errors


def _validation_error(errors: list[tuple[int, int, str]]) -> RecordValidationError:
    """Kafka's processRecordErrors: INVALID_TIMESTAMP if any record has a timestamp error,
    else INVALID_RECORD summarising the first three; every record error is listed."""
    record_errors = [(index, message) for _, index, message in errors]
    if any(code == E.invalid_timestamp for code, _, _ in errors):
        return RecordValidationError(
            E.invalid_timestamp, "One or more records have been rejected due to invalid "
            "timestamp", record_errors)
    shown = ", ".join(f"RecordError(batchIndex={index}, message='{message}')"
                      for index, message in record_errors[:3])
    return RecordValidationError(
        E.invalid_record, f"One or more records have been rejected due to {len(errors)} "
        "record errors in total, and only showing the first three errors at most: "
        f"[{shown}]", record_errors)


def iter_batches(buf: Buffer) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each complete batch in `buf`; a torn tail is skipped."""
    end = len(buf)
    pos = 0
    while pos + HEADER_SIZE <= end:
        h = parse_header(buf, pos)
        if h.batch_length < MIN_BATCH_LENGTH or pos + h.size > end:
            return
        yield pos, h
        pos += h.size


def batches_end_offset(buf: Buffer) -> int:
    """Offset just past the last complete batch in `buf` (-1 if there is none): the
    exclusive upper bound of what a fetch returned. Hops over batch lengths and parses
    only the last header."""
    end = len(buf)
    pos = 0
    last = -1
    while pos + HEADER_SIZE <= end:
        (length,) = _I32.unpack_from(buf, pos + 8)
        if length < MIN_BATCH_LENGTH or pos + length + LOG_OVERHEAD > end:
            break
        last = pos
        pos += length + LOG_OVERHEAD
    return parse_header(buf, last).next_offset if last >= 0 else -1


def has_transactional_batch(buf: Buffer) -> bool:
    """Whether any batch of a produce record set carries the transactional bit (Produce
    needs a transactional id then). One attribute byte per batch, no CRC: malformed
    input just ends the walk, validation rejects it later."""
    end = len(buf)
    pos = 0
    while pos + HEADER_SIZE <= end:
        if buf[pos + ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_BIT:
            return True
        (length,) = _I32.unpack_from(buf, pos + 8)
        if length < MIN_BATCH_LENGTH:
            return False
        pos += length + LOG_OVERHEAD
    return False


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign the batch's offsets; not covered by the CRC, so nothing else changes."""
    _I64.pack_into(buf, pos, base_offset)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Stamp LogAppendTime: set the timestamp-type bit and maxTimestamp, then re-CRC.

    Consumers read every record's timestamp as maxTimestamp when the bit is set, so the
    records themselves stay untouched.
    """
    (attributes,) = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_BIT)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    (batch_length,) = _I32.unpack_from(buf, pos + 8)
    _U32.pack_into(buf, pos + CRC_OFFSET, batch_crc(buf, pos, batch_length + LOG_OVERHEAD))


# ---- record-level codec (cold paths only) -------------------------------------------


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Zigzag varint/varlong at `pos` -> (value, new position)."""
    raw = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise LogError(E.corrupt_message, "varint too long")


def _write_varint(out: bytearray, value: int) -> None:
    raw = (value << 1) ^ (value >> 63)
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(buf, pos)
    if length < 0:
        return None, pos
    end = pos + length
    if end > len(buf):
        raise LogError(E.corrupt_message, "record field overruns the batch")
    return buf[pos:end], end


def decode_records(batch: Buffer) -> list[Record]:
    """Decode every record of one batch (decompressing as needed)."""
    view = memoryview(batch)
    if len(view) < HEADER_SIZE:
        raise LogError(E.corrupt_message, "truncated batch header")
    h = parse_header(view)
    if h.magic != 2:
        raise LogError(E.unsupported_for_message_format, f"magic {h.magic} is not supported")
    if h.size > len(view):
        raise LogError(E.corrupt_message, "truncated batch")
    body = decompress(h.compression, view[HEADER_SIZE:h.size])
    log_append_time = h.timestamp_type == 1
    records: list[Record] = []
    pos = 0
    try:
        for _ in range(h.records_count):
            length, pos = _read_varint(body, pos)
            end = pos + length
            pos += 1  # record attributes: unused
            ts_delta, pos = _read_varint(body, pos)
            offset_delta, pos = _read_varint(body, pos)
            key, pos = _read_bytes(body, pos)
            value, pos = _read_bytes(body, pos)
            count, pos = _read_varint(body, pos)
            headers: list[tuple[str, bytes | None]] = []
            for _ in range(count):
                hkey, pos = _read_bytes(body, pos)
                hvalue, pos = _read_bytes(body, pos)
                headers.append(((hkey or b"").decode("utf-8"), hvalue))
            if pos != end:
                raise LogError(E.corrupt_message, "record length disagrees with its fields")
            timestamp = h.max_timestamp if log_append_time else h.base_timestamp + ts_delta
            records.append(Record(h.base_offset + offset_delta, timestamp, key, value, headers))
    except IndexError:
        raise LogError(E.corrupt_message, "truncated record") from None
    except UnicodeDecodeError:
        raise LogError(E.corrupt_message, "record header key is not UTF-8") from None
    return records


def _encode_field(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(data))
        out += data


# One record for build_batch: key, value, headers, timestamp.
BatchRecord = tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]], int]


def build_batch(
    records: Sequence[BatchRecord],
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = 0,
) -> bytes:
    """Encode (key, value, headers, timestamp_ms) tuples as one CRC'd v2 batch."""
    if not records:
        raise ValueError("a batch needs at least one record")
    base_ts = records[0][3]
    body = bytearray()
    record = bytearray()
    for delta, (key, value, headers, timestamp) in enumerate(records):
        record.clear()
        record.append(0)  # attributes
        _write_varint(record, timestamp - base_ts)
        _write_varint(record, delta)
        _encode_field(record, key)
        _encode_field(record, value)
        _write_varint(record, len(headers))
        for hkey, hvalue in headers:
            _encode_field(record, hkey.encode("utf-8"))
            _encode_field(record, hvalue)
        _write_varint(body, len(record))
        body += record
    payload = compress(compression, body) if compression else bytes(body)
    attributes = (compression & COMPRESSION_MASK) | (TRANSACTIONAL_BIT if is_transactional else 0)
    attributes |= CONTROL_BIT if is_control else 0
    count = len(records)
    buf = bytearray(HEADER_SIZE) + payload
    HEADER.pack_into(
        buf, 0, base_offset, len(buf) - LOG_OVERHEAD, partition_leader_epoch, 2, 0, attributes,
        count - 1, base_ts, max(r[3] for r in records), producer_id, producer_epoch,
        base_sequence, count,
    )
    _U32.pack_into(buf, CRC_OFFSET, batch_crc(buf, 0, len(buf)))
    return bytes(buf)


# ---- raw records: compaction rewrites batches without re-encoding records ----------


class RawRecord(NamedTuple):
    """One record as stored: what compaction decides on, plus its exact bytes."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    is_tombstone: bool  # null value
    data: bytes  # the record's length varint and body, byte for byte


def iter_raw_records(batch: Buffer) -> Iterator[RawRecord]:
    """The records of one batch (decompressed), without decoding values or headers."""
    view = memoryview(batch)
    h = parse_header(view)
    if h.size > len(view):
        raise LogError(E.corrupt_message, "truncated batch")
    body = decompress(h.compression, view[HEADER_SIZE:h.size])
    pos = 0
    try:
        for _ in range(h.records_count):
            start = pos
            length, pos = _read_varint(body, pos)
            end = pos + length
            ts_delta, pos = _read_varint(body, pos + 1)  # skip record attributes
            offset_delta, pos = _read_varint(body, pos)
            key, pos = _read_bytes(body, pos)
            value_length, _ = _read_varint(body, pos)
            if end > len(body):
                raise LogError(E.corrupt_message, "record overruns the batch")
            yield RawRecord(offset_delta, ts_delta, key, value_length < 0, body[start:end])
            pos = end
    except IndexError:
        raise LogError(E.corrupt_message, "truncated record") from None


# compression.type values (topic or broker) -> codec id; "producer" keeps the client's.
TOPIC_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def recompress(data: Buffer, headers: list[BatchHeader], codec: int, level: int | None = None
               ) -> tuple[bytes, list[BatchHeader]] | None:
    """The record set with every data batch in `codec` (Kafka's broker-side compression
    for a topic whose compression.type is not "producer"); None when nothing changes.
    Offsets, timestamps, producer fields and sequences stay as they are."""
    if all(h.compression == codec or h.is_control for h in headers):
        return None
    view = memoryview(data)
    parts: list[bytes] = []
    out_headers: list[BatchHeader] = []
    pos = 0
    for h in headers:
        batch = view[pos:pos + h.size]
        pos += h.size
        if h.compression == codec or h.is_control:
            parts.append(bytes(batch))
            out_headers.append(h)
            continue
        target = h._replace(attributes=(h.attributes & ~COMPRESSION_MASK) | codec)
        rebuilt = rebuild_batch(target, list(iter_raw_records(batch)), level)
        parts.append(rebuilt)
        out_headers.append(parse_header(rebuilt))
    return b"".join(parts), out_headers


def rebuild_batch(h: BatchHeader, records: Sequence[RawRecord],
                  level: int | None = None) -> bytes:
    """`h`'s batch holding only `records`, recompressed with the same codec.

    Base offset, lastOffsetDelta, base timestamp, producer fields and attributes are kept,
    so every record keeps its offset and timestamp and the batch keeps its offset range
    and sequence range (clients and producer state rely on lastOffsetDelta, not on the
    last record). No records gives Kafka's empty header-only batch: uncompressed, both
    timestamps set to the old max timestamp.
    """
    if records:
        body = b"".join(r.data for r in records)
        payload = compress(h.compression, body, level) if h.compression else body
        attributes, base_ts = h.attributes, h.base_timestamp
        if h.timestamp_type:  # LogAppendTime: the header's max timestamp is every record's
            max_ts = h.max_timestamp
        else:
            max_ts = base_ts + max(r.timestamp_delta for r in records)
    else:
        payload = b""
        attributes = h.attributes & ~COMPRESSION_MASK
        base_ts = max_ts = h.max_timestamp
    buf = bytearray(HEADER_SIZE) + payload
    HEADER.pack_into(
        buf, 0, h.base_offset, len(buf) - LOG_OVERHEAD, h.partition_leader_epoch, 2, 0,
        attributes, h.last_offset_delta, base_ts, max_ts, h.producer_id, h.producer_epoch,
        h.base_sequence, len(records),
    )
    _U32.pack_into(buf, CRC_OFFSET, batch_crc(buf, 0, len(buf)))
    return bytes(buf)
