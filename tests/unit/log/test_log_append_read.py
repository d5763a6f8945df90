"""PartitionLog append/read: offsets, segment rolls, fetch windows and bounds."""

from __future__ import annotations

import dataclasses

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.records.batch import build_batch, decode_records, iter_batches
from headwater.storage.errors import LogError


def bases(data: bytes) -> list[int]:
    return [h.base_offset for _, h in iter_batches(data)]


def fill(plog, batch, count: int, records: int = 3, now_ms: int = 0) -> list[int]:
    return [plog.append(batch(records, ts=1000 + 10 * i), now_ms).base_offset
            for i in range(count)]


def test_offsets_contiguous_across_segment_rolls(open_log, batch) -> None:
    plog = open_log()
    assert fill(plog, batch, 30) == list(range(0, 90, 3))
    assert len(plog.segments) > 3, "1 KiB segments must have rolled"
    assert [s.base_offset for s in plog.segments] == sorted({s.base_offset for s in plog.segments})
    for older, newer in zip(plog.segments, plog.segments[1:], strict=False):
        assert older.next_offset == newer.base_offset
        assert older.size <= plog.config.segment_bytes
    data = plog.read(0, 1 << 20)
    assert bases(data) == list(range(0, 90, 3))
    offsets = [r.offset for pos, h in iter_batches(data) for r in decode_records(data[pos:pos + h.size])]
    assert offsets == list(range(90))
    assert plog.log_end_offset == plog.high_watermark == 90
    assert plog.size_bytes == len(data)


def test_append_result_fields(open_log, batch) -> None:
    plog = open_log()
    plog.append(batch(2), 0)
    result = plog.append(batch(4), 0)
    assert (result.base_offset, result.last_offset, result.log_append_time,
            result.log_start_offset, result.duplicate) == (2, 5, -1, 0, False)


def test_multi_batch_request_gets_contiguous_offsets(open_log, batch) -> None:
    plog = open_log()
    result = plog.append(batch(2) + batch(3) + batch(1), 0)
    assert (result.base_offset, result.last_offset) == (0, 5)
    assert bases(plog.read(0, 1 << 20)) == [0, 2, 5]


def test_invalid_batch_anywhere_in_request_writes_nothing(open_log, batch) -> None:
    plog = open_log()
    bad = bytearray(batch(2))
    bad[-1] ^= 1
    with pytest.raises(LogError) as exc:
        plog.append(batch(1) + bytes(bad), 0)
    assert exc.value.code == E.corrupt_message
    assert plog.log_end_offset == 0 and plog.size_bytes == 0


def test_read_from_middle_offset_returns_containing_batch(open_log, batch) -> None:
    plog = open_log()
    fill(plog, batch, 30)
    for offset in range(90):  # every offset, through the sparse index and header walk
        data = plog.read(offset, 1)
        assert bases(data) == [offset - offset % 3]


def test_max_bytes_smaller_than_one_batch_still_returns_it(open_log, batch) -> None:
    plog = open_log()
    plog.append(batch(5, size=150), 0)
    data = plog.read(0, 10)
    assert bases(data) == [0] and len(data) > 10


def test_max_bytes_cuts_at_whole_batches(open_log, batch) -> None:
    plog = open_log()
    fill(plog, batch, 30)
    one = len(plog.read(0, 1))
    for max_bytes in (one, one + 1, 2 * one - 1, 2 * one, 5 * one + 7):
        data = plog.read(0, max_bytes)
        assert len(data) <= max_bytes
        assert len(bases(data)) == max_bytes // one
        assert sum(h.size for _, h in iter_batches(data)) == len(data)


def test_read_spans_segments(open_log, batch) -> None:
    plog = open_log()
    fill(plog, batch, 30)
    first = plog.segments[0]
    data = plog.read(first.next_offset - 1, 1 << 20)
    assert bases(data)[0] < first.next_offset <= bases(data)[1]
    assert bases(data)[-1] == 87


def test_upper_bound_excludes_batches_at_or_after_it(open_log, batch) -> None:
    plog = open_log()
    fill(plog, batch, 30)
    assert bases(plog.read(0, 1 << 20, upper_bound=9)) == [0, 3, 6]
    assert bases(plog.read(0, 1 << 20, upper_bound=10)) == [0, 3, 6, 9]  # 9..11 starts < 10
    assert plog.read(30, 1 << 20, upper_bound=30) == b""
    assert bases(plog.read(40, 1 << 20, upper_bound=60))[-1] == 57


def test_out_of_range_and_log_end(open_log, batch) -> None:
    plog = open_log()
    fill(plog, batch, 2)
    assert plog.read(6, 100) == b""
    for offset in (-1, 7):
        with pytest.raises(LogError) as exc:
            plog.read(offset, 100)
        assert exc.value.code == E.offset_out_of_range


