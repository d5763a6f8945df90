"""A partition's committed ranges whose batches sit in small pieces (the commit windows'
objects): what merging (`upkeep.py`) rewrites into objects of the partition's own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .objects import SEGMENT_PREFIX

SMALL_PIECE = 1 << 20  # a partition's bytes in one window below this are merged


class Unmerged:
    """A partition's committed ranges [start, end) whose batches sit in small pieces,
    in offset order, contiguous ones joined, with their bytes and the time the oldest
    has waited since."""

    def __init__(self, ranges: list[tuple[int, int, int]] | None = None,
                 now_ms: int = 0) -> None:
        self.ranges = ranges or []
        self.total = sum(size for _s, _e, size in self.ranges)
        self.since_ms = now_ms
        #: How many pieces (rows of windows) the ranges hold: what a takeover downloads
        #: one ranged read each, so merging is due once they are many.
        self.pieces = len(self.ranges)

    @classmethod
    def of_rows(cls, rows: Sequence[Any], now_ms: int) -> Unmerged:
        """From a partition's batch rows (offset order): each run of rows in one object
        (or inline) is a piece; the small ones are unmerged."""
        out = cls(now_ms=now_ms)
        i = 0
        while i < len(rows):
            key, j = rows[i]["object_key"], i
            while j + 1 < len(rows) and rows[j + 1]["object_key"] == key:
                j += 1
            size = sum(int(r["byte_length"]) for r in rows[i:j + 1])
            if key is None or (not key.startswith(SEGMENT_PREFIX) and size < SMALL_PIECE):
                out.add(int(rows[i]["base_offset"]), int(rows[j]["last_offset"]) + 1, size,
                        now_ms)
            i = j + 1
        return out

    def add(self, start: int, end: int, size: int, now_ms: int) -> None:
        if not self.ranges:
            self.since_ms = now_ms
        self.pieces += 1
        if self.ranges and self.ranges[-1][1] == start:
            first, _end, before = self.ranges[-1]
            self.ranges[-1] = (first, end, before + size)
        else:
            self.ranges.append((start, end, size))
        self.total += size

    def done(self, taken: Sequence[tuple[int, int, int]], now_ms: int, pieces: int) -> None:
        """`taken` (a copy of the first ranges, the last maybe grown since), which held
        `pieces` pieces, is merged."""
        for start, end, size in taken:
            first, last, now_size = self.ranges[0]
            assert first == start, (first, start)
            if last == end:
                self.ranges.pop(0)
            else:
                self.ranges[0] = (end, last, now_size - size)
            self.total -= size
        self.since_ms = now_ms
        self.pieces = max(self.pieces - pieces, len(self.ranges))

    def clip(self, end: int) -> None:
        """Everything before `end` was rewritten (compaction)."""
        kept = []
        for first, last, size in self.ranges:
            if last <= end:
                continue
            if first < end:
                size = size * (last - end) // (last - first)
                first = end
            kept.append((first, last, size))
        self.ranges = kept
        self.total = sum(size for _s, _e, size in kept)
        if not kept:
            self.pieces = 0
