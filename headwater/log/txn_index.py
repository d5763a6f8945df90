"""Per-segment aborted-transaction index: `<base:020d>.txnindex`, Kafka's format.

Each entry is 34 bytes, big-endian: version int16 (0), producer id int64, first offset
int64, last offset int64 (the ABORT marker's offset), last stable offset int64 (the LSO
right after the abort). An entry lives in the index of the segment holding its marker, so
entries are in ascending last-offset order and go away with their segment.

Why it exists: a read_committed Fetch must tell the consumer which producers' records in
the returned range were aborted (producer id + first offset), and only the index can say
so without decoding batches. The recorded LSO bounds the search: once an entry's LSO is
at or past the end of the fetched range, every transaction that began inside the range
had already ended, so later segments cannot contribute (Kafka's `collectAbortedTxns`).

Memory: entries are kept as one `array('q')` of four int64 per entry (32 bytes each);
aborts are rare next to data, and most segments have no file at all — it is created on
the first entry, as in Kafka. Writes are `os.write` on an O_APPEND fd (from the `fdcache` LRU), so an entry is in
the page cache (survives `kill -9`) once `append` returns; recovery rebuilds the entries
past the producer snapshot from the log anyway.
"""

from __future__ import annotations

import logging
import os
import struct
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from headwater.log.fdcache import FILES, Handle
from headwater.log.synced import write_synced

log = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
VERSION = 0
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
_FIELDS = 4  # producer id, first offset, last offset, last stable offset


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker
    last_stable_offset: int  # LSO once the abort was written


def encode_entry(txn: AbortedTxn) -> bytes:
    return ENTRY.pack(VERSION, *txn)


class TransactionIndex:
    """The aborted transactions whose markers lie in one segment."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._file: Handle | None = None
        self._values = array("q")
        self.dirty = False
        if path.exists():
            self._file = FILES.handle(path, os.O_RDWR | os.O_APPEND)
            self._load()

    def _load(self) -> None:
        """Read every entry; cut the file at a torn or unreadable entry (a crash while
        appending, or a newer version): recovery re-adds whatever lies past the
        producer snapshot, and nothing is read past a gap."""
        assert self._file is not None
        with self._file as fd:
            size = os.fstat(fd).st_size
            data = os.pread(fd, size, 0) if size else b""
        good = 0
        last = -1
        for pos in range(0, size - size % ENTRY_SIZE, ENTRY_SIZE):
            version, pid, first, last_offset, lso = ENTRY.unpack_from(data, pos)
            if version != VERSION or last_offset < self.base_offset or last_offset <= last:
                log.warning("%s: unreadable entry at byte %d, index cut there", self.path, pos)
                break
            self._values.extend((pid, first, last_offset, lso))
            last = last_offset
            good = pos + ENTRY_SIZE
        if good != size:
            with self._file as fd:
                os.ftruncate(fd, good)

    def __len__(self) -> int:
        return len(self._values) // _FIELDS

    def __iter__(self) -> Iterator[AbortedTxn]:
        v = self._values
        for i in range(0, len(v), _FIELDS):
            yield AbortedTxn(v[i], v[i + 1], v[i + 2], v[i + 3])

    @property
    def last_offset(self) -> int:
        """Last offset of the newest entry, -1 if none."""
        return self._values[-2] if self._values else -1

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; last offsets must grow (one marker per offset)."""
        if txn.last_offset <= self.last_offset:
            raise ValueError(f"aborted txn ending at {txn.last_offset} is not after "
                             f"{self.last_offset} in {self.path}")
        if self._file is None:
            self._file = FILES.handle(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        with self._file as fd:
            os.write(fd, encode_entry(txn))
        self._values.extend(txn)
        self.dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset` (recovery replays them)."""
        keep = 0
        while keep < len(self) and self._values[keep * _FIELDS + 2] < offset:
            keep += 1
        if keep == len(self):
            return
        del self._values[keep * _FIELDS:]
        if self._file is not None:
            with self._file as fd:
                os.ftruncate(fd, keep * ENTRY_SIZE)
            self.dirty = True

    def collect(self, start: int, upper: int, out: list[AbortedTxn]) -> bool:
        """Append to `out` the entries overlapping [start, upper); True when the search
        is complete (an entry's LSO reached `upper`), False to go on to the next segment."""
        v = self._values
        for i in range(0, len(v), _FIELDS):
            if v[i + 2] >= start and v[i + 1] < upper:
                out.append(AbortedTxn(v[i], v[i + 1], v[i + 2], v[i + 3]))
            if v[i + 3] >= upper:
                return True
        return False

    def flush(self) -> None:
        if self._file is not None and not self._file.closed and self.dirty:
            self.dirty = False
            with self._file as fd:
                os.fsync(fd)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
        self._values = array("q")


def write_index_file(path: Path, txns: list[AbortedTxn]) -> None:
    """Write (and fsync) a whole index file at once: the cleaner's merged segments."""

    write_synced(path, b"".join(encode_entry(t) for t in txns))