def test_reopen_after_close_reads_identically(open_log, batch) -> None:
    plog = open_log()
    fill(plog, batch, 30)
    before = [plog.read(o, 300) for o in range(90)]
    plog.close()
    again = open_log(clean_shutdown=True)
    assert [again.read(o, 300) for o in range(90)] == before
    assert again.append(batch(1), 0).base_offset == 90


def test_request_larger_than_segment_is_record_list_too_large(open_log, batch) -> None:
    plog = open_log()
    with pytest.raises(LogError) as exc:
        plog.append(batch(1, size=2000), 0)
    assert exc.value.code == E.record_list_too_large


def test_oversized_batch_uses_max_message_bytes(open_log, batch, config) -> None:
    plog = open_log(dataclasses.replace(config, max_message_bytes=100))
    with pytest.raises(LogError) as exc:
        plog.append(batch(3), 0)
    assert exc.value.code == E.message_too_large


def test_roll_by_segment_ms_counts_from_first_append(open_log, batch, config) -> None:
    plog = open_log(dataclasses.replace(config, segment_bytes=1 << 20, segment_ms=1000))
    plog.append(batch(1), now_ms=5_000)
    plog.append(batch(1), now_ms=6_000)  # exactly segment.ms later: not yet
    assert len(plog.segments) == 1
    plog.append(batch(1), now_ms=6_001)
    assert [s.base_offset for s in plog.segments] == [0, 2]
    assert plog.segments[-1].created_ms == 6_001


def test_log_append_time_rewrites_timestamp_with_valid_crc(open_log, batch, config) -> None:
    from headwater.records.batch import validate_produce_records

    plog = open_log(dataclasses.replace(config, message_timestamp_type="LogAppendTime"))
    result = plog.append(batch(3, ts=1000, compression=1), now_ms=77_000)
    assert result.log_append_time == 77_000
    data = plog.read(0, 1 << 20)
    [h] = validate_produce_records(data, 1 << 20)  # CRC recomputed
    assert h.timestamp_type == 1 and h.max_timestamp == 77_000
    assert [r.timestamp for r in decode_records(data)] == [77_000] * 3
    assert plog.offset_for_timestamp(76_999) == (0, 77_000)


def test_needs_flush_after_flush_messages(open_log, batch, config) -> None:
    plog = open_log(dataclasses.replace(config, flush_messages=5))
    plog.append(batch(3), 0)
    assert not plog.needs_flush
    plog.append(batch(3), 0)
    assert plog.needs_flush and plog.unflushed_messages == 6
    plog.flush()
    assert not plog.needs_flush and not any(s.dirty for s in plog.segments)


def test_fsync_always_needs_flush_after_every_append(open_log, batch, config) -> None:
    plog = open_log(dataclasses.replace(config, fsync_always=True))
    assert not plog.needs_flush
    plog.append(batch(1), 0)
    assert plog.needs_flush


def test_on_append_hooks_run_after_each_append(open_log, batch) -> None:
    plog = open_log()
    seen: list[int] = []
    unsubscribe = plog.subscribe_append(lambda: seen.append(plog.log_end_offset))
    plog.append(batch(2), 0)
    plog.append(batch(1), 0)
    unsubscribe()
    plog.append(batch(1), 0)
    assert seen == [2, 3]


def test_internal_writer_may_append_control_batches(open_log) -> None:
    plog = open_log()
    marker = build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [], 9)],
                         is_control=True, is_transactional=True, producer_id=3,
                         producer_epoch=0)
    with pytest.raises(LogError):
        plog.append(marker, 0)
    assert plog.append(marker, 0, origin_client=False).base_offset == 0


def test_reads_match_a_brute_force_model(open_log, batch) -> None:
    plog = open_log()
    for i in range(40):
        plog.append(batch(1 + i % 4, size=10 + 7 * (i % 5)), 0)
    everything = plog.read(0, 1 << 30)
    batches = [(h.base_offset, h.last_offset, everything[pos:pos + h.size])
               for pos, h in iter_batches(everything)]
    end = plog.log_end_offset
    for fetch in range(0, end, 3):
        for max_bytes in (1, 90, 250, 700, 2_000):
            for upper in (None, fetch + 5, end - 7, fetch):
                expected = b""
                for base, last, raw in batches if upper is None or fetch < upper else []:
                    if last < fetch or (upper is not None and base >= upper):
                        continue
                    if expected and len(expected) + len(raw) > max_bytes:
                        break
                    expected += raw
                assert plog.read(fetch, max_bytes, upper) == expected, (fetch, max_bytes, upper)


