"""Timestamp lookups, retention by time and size, DeleteRecords."""

from __future__ import annotations

import dataclasses

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.records.batch import build_batch, iter_batches
from headwater.storage.errors import LogError


def append_at(plog, timestamps: list[int]) -> int:
    records = [(b"k%d" % i, b"v" * 20, [], ts) for i, ts in enumerate(timestamps)]
    return plog.append(build_batch(records), 0).base_offset


def test_offset_for_timestamp_finds_exact_record(open_log) -> None:
    plog = open_log()
    for i in range(30):  # batch i holds offsets 3i..3i+2 with timestamps 100i, +10, +20
        append_at(plog, [100 * i, 100 * i + 10, 100 * i + 20])
    assert len(plog.segments) > 3
    assert plog.offset_for_timestamp(0) == (0, 0)
    assert plog.offset_for_timestamp(1_205) == (37, 1_210)  # inside a batch, later segment
    assert plog.offset_for_timestamp(1_210) == (37, 1_210)
    assert plog.offset_for_timestamp(1_221) == (39, 1_300)  # between batches
    assert plog.offset_for_timestamp(2_920) == (89, 2_920)
    assert plog.offset_for_timestamp(2_921) is None
    for ts in range(0, 2_921, 7):  # agrees with a brute-force scan everywhere
        expected = min((3 * (t // 100) + (t % 100) // 10, t)
                       for t in (100 * i + d for i in range(30) for d in (0, 10, 20)) if t >= ts)
        assert plog.offset_for_timestamp(ts) == expected


def test_offset_for_timestamp_with_out_of_order_timestamps(open_log) -> None:
    plog = open_log()
    append_at(plog, [500, 100, 900])
    append_at(plog, [200, 300])
    assert plog.offset_for_timestamp(150) == (0, 500)  # first record (by offset) >= 150
    assert plog.offset_for_timestamp(600) == (2, 900)
    assert plog.offset_for_timestamp(901) is None


def test_max_timestamp_entry(open_log) -> None:
    plog = open_log()
    assert plog.max_timestamp_entry() is None
    for i in range(20):
        append_at(plog, [i, i + 1, i + 2])
    append_at(plog, [5, 9_999, 7])  # offsets 60, 61, 62
    for i in range(20):
        append_at(plog, [100 + i])
    assert plog.max_timestamp_entry() == (61, 9_999)
    plog.close()
    assert open_log(clean_shutdown=True).max_timestamp_entry() == (61, 9_999)


def test_retention_ms_deletes_expired_segments(open_log, config) -> None:
    plog = open_log(dataclasses.replace(config, retention_ms=1_000))
    for i in range(30):
        append_at(plog, [10_000 + 100 * i] * 3)
    segments = plog.segments
    assert plog.apply_retention(now_ms=10_000) == 0
    # Everything whose max timestamp is older than now - 1000 goes, oldest first.
    now = segments[2].max_timestamp + 1_001
    assert plog.apply_retention(now_ms=now) == 3
    assert plog.segments == segments[3:]
    assert plog.log_start_offset == segments[3].base_offset
    assert not segments[0].log_path.exists()
    with pytest.raises(LogError) as exc:
        plog.read(0, 100)
    assert exc.value.code == E.offset_out_of_range
    plog.close()
    assert open_log(clean_shutdown=True).log_start_offset == segments[3].base_offset


def test_retention_ms_empties_an_idle_expired_log(open_log, config) -> None:
    plog = open_log(dataclasses.replace(config, retention_ms=1_000))
    for _ in range(3):
        append_at(plog, [5_000])
    assert plog.apply_retention(now_ms=7_000) == 1  # the active segment is rolled first
    assert plog.log_start_offset == plog.log_end_offset == 3
    assert plog.read(3, 100) == b""
    assert append_at(plog, [7_000]) == 3


def test_retention_bytes_deletes_oldest_segments_beyond_limit(open_log, config) -> None:
    plog = open_log(dataclasses.replace(config, retention_bytes=2_500))
    for i in range(40):
        append_at(plog, [i] * 3)
    sizes = [s.size for s in plog.segments]
    deleted = plog.apply_retention(now_ms=0)
    # Kafka's rule: drop the oldest segment only while what is left stays >= the limit.
    assert deleted > 0 and plog.size_bytes == sum(sizes[deleted:])
    assert plog.size_bytes >= 2_500 > plog.size_bytes - plog.segments[0].size
    first = plog.segments[0].base_offset
    assert plog.log_start_offset == first
    assert [h.base_offset for _, h in iter_batches(plog.read(first, 1 << 20))][-1] == 117


def test_retention_only_for_delete_policy(open_log, config) -> None:
    plog = open_log(dataclasses.replace(config, retention_bytes=0, cleanup_policy="compact"))
    for i in range(20):
        append_at(plog, [i] * 3)
    assert plog.apply_retention(now_ms=10**12) == 0
    plog.update_config(dataclasses.replace(plog.config, cleanup_policy="compact,delete"))
    assert plog.apply_retention(now_ms=10**12) > 0


def test_unlimited_retention(open_log, config) -> None:
    plog = open_log(dataclasses.replace(config, retention_ms=-1, retention_bytes=-1))
    for i in range(20):
        append_at(plog, [i] * 3)
    assert plog.apply_retention(now_ms=10**12) == 0 and plog.log_start_offset == 0


def test_delete_records_before(open_log) -> None:
    plog = open_log()
    for i in range(30):
        append_at(plog, [i] * 3)
    second = plog.segments[1]
    target = second.next_offset + 1  # inside the third segment
    assert plog.delete_records_before(target) == target
    assert plog.log_start_offset == target
    assert plog.segments[0].base_offset <= target < plog.segments[0].next_offset
    assert not second.log_path.exists()
    with pytest.raises(LogError) as exc:
        plog.read(target - 1, 100)
    assert exc.value.code == E.offset_out_of_range
    assert plog.read(target, 1) != b""  # the containing batch, as Kafka returns it
    assert plog.delete_records_before(5) == target  # never moves backwards
    with pytest.raises(LogError) as exc:
        plog.delete_records_before(91)
    assert exc.value.code == E.offset_out_of_range
    assert plog.append(build_batch([(None, b"x", [], 1)]), 0).log_start_offset == target
    plog.close()
    again = open_log(clean_shutdown=True)
    assert again.log_start_offset == target


def test_delete_records_to_high_watermark_keeps_active_segment(open_log) -> None:
    plog = open_log()
    for i in range(10):
        append_at(plog, [i] * 3)
    assert plog.delete_records_before(30) == 30
    assert len(plog.segments) == 1
    assert plog.read(30, 100) == b""
    with pytest.raises(LogError):
        plog.read(29, 100)
