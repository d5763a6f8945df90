"""Per-record produce errors (KIP-467): which records Kafka's LogValidator names, and how.

Clients act on `record_errors`: librdkafka fails exactly the listed records and the
rest of the batch with _INVALID_DIFFERENT_RECORD, so the indexes and Kafka's messages
must be exact, and nothing of a rejected record set may be written.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.config import LogConfig
from headwater.log.partition_log import PartitionLog
from headwater.records import compression
from headwater.records.batch import (
    CRC_OFFSET,
    HEADER_SIZE,
    batch_crc,
    build_batch,
    set_log_append_time,
)
from headwater.storage.errors import LogError, RecordValidationError

OpenLog = Callable[..., PartitionLog]
HOUR = 3_600_000
NOW = 100 * HOUR
NO_KEY = "Compacted topic cannot accept message without key in topic partition topic-0"


def keyed(n: int, keyless: set[int] = frozenset(), ts: int = NOW,
          stamps: dict[int, int] | None = None) -> list:
    """n records, those in `keyless` without a key, timestamps `ts` unless in `stamps`."""
    stamps = stamps or {}
    return [(None if i in keyless else f"k{i}".encode(), b"v", [], stamps.get(i, ts))
            for i in range(n)]


def rejected(plog: PartitionLog, data: bytes) -> RecordValidationError:
    with pytest.raises(RecordValidationError) as exc:
        plog.append(data, NOW)
    assert plog.log_end_offset == 0  # nothing of the record set was written
    return exc.value


@pytest.fixture
def compacted(open_log: OpenLog, config: LogConfig) -> PartitionLog:
    return open_log(dataclasses.replace(config, cleanup_policy="compact",
                                        segment_bytes=1 << 20))


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP, compression.ZSTD])
def test_keyless_records_of_a_compacted_topic_are_each_listed(compacted, codec) -> None:
    keyless = {3, 17, 20, 41, 55, 60, 71, 88, 90, 99}
    err = rejected(compacted, build_batch(keyed(100, keyless), compression=codec))
    assert err.code == E.invalid_record
    assert err.record_errors == [(i, NO_KEY) for i in sorted(keyless)]
    first_three = ", ".join(f"RecordError(batchIndex={i}, message='{NO_KEY}')"
                            for i in (3, 17, 20))
    assert err.message == ("One or more records have been rejected due to 10 record errors "
                           "in total, and only showing the first three errors at most: "
                           f"[{first_three}]")
    assert compacted.append(build_batch(keyed(100), compression=codec), NOW).last_offset == 99


def test_record_errors_index_within_the_failing_batch(compacted) -> None:
    """A record set of several batches: indexes count from the start of the failing one."""
    data = build_batch(keyed(4)) + build_batch(keyed(5, {1, 4}))
    err = rejected(compacted, data)
    assert [i for i, _ in err.record_errors] == [1, 4]


def test_future_timestamps_are_listed_with_kafkas_bounds(open_log: OpenLog) -> None:
    plog = open_log()
    late = {2: NOW + HOUR + 1, 5: NOW + 2 * HOUR}
    err = rejected(plog, build_batch(keyed(6, stamps=late)))
    assert err.code == E.invalid_timestamp
    assert err.message == "One or more records have been rejected due to invalid timestamp"
    low = NOW - (2**63 - 1)  # message.timestamp.before.max.ms unlimited: Long.MAX_VALUE
    assert err.record_errors == [
        (i, f"Timestamp {ts} of message with offset {i} is out of range. The timestamp "
            f"should be within [{low}, {NOW + HOUR}]") for i, ts in sorted(late.items())]


def test_past_bound_names_only_the_old_records(open_log: OpenLog, config: LogConfig) -> None:
    plog = open_log(dataclasses.replace(config, timestamp_before_max_ms=60_000))
    err = rejected(plog, build_batch(keyed(4, stamps={1: NOW - 60_001, 3: NOW - HOUR})))
    assert err.code == E.invalid_timestamp
    assert [i for i, _ in err.record_errors] == [1, 3]
    assert f"within [{NOW - 60_000}, {NOW + HOUR}]" in err.record_errors[0][1]


def test_a_keyless_record_reports_its_key_and_timestamp_errors_win(compacted) -> None:
    """Kafka checks the key first per record; any timestamp error makes the batch's
    error INVALID_TIMESTAMP, with the key errors still listed."""
    data = build_batch(keyed(3, {0, 1}, stamps={1: NOW + 2 * HOUR, 2: NOW + 2 * HOUR}))
    err = rejected(compacted, data)
    assert err.code == E.invalid_timestamp
    assert [(i, m.split()[0]) for i, m in err.record_errors] == \
        [(0, "Compacted"), (1, "Compacted"), (2, "Timestamp")]


def _log_append_time_batch(codec: int) -> bytes:
    buf = bytearray(build_batch([(b"key", b"value", [], NOW)], compression=codec))
    set_log_append_time(buf, 0, NOW)
    return bytes(buf)


@pytest.mark.parametrize(("codec", "shown"), [
    (compression.NONE, f"DefaultRecord(offset=0, timestamp={NOW}, key=3 bytes, value=5 bytes)"),
    (compression.LZ4,
     f"PartialDefaultRecord(offset=0, timestamp={NOW}, key=3 bytes, value=5 bytes)"),
])
def test_log_append_time_batches_from_clients_are_refused(open_log: OpenLog, config: LogConfig,
                                                          codec: int, shown: str) -> None:
    """On a LogAppendTime topic Kafka refuses a client batch that claims LogAppendTime;
    it prints the record as its iterator decoded it (key/value-skipping when compressed)."""
    plog = open_log(dataclasses.replace(config, message_timestamp_type="LogAppendTime"))
    err = rejected(plog, _log_append_time_batch(codec))
    assert err.code == E.invalid_timestamp
    assert err.record_errors == [(0, f"Invalid timestamp type in message {shown}. Producer "
                                     "should not set timestamp type to LogAppendTime.")]


def test_plain_topics_never_decode_records(open_log: OpenLog, compacted) -> None:
    """The hot path reads headers only: a batch whose records are garbage (CRC intact)
    is written to a plain topic, while a compacted topic, which must read keys, refuses it."""
    buf = bytearray(build_batch(keyed(3)))
    buf[HEADER_SIZE:] = b"\xff" * (len(buf) - HEADER_SIZE)
    struct.pack_into(">I", buf, CRC_OFFSET, batch_crc(buf, 0, len(buf)))
    assert open_log().append(bytes(buf), NOW).last_offset == 2
    with pytest.raises(LogError) as exc:
        compacted.append(bytes(buf), NOW)
    assert not isinstance(exc.value, RecordValidationError)
    assert compacted.log_end_offset == 0