def test_flush_in_worker_thread_clears_needs_flush(open_log, batch, config) -> None:
    from concurrent.futures import ThreadPoolExecutor

    plog = open_log(dataclasses.replace(config, fsync_always=True))
    with ThreadPoolExecutor(1) as pool:
        for _ in range(20):  # rolls included
            plog.append(batch(3), 0)
            assert plog.needs_flush
            pool.submit(plog.flush).result()
            assert not plog.needs_flush and plog.unflushed_messages == 0
    assert not any(s.dirty for s in plog.segments)


def test_timestamps_too_far_in_the_future_are_rejected(open_log, batch, config) -> None:
    hour = 3_600_000
    plog = open_log()
    now = 10 * hour
    with pytest.raises(LogError) as exc:
        plog.append(batch(3, ts=now + hour - 1), now)  # the last record: now + hour + 1
    assert exc.value.code == E.invalid_timestamp
    assert exc.value.record_errors == [(2, f"Timestamp {now + hour + 1} of message with offset "
                                           "2 is out of range. The timestamp should be within "
                                           f"[{now - 2**63 + 1}, {now + hour}]")]
    assert plog.log_end_offset == 0
    assert plog.append(batch(3, ts=now + hour - 2), now).base_offset == 0  # exactly at the bound
    plog.close()  # the same partition, now with LogAppendTime: no bound applies
    append_time = open_log(dataclasses.replace(config, message_timestamp_type="LogAppendTime"))
    assert append_time.append(batch(1, ts=now + 5 * hour), now).base_offset == 3


def test_past_bound_checks_every_record(open_log, batch, config) -> None:
    plog = open_log(dataclasses.replace(config, timestamp_before_max_ms=60_000))
    now = 1_000_000
    records = [(b"k", b"v", [], now), (b"k", b"v", [], now - 60_001), (b"k", b"v", [], now)]
    with pytest.raises(LogError) as exc:  # the header's base and max timestamps look fine
        plog.append(build_batch(records), now)
    assert exc.value.code == E.invalid_timestamp
    assert [index for index, _ in exc.value.record_errors] == [1]
    assert plog.append(batch(2, ts=now - 60_000), now).base_offset == 0


def test_client_batches_must_carry_base_offset_zero(open_log, batch) -> None:
    from headwater.records.batch import set_base_offset

    plog = open_log()
    bad = bytearray(batch(2))
    set_base_offset(bad, 0, 42)  # outside the CRC: the batch is otherwise valid
    with pytest.raises(LogError) as exc:
        plog.append(bytes(bad), 0)
    assert exc.value.code == E.invalid_record and "should be 0" in exc.value.message
    assert plog.log_end_offset == 0


@pytest.mark.parametrize("target", ["zstd", "uncompressed", "gzip"])
def test_topic_compression_type_recompresses_client_batches(open_log, config, target) -> None:
    from headwater.records.batch import TOPIC_CODECS, validate_produce_records

    plog = open_log(dataclasses.replace(config, compression_type=target,
                                        segment_bytes=1 << 20))
    sent = build_batch([(b"k%d" % i, b"v" * (i * 13), [("h", b"x")], 1000 + i)
                        for i in range(20)], compression=1, producer_id=7,
                       producer_epoch=0, base_sequence=0)  # gzip, idempotent
    first = plog.append(sent, 0)
    assert plog.append(sent, 0).duplicate  # a retry is still recognised (same sequences)
    data = plog.read(0, 1 << 20)
    [h] = validate_produce_records(data, 1 << 20)  # a valid batch, CRC recomputed
    assert h.compression == TOPIC_CODECS[target]
    assert (h.producer_id, h.base_sequence, first.base_offset) == (7, 0, 0)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decode_records(data)] == \
        [(r.key, r.value, r.headers, r.timestamp) for r in decode_records(sent)]


def test_recompression_uses_the_topic_compression_level(open_log, config, tmp_path) -> None:
    from headwater.log.partition_log import PartitionLog

    text = [(None, b" ".join(b"word%d" % (i * j % 97) for j in range(200)), [], 1000 + i)
            for i in range(50)]
    sizes = {}
    for level in (1, 9):
        cfg = dataclasses.replace(config, compression_type="gzip", segment_bytes=1 << 20,
                                  compression_levels=((1, level),))
        plog = PartitionLog.open(tmp_path / f"level{level}", cfg, "t", 0, 0)
        plog.append(build_batch(text), 0)  # uncompressed from the client
        sizes[level] = len(plog.read(0, 1 << 20))
        assert [r.value for r in decode_records(plog.read(0, 1 << 20))] == [r[1] for r in text]
        plog.close()
    assert sizes[9] < sizes[1]
