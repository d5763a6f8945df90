"""Sparse per-segment indexes: offset -> file position, and timestamp -> offset.

Each index is an append-only file of fixed-size (key, value) pairs written with `os.write`
(descriptors from the `fdcache` LRU) and mirrored in two `array`s, so a lookup is a C-level bisect and memory stays at
4-8 bytes per key with no mmap. One entry is added per `index.interval.bytes` of log, so
a lookup lands at most that many bytes before the batch sought; the segment scans
headers forward from there. The files are cheap to lose: recovery rebuilds them.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from headwater.log.fdcache import FILES


class _PairIndex:
    """An append-only file of (key, value) pairs with keys (and values) ascending."""

    TYPECODE = "q"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = FILES.handle(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        self.keys = array(self.TYPECODE)
        self.values = array(self.TYPECODE)
        self._entry_size = 2 * self.keys.itemsize
        self._load()

    def _load(self) -> None:
        with self._file as fd:
            size = os.fstat(fd).st_size
            whole = size - size % self._entry_size
            if whole != size:  # a torn trailing entry from a crash mid-write
                os.ftruncate(fd, whole)
            pairs = array(self.TYPECODE)
            pairs.frombytes(os.pread(fd, whole, 0) if whole else b"")
        self.keys = pairs[0::2]
        self.values = pairs[1::2]

    def __len__(self) -> int:
        return len(self.keys)

    def _append(self, key: int, value: int) -> None:
        with self._file as fd:
            os.write(fd, array(self.TYPECODE, (key, value)).tobytes())
        self.keys.append(key)
        self.values.append(value)

    def replace(self, keys: array[int], values: array[int]) -> None:
        """Rewrite the whole index (recovery) with one write."""
        pairs = array(self.TYPECODE, bytes(self._entry_size * len(keys)))
        pairs[0::2] = keys
        pairs[1::2] = values
        with self._file as fd:
            os.ftruncate(fd, 0)
            os.write(fd, pairs.tobytes())
        self.keys = array(self.TYPECODE, keys)
        self.values = array(self.TYPECODE, values)

    def truncate(self, entries: int) -> None:
        """Keep only the first `entries` entries."""
        if entries < len(self.keys):
            with self._file as fd:
                os.ftruncate(fd, entries * self._entry_size)
            del self.keys[entries:]
            del self.values[entries:]

    def flush(self) -> None:
        with self._file as fd:
            os.fsync(fd)

    def close(self) -> None:
        self._file.close()

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_PairIndex):
    """Relative offset (i32) -> byte position (i32) of the batch starting there."""

    TYPECODE = "i"

    def append(self, relative_offset: int, position: int) -> None:
        self._append(relative_offset, position)

    def lookup(self, relative_offset: int) -> tuple[int, int] | None:
        """Largest entry whose offset is <= the target, or None (start of segment)."""
        i = bisect_right(self.keys, relative_offset) - 1
        return (self.keys[i], self.values[i]) if i >= 0 else None

    def floor_position(self, position: int) -> tuple[int, int] | None:
        """Largest entry whose position is <= `position`, or None (start of segment)."""
        i = bisect_right(self.values, position) - 1
        return (self.keys[i], self.values[i]) if i >= 0 else None

    def last(self) -> tuple[int, int] | None:
        return (self.keys[-1], self.values[-1]) if self.keys else None


class TimeIndex(_PairIndex):
    """Max timestamp so far (i64) -> relative offset (i64) of the batch that reached it.

    Timestamps only grow: an entry is added only when the segment's max timestamp has
    risen since the last one, as in Kafka.
    """

    TYPECODE = "q"

    def maybe_append(self, timestamp: int, relative_offset: int) -> bool:
        """Add an entry if the timestamp rose since the last one; True if it did."""
        if not self.keys or timestamp > self.keys[-1]:
            self._append(timestamp, relative_offset)
            return True
        return False

    def lookup_time(self, timestamp: int) -> int:
        """Relative offset to start scanning from for the first batch with max ts >= target.

        Every batch up to an entry with timestamp < target is older than the target, so
        the scan starts at the last such entry (or at the segment start).
        """
        i = bisect_left(self.keys, timestamp) - 1
        return self.values[i] if i >= 0 else 0

    def last(self) -> tuple[int, int] | None:
        return (self.keys[-1], self.values[-1]) if self.keys else None
