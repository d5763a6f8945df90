"""Pure offset arithmetic of the source, mirroring Spark's Kafka connector so the same
options cut the same batches: the per-trigger row budget (``maxOffsetsPerTrigger``),
the minimum-size gate (``minOffsetsPerTrigger`` + ``maxTriggerDelay``) and the split of
offset ranges into Spark partitions (``minPartitions``, ``maxRecordsPerPartition``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from .options import TopicPartition


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def rate_limit(limit: int, start: Mapping[TopicPartition, int],
               latest: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Spread a budget of ``limit`` offsets over partitions in proportion to their lag
    (Spark's ``KafkaMicroBatchStream.rateLimit``); a partition with any lag gets at least
    one offset, so small partitions are not starved."""
    sizes = {tp: end - start[tp] for tp, end in latest.items()
             if tp in start and end - start[tp] > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        if tp not in sizes:
            out[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, start[tp] + step)
    return out


def pending(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> int:
    return sum(max(0, end - start.get(tp, 0)) for tp, end in latest.items())


def _part_count(size: int, total: int, min_parts: int) -> int:
    # Java's Math.round (half up), not Python's round (half to even)
    return max(math.floor(size / total * min_parts + 0.5), 1)


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None,
                 max_records: int | None) -> list[OffsetRange]:
    """Spark's ``KafkaOffsetRangeCalculator``: drop empty ranges, split large ones so there
    are at least ``min_partitions`` tasks (bigger ranges get more pieces), then cut any
    piece longer than ``max_records``."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is not None and len(ranges) < min_partitions:
        total = sum(r.size for r in ranges)
        unsplit = [r for r in ranges if _part_count(r.size, total, min_partitions) == 1]
        split_total = total - sum(r.size for r in unsplit)
        split_min = max(min_partitions - len(unsplit), 1)
        pieces = []
        for r in ranges:
            parts = 1 if r in unsplit else _part_count(r.size, split_total, split_min)
            pieces += _cut(r, parts)
        ranges = pieces
    if max_records is not None:
        ranges = [p for r in ranges for p in _cut(r, math.ceil(r.size / max_records))]
    return [r for r in ranges if r.size > 0]


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    out, remaining, start = [], r.size, r.from_offset
    for i in range(parts):
        this = remaining // (parts - i)  # the last piece takes the rounding remainder
        remaining -= this
        end = min(start + this, r.until_offset)
        out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out
