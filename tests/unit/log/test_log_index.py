"""Sparse offset and time indexes, and the segment lookups built on them."""

from __future__ import annotations

from pathlib import Path

from headwater.log.index import OffsetIndex, TimeIndex
from headwater.log.segment import LogSegment
from headwater.records.batch import build_batch, parse_header


def test_offset_index_lookup_and_persistence(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index")
    for rel, pos in [(5, 100), (9, 250), (20, 600)]:
        index.append(rel, pos)
    assert index.lookup(4) is None
    assert index.lookup(5) == (5, 100) and index.lookup(19) == (9, 250)
    assert index.lookup(10**6) == (20, 600)
    assert index.floor_position(599) == (9, 250) and index.floor_position(99) is None
    index.close()
    again = OffsetIndex(tmp_path / "0.index")
    assert list(again.keys) == [5, 9, 20] and list(again.values) == [100, 250, 600]
    again.truncate(1)
    again.close()
    assert list(OffsetIndex(tmp_path / "0.index").keys) == [5]


def test_time_index_only_grows_and_finds_scan_start(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "0.timeindex")
    for ts, rel in [(100, 0), (90, 3), (300, 7), (300, 9), (500, 12)]:
        index.maybe_append(ts, rel)
    assert list(index.keys) == [100, 300, 500]
    assert index.lookup_time(50) == 0
    assert index.lookup_time(100) == 0  # nothing strictly older: segment start
    assert index.lookup_time(301) == 7
    assert index.lookup_time(10**9) == 12


def test_segment_indexes_every_interval(tmp_path: Path) -> None:
    segment = LogSegment.create(tmp_path, 100, index_interval_bytes=200)
    offset = 100
    for i in range(40):
        data = bytearray(build_batch([(None, b"x" * 40, [], 1_000 + i)] * 2, base_offset=offset))
        segment.append(data, [parse_header(data)], now_ms=0)
        offset += 2
    entries = list(zip(segment.offset_index.keys, segment.offset_index.values, strict=True))
    assert entries and all(b[1] - a[1] >= 200 for a, b in zip(entries, entries[1:], strict=False))
    for target in range(100, 180):
        pos, base = segment.find_position(target)
        assert base == target - target % 2
    assert segment.find_position(180) == (segment.size, 180)
    assert segment.next_offset == 180 and segment.max_timestamp == 1_039
    segment.close()
