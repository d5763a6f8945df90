"""One log segment: `<base:020d>.log` plus its sparse offset and time indexes, and the
aborted-transaction index of the markers it holds (`txn_index`, see `txn_index`).

The log file is written with `os.write` on an unbuffered O_APPEND fd (opened on demand,
kept in the `fdcache` LRU: an idle segment holds no descriptor), so once `append`
returns the bytes are in the page cache and survive a `kill -9`; reads are `os.pread`
byte ranges. Only batch headers are ever parsed here, and only near index entries: a
lookup bisects the sparse index, then walks at most ~`index.interval.bytes` of headers.
"""

from __future__ import annotations

import os
import threading
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path

from kio.schema.errors import ErrorCode as E

from headwater.log.fdcache import FILES
from headwater.log.index import OffsetIndex, TimeIndex
from headwater.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from headwater.records.batch import (
    HEADER_SIZE,
    INT32_MAX,
    MIN_BATCH_LENGTH,
    BatchHeader,
    batch_crc,
    check_header,
    parse_header,
)
from headwater.storage.errors import LogError

_SCAN_CHUNK = 32 * 1024  # header walks: covers a few index intervals per pread
_RECOVER_CHUNK = 1024 * 1024  # recovery reads whole batches to check CRCs

Buffer = bytes | bytearray | memoryview


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / f"{base_offset:020d}{suffix}"


class IndexBuilder:
    """Sparse index entries for batches laid out from position 0, as `append` would have
    written them; recovery and the log cleaner build whole indexes with it."""

    def __init__(self, base_offset: int, index_interval_bytes: int) -> None:
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.offsets, self.positions = array("i"), array("i")
        self.times, self.time_offsets = array("q"), array("q")
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.bytes_since_index = 0

    def add(self, h: BatchHeader, pos: int) -> None:
        if self.bytes_since_index > self.index_interval_bytes:
            self.offsets.append(h.base_offset - self.base_offset)
            self.positions.append(pos)
            self._time_entry()
            self.bytes_since_index = 0
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp
            self.offset_of_max_timestamp = h.base_offset
        self.bytes_since_index += h.size

    def seal(self) -> None:
        """The final max-timestamp entry a rolled segment gets (`LogSegment.seal`)."""
        if self.max_timestamp >= 0:
            self._time_entry()

    def _time_entry(self) -> None:
        if not self.times or self.max_timestamp > self.times[-1]:
            self.times.append(self.max_timestamp)
            self.time_offsets.append(self.offset_of_max_timestamp - self.base_offset)


class LogSegment:
    """Append-only batch storage for offsets [base_offset, next_offset)."""

    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int,
                 *, truncate: bool = False) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = segment_path(directory, base_offset, ".log")
        index_path = segment_path(directory, base_offset, ".index")
        time_path = segment_path(directory, base_offset, ".timeindex")
        txn_path = segment_path(directory, base_offset, TXN_INDEX_SUFFIX)
        if truncate:
            for path in (self.log_path, index_path, time_path, txn_path):
                path.unlink(missing_ok=True)
        #: True when an index file was absent and had to be created: run `recover()`.
        self.indexes_missing = not (index_path.exists() and time_path.exists())
        self._file = FILES.handle(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        self.offset_index = OffsetIndex(index_path)
        self.time_index = TimeIndex(time_path)
        #: Aborted transactions whose ABORT marker is in this segment. Unlike the sparse
        #: indexes it cannot be rebuilt from this segment alone (a transaction may start
        #: in an earlier one), so recovery and the cleaner carry it over explicitly.
        self.txn_index = TransactionIndex(txn_path, base_offset)
        self._lock = threading.Lock()  # flush() may run in a worker thread
        with self._file as fd:
            self.size = os.fstat(fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        #: Time of the first append (or the first batch's timestamp after a reopen),
        #: what `segment.ms` rolling counts from. None while the segment is empty.
        self.created_ms: int | None = None
        self.dirty = False
        self._bytes_since_index = 0

    @classmethod
    def create(cls, directory: Path, base_offset: int, index_interval_bytes: int) -> LogSegment:
        return cls(directory, base_offset, index_interval_bytes, truncate=True)

    @classmethod
    def open(cls, directory: Path, base_offset: int, index_interval_bytes: int) -> LogSegment:
        """Open an existing segment; the caller then runs `load_tail()` or `recover()`."""
        return cls(directory, base_offset, index_interval_bytes)

    # ---- writing --------------------------------------------------------------------

    def append(self, data: Buffer, batches: Sequence[BatchHeader], now_ms: int) -> None:
        """Write whole batches (offsets already assigned) and index them."""
        start = self.size
        view = memoryview(data)
        written = 0
        try:
            with self._file as fd:
                try:
                    while written < len(view):
                        written += os.write(fd, view[written:])
                except OSError:
                    try:  # keep the file batch-aligned so the next append is still valid
                        os.ftruncate(fd, start)
                    except OSError:
                        pass
                    raise
        except OSError as exc:
            raise LogError(E.kafka_storage_error,
                           f"write to {self.log_path} failed: {exc}") from exc
        self.dirty = True
        pos = start
        for h in batches:
            self._track(h, pos)
            pos += h.size
        self.size = pos
        self.next_offset = batches[-1].next_offset
        if self.created_ms is None:
            self.created_ms = now_ms

    def _track(self, h: BatchHeader, pos: int) -> None:
        """Index bookkeeping for a batch written at `pos` (append and recovery share it)."""
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_index.append(h.base_offset - self.base_offset, pos)
            self.time_index.maybe_append(self.max_timestamp,
                                         self.offset_of_max_timestamp - self.base_offset)
            self._bytes_since_index = 0
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp
            self.offset_of_max_timestamp = h.base_offset
        self._bytes_since_index += h.size

    def seal(self) -> None:
        """Record the final max timestamp in the time index (on roll and close), so a
        reopen knows the segment's max timestamp without scanning it."""
        if self.size and not self._file.closed and self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp - self.base_offset):
            self.dirty = True

    # ---- reading --------------------------------------------------------------------

    def _pread(self, length: int, pos: int) -> bytes:
        with self._file as fd:
            return os.pread(fd, length, pos)

    def read(self, start_pos: int, max_bytes: int) -> bytes:
        """Raw bytes [start_pos, start_pos + max_bytes) clipped to the segment."""
        length = min(max_bytes, self.size - start_pos)
        return self._pread(length, start_pos) if length > 0 else b""

    def iter_headers(self, start_pos: int = 0,
                     end_pos: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from a batch boundary, reading only headers'
        neighbourhoods in `_SCAN_CHUNK` preads."""
        end = self.size if end_pos is None else end_pos
        pos = start_pos
        buf = b""
        buf_pos = pos
        while pos + HEADER_SIZE <= end:
            off = pos - buf_pos
            if off + HEADER_SIZE > len(buf):
                buf = self._pread(min(_SCAN_CHUNK, end - pos), pos)
                buf_pos, off = pos, 0
                if len(buf) < HEADER_SIZE:
                    return
            h = parse_header(buf, off)
            if h.batch_length < MIN_BATCH_LENGTH:
                return
            yield pos, h
            pos += h.size

    def find_position(self, offset: int) -> tuple[int, int]:
        """(position, base offset) of the batch containing `offset`, or of the first batch
        after it; (size, next_offset) when the segment has nothing at or after it."""
        entry = self.offset_index.lookup(offset - self.base_offset)
        for pos, h in self.iter_headers(entry[1] if entry else 0):
            if h.base_offset + h.last_offset_delta >= offset:
                return pos, h.base_offset
        return self.size, self.next_offset

    def position_of_first_batch_from(self, offset: int) -> int:
        """Position of the first batch whose base offset is >= `offset` (or the size)."""
        pos, base = self.find_position(offset)
        if base < offset and pos < self.size:
            pos += parse_header(self._pread(HEADER_SIZE, pos)).size
        return pos

    def read_batches(self, start_pos: int, max_bytes: int, end_pos: int, min_one: bool) -> bytes:
        """Whole batches from `start_pos` (a boundary) up to the boundary `end_pos`, at
        most `max_bytes` of them, or the first batch alone if `min_one` (KIP-74)."""
        available = end_pos - start_pos
        if available <= 0:
            return b""
        if available <= max_bytes:
            return self._pread(available, start_pos)
        boundary = self._boundary_at_or_before(start_pos + max(max_bytes, 0), start_pos)
        if boundary == start_pos:
            if not min_one:
                return b""
            first = parse_header(self._pread(HEADER_SIZE, start_pos))
            boundary = start_pos + first.size
        return self._pread(boundary - start_pos, start_pos)

    def _boundary_at_or_before(self, limit: int, start_pos: int) -> int:
        entry = self.offset_index.floor_position(limit)
        boundary = max(start_pos, entry[1] if entry else 0)
        for pos, h in self.iter_headers(boundary, limit):
            if pos + h.size > limit:
                break
            boundary = pos + h.size
        return boundary

    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's mtime when records carry none (retention)."""
        if self.max_timestamp > 0:
            return self.max_timestamp
        return int(os.stat(self.log_path).st_mtime * 1000)

    # ---- loading and recovery -------------------------------------------------------

    def load_tail(self) -> bool:
        """Cheap check for a segment we believe intact: walk headers from the last index
        entry to the end of file. False means the indexes or the tail disagree with the
        file and the caller must `recover()`."""
        last_time = self.time_index.last()
        if last_time is not None:
            self.max_timestamp, rel = last_time
            self.offset_of_max_timestamp = self.base_offset + rel
        entry = self.offset_index.last()
        start = entry[1] if entry else 0
        if start > self.size or (entry is not None and start + HEADER_SIZE > self.size):
            return False
        expected = self.base_offset + entry[0] if entry else self.base_offset
        pos = start
        last: tuple[int, BatchHeader] | None = None
        for pos, h in self.iter_headers(start):
            if check_header(h) or h.base_offset < expected or pos + h.size > self.size:
                return False
            if entry is not None and pos == start and h.base_offset != expected:
                return False
            expected = h.next_offset
            self._bytes_since_index += h.size
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                self.offset_of_max_timestamp = h.base_offset
            last = (pos, h)
        if last is None:
            return self.size == 0 and entry is None
        pos, h = last
        if pos + h.size != self.size:
            return False
        if batch_crc(self._pread(h.size, pos), 0, h.size) != h.crc:
            return False
        self.next_offset = h.next_offset
        self._load_created_ms()
        return True

    def recover(self) -> int:
        """Verify every batch (header sanity, offsets ascending, CRC), truncate the file at
        the first bad one, and rebuild both indexes. Returns the bytes truncated."""
        with self._file as fd:
            file_size = os.fstat(fd).st_size
        self.size = 0
        self.next_offset = self.base_offset
        builder = IndexBuilder(self.base_offset, self.index_interval_bytes)
        buf, buf_pos = b"", 0
        pos = 0
        while file_size - pos >= HEADER_SIZE:
            if pos + HEADER_SIZE > buf_pos + len(buf):
                buf, buf_pos = self._pread(_RECOVER_CHUNK, pos), pos
            h = parse_header(buf, pos - buf_pos)
            if (check_header(h) or pos + h.size > file_size or h.base_offset < self.next_offset
                    or h.last_offset - self.base_offset > INT32_MAX):
                break
            if pos + h.size > buf_pos + len(buf):
                buf, buf_pos = self._pread(max(_RECOVER_CHUNK, h.size), pos), pos
            if batch_crc(buf, pos - buf_pos, h.size) != h.crc:
                break
            builder.add(h, pos)
            self.next_offset = h.next_offset
            pos += h.size
        if pos < file_size:
            with self._file as fd:
                os.ftruncate(fd, pos)
        self.size = pos
        self.max_timestamp = builder.max_timestamp
        self.offset_of_max_timestamp = builder.offset_of_max_timestamp
        self._bytes_since_index = builder.bytes_since_index
        self.offset_index.replace(builder.offsets, builder.positions)
        self.time_index.replace(builder.times, builder.time_offsets)
        self.indexes_missing = False
        self._load_created_ms()
        return file_size - pos

    def _load_created_ms(self) -> None:
        """After a reopen, roll timing counts from the first batch's timestamp (Kafka)."""
        if self.size >= HEADER_SIZE:
            first = parse_header(self._pread(HEADER_SIZE, 0))
            self.created_ms = first.max_timestamp if first.max_timestamp >= 0 else None

    # ---- lifecycle ------------------------------------------------------------------

    def flush(self) -> None:
        """fsync log and indexes if written since the last flush; safe to call from a
        worker thread. Returns only once any fsync already under way has finished."""
        with self._lock:
            self.txn_index.flush()
            if self._file.closed or not self.dirty:
                return
            self.dirty = False
            with self._file as fd:
                os.fsync(fd)
            self.offset_index.flush()
            self.time_index.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()
            self.offset_index.close()
            self.time_index.close()
            self.txn_index.close()

    def delete(self) -> None:
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()

    def __repr__(self) -> str:
        return (f"LogSegment(base={self.base_offset}, next={self.next_offset}, "
                f"size={self.size})")
