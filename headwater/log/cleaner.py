"""Log compaction (Kafka's log cleaner): keep only the latest record of every key.

For a log whose cleanup.policy contains `compact`, `LogCleaner.clean` reads every segment
but the active one (which it never touches) twice: once to map key -> latest offset, once
to rewrite each run of adjacent segments (grouped up to segment.bytes, as Kafka does) into
one cleaned segment holding the records that are still the latest for their key.

What survives, and why:
- Offsets and timestamps never change: a batch is copied verbatim when nothing in it is
  removed, otherwise rebuilt around its surviving raw records with the same base offset,
  lastOffsetDelta, producer fields, attributes and codec (`batch.rebuild_batch`). Reads of
  a removed offset land on the next batch (`LogSegment.find_position`), and consumers
  advance by lastOffsetDelta, so gaps are invisible to them.
- Tombstones (null values) stay until their segment's file was last modified more than
  delete.retention.ms ago (the cleaned file keeps the newest mtime of its inputs).
- A batch that is its producer's last one keeps at least its header (Kafka's empty
  batch), so producer state rebuilt from headers after a restart still accepts the
  producer's next sequence.
- Keyless records are dropped (Kafka's cleaner does the same); produce rejects them on
  compacted topics.
- Transactions, as Kafka's cleaner treats them (`_Transactions`): records of committed
  transactions are compacted like any others; batches of aborted transactions are
  removed and never hide another record; a batch whose transaction has no marker in the
  cleaned range (still open, or ended in the active segment) is copied untouched and
  stays out of the key map. A marker goes once its segment is older than
  delete.retention.ms and nothing of its transaction is left before it, unless it is
  its producer's last batch (producer state rebuilt from the log needs it). Since
  offsets never change, the aborted-transaction indexes of a merged run are concatenated
  into the cleaned segment's, minus the entries whose ABORT marker went (an entry without
  its marker would make consumers drop the producer's later committed batches).

Threading: `clean` runs in a worker thread. It reads segment files through its own file
descriptors (immutable once rolled) and hands each finished segment to
`PartitionLog.replace_segments`, which swaps it in under the log's lock; if retention,
DeleteRecords or a close changed the log meanwhile, the pass stops and its files go away.
Everything slow (reading, writing, fsyncing the new files) happens before the lock; under
it the event loop waits for a few renames and unlinks plus one directory fsync per group.

Memory: one dict entry per distinct key; keys of 16 bytes or more are mapped by a 16-byte
BLAKE2b digest, so memory is bounded per key (a digest collision, ~2**-128, would drop
one record, the risk Kafka takes with its MD5 offset map).
"""

from __future__ import annotations

import hashlib
import logging
import os
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from kio.schema.errors import ErrorCode as E

from headwater.log import swap
from headwater.log.index import OffsetIndex, TimeIndex
from headwater.log.segment import IndexBuilder, LogSegment
from headwater.log.txn_index import write_index_file
from headwater.records.batch import (
    HEADER_SIZE,
    INT32_MAX,
    BatchHeader,
    check_header,
    iter_raw_records,
    parse_header,
    rebuild_batch,
)
from headwater.records.control import parse_marker
from headwater.storage.errors import LogError

if TYPE_CHECKING:
    from headwater.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

CHECKPOINT = "cleaner-offset-checkpoint"  # first dirty offset: where the last clean ended
_READ_CHUNK = 1 << 20
NO_LAG_LIMIT = 9223372036854775807
_DIGEST_FROM = 16

Buffer = bytes | bytearray | memoryview


class CleanStats(NamedTuple):
    bytes_before: int  # inactive segments examined
    bytes_after: int
    records_removed: int
    segments: int  # inactive segments examined (before any merge)
    cleaned_to: int = 0  # the first offset this pass left alone (0: none cleaned)


class _Aborted(Exception):
    """The log was closed or changed under the cleaner: stop this pass quietly."""


class LogCleaner:
    """Compacts one log per `clean` call; `dirty_ratio` says whether it is worth it."""

    def __init__(self, now_ms_fn: Callable[[], int]) -> None:
        self._now_ms = now_ms_fn

    def overdue(self, plog: PartitionLog, now_ms: int) -> bool:
        """max.compaction.lag.ms: the oldest dirty inactive segment's first batch is older
        than the lag, so the log must be cleaned whatever its dirty ratio."""
        lag = plog.config.max_compaction_lag_ms
        if lag >= NO_LAG_LIMIT:
            return False
        first_dirty = read_checkpoint(plog.path)
        for segment in plog.segments[:-1]:
            if segment.base_offset >= first_dirty and segment.size:
                try:
                    first = next(segment.iter_headers(), None)
                except (OSError, ValueError):  # deleted meanwhile (retention): not now
                    return False
                return first is not None and 0 <= first[1].max_timestamp < now_ms - lag
        return False

    def dirty_ratio(self, plog: PartitionLog) -> float:
        """Bytes of inactive segments rolled since the last clean / all inactive bytes."""
        inactive = plog.segments[:-1]
        total = sum(s.size for s in inactive)
        if total == 0:
            return 0.0
        first_dirty = read_checkpoint(plog.path)
        return sum(s.size for s in inactive if s.base_offset >= first_dirty) / total

    def clean(self, plog: PartitionLog, now_ms: int | None = None, *,
              upper_bound: int | None = None) -> CleanStats:
        """Compact every inactive segment of `plog` (only those wholly below
        `upper_bound`, when given: the shared log's committed offset); blocking (run it in
        a worker)."""
        now = self._now_ms() if now_ms is None else now_ms
        segments, first_uncleanable, producer_last = plog.cleanable_snapshot()
        if upper_bound is not None:
            kept = tuple(s for s in segments if s.next_offset <= upper_bound)
            if len(kept) < len(segments):
                first_uncleanable = segments[len(kept)].base_offset
            segments = kept
        if plog.config.min_compaction_lag_ms > 0:
            segments, first_uncleanable = _outside_min_lag(
                segments, first_uncleanable, now - plog.config.min_compaction_lag_ms)
        before = sum(s.size for s in segments)
        if not segments:
            return CleanStats(0, 0, 0, 0)
        config = plog.config
        after = removed = done = 0  # done: bytes of the groups already cleaned
        try:
            latest, txns = _offset_map(plog, segments)
            horizon = now - config.delete_retention_ms
            groups = _groups(segments, config.segment_bytes)
            carry: list[LogSegment] = []
            for i, group in enumerate(groups):
                group = carry + group
                # The log's first segment keeps its base offset; rather than leave it
                # empty, let it absorb the next group's survivors.
                defer = (group[0] is segments[0] and i + 1 < len(groups)
                         and groups[i + 1][-1].next_offset - group[0].base_offset <= INT32_MAX)
                size, dropped, deferred = _clean_group(plog, group, latest, txns, horizon,
                                                       producer_last, defer, len(carry))
                carry = group if deferred else []
                after += size
                removed += dropped
                done += 0 if deferred else sum(s.size for s in group)
        except (_Aborted, FileNotFoundError):
            log.info("cleaning %r stopped: the log changed or closed", plog)
            return CleanStats(before, after + before - done, removed, len(segments))
        write_checkpoint(plog.path, first_uncleanable)
        log.info("cleaned %r: %d -> %d bytes, %d records removed, %d segments",
                 plog, before, after, removed, len(segments))
        return CleanStats(before, after, removed, len(segments), first_uncleanable)


def _outside_min_lag(segments: tuple[LogSegment, ...], first_uncleanable: int,
                     limit_ms: int) -> tuple[tuple[LogSegment, ...], int]:
    """min.compaction.lag.ms: only the segments before the first one holding a record
    newer than `limit_ms` may be cleaned."""
    for i, segment in enumerate(segments):
        if segment.largest_timestamp() > limit_ms:
            return segments[:i], segment.base_offset
    return segments, first_uncleanable


def read_checkpoint(path: Path) -> int:
    try:
        return max(int((path / CHECKPOINT).read_text().strip()), 0)
    except (OSError, ValueError):
        return 0  # never cleaned: everything is dirty


def write_checkpoint(path: Path, offset: int) -> None:
    tmp = path / (CHECKPOINT + ".tmp")
    tmp.write_text(f"{offset}\n")
    os.replace(tmp, path / CHECKPOINT)


def _map_key(key: bytes) -> bytes:
    """Short keys as they are, long ones by digest (lengths differ, so never confused)."""
    return key if len(key) < _DIGEST_FROM else hashlib.blake2b(key, digest_size=16).digest()


COMMITTED, ABORTED, OPEN = "committed", "aborted", "open"


class _Transactions:
    """How each producer's transactions ended in the cleaned range: the markers' offsets
    and types, found by the key-map pass; then, during the rewrite, which transactions
    still have a batch in the log (their markers must stay)."""

    def __init__(self) -> None:
        self.markers: dict[int, tuple[list[int], list[bool]]] = {}  # pid -> offsets, commit?
        self.retained: set[int] = set()  # producers whose current transaction kept a batch
        self.removed_markers: set[int] = set()  # their aborted-index entries go with them

    def add_marker(self, producer_id: int, offset: int, commit: bool) -> None:
        offsets, commits = self.markers.setdefault(producer_id, ([], []))
        offsets.append(offset)
        commits.append(commit)

    def outcome(self, h: BatchHeader) -> str:
        """COMMITTED, ABORTED or OPEN (no marker after the batch in the cleaned range)."""
        offsets, commits = self.markers.get(h.producer_id, ((), ()))
        i = bisect_right(offsets, h.last_offset)
        if i == len(offsets):
            return OPEN
        return COMMITTED if commits[i] else ABORTED


def _offset_map(plog: PartitionLog, segments: Sequence[LogSegment]
                ) -> tuple[dict[bytes, int], _Transactions]:
    """Key -> offset of its latest record over `segments`, counting committed
    transactional records (known at their marker, later in the log) and never aborted or
    open ones; and the transactions' outcomes."""
    latest: dict[bytes, int] = {}
    txns = _Transactions()
    pending: dict[int, list[tuple[bytes, int]]] = {}  # pid -> its open transaction's keys
    for segment in segments:
        if plog.closed:
            raise _Aborted
        for h, data in _read_batches(segment):
            if h.is_control:
                marker = parse_marker(data) if h.producer_id >= 0 else None
                if marker is None:
                    continue
                txns.add_marker(h.producer_id, h.base_offset, marker.commit)
                for key, offset in pending.pop(h.producer_id, ()) if marker.commit else ():
                    if latest.get(key, -1) < offset:
                        latest[key] = offset
                pending.pop(h.producer_id, None)
                continue
            keyed = [(_map_key(r.key), h.base_offset + r.offset_delta)
                     for r in iter_raw_records(data) if r.key is not None]
            if h.is_transactional:
                pending.setdefault(h.producer_id, []).extend(keyed)
            else:
                latest.update(keyed)
    return latest, txns


def _groups(segments: Sequence[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    """Adjacent segments merged while their original sizes fit in segment.bytes and their
    offsets in a relative index entry (Kafka's groupSegmentsBySize)."""
    groups: list[list[LogSegment]] = []
    size = 0
    for s in segments:
        last = max(s.next_offset - 1, s.base_offset)
        if groups and size + s.size <= max_bytes and last - groups[-1][0].base_offset <= INT32_MAX:
            groups[-1].append(s)
            size += s.size
        else:
            groups.append([s])
            size = s.size
    return groups


def _clean_group(plog: PartitionLog, group: list[LogSegment], latest: dict[bytes, int],
                 txns: _Transactions, horizon_ms: int, producer_last: dict[int, int],
                 defer_empty: bool = False, known_empty: int = 0) -> tuple[int, int, bool]:
    """Write the group's survivors as `<base>.log.cleaned` + indexes and swap them in.
    Returns (bytes after, records removed, deferred); a group left as it was is not
    rewritten. Deferred: nothing survived and `defer_empty` asked to leave the group for
    the caller to prepend to the next one, whose first `known_empty` members were found
    to keep nothing already and are not re-read."""
    directory, base = plog.path, group[0].base_offset
    path = swap.cleaned_path(directory, base, ".log")
    builder = IndexBuilder(base, plog.config.index_interval_bytes)
    changed = len(group) > 1
    removed = pos = mtime_ns = 0
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for i, segment in enumerate(group):
                if plog.closed:
                    raise _Aborted
                seg_mtime_ns = os.stat(segment.log_path).st_mtime_ns
                mtime_ns = max(mtime_ns, seg_mtime_ns)
                if i < known_empty:
                    continue
                drop_tombstones = seg_mtime_ns // 1_000_000 < horizon_ms
                for h, data in _read_batches(segment):
                    out, dropped = _filter_batch(h, data, latest, txns, drop_tombstones,
                                                 producer_last)
                    removed += dropped
                    if out is not data:
                        changed = True
                    if out is None:
                        continue
                    _write_all(fd, out)
                    builder.add(parse_header(out), pos)
                    pos += len(out)
            deferred = changed and pos == 0 and defer_empty
            if changed and not deferred:
                builder.seal()
                os.utime(path, ns=(mtime_ns, mtime_ns))  # tombstone clock and retention
                os.fsync(fd)
        finally:
            os.close(fd)
        if not changed or deferred:
            swap.discard(directory, base)
            return pos, removed, deferred
        _write_index(OffsetIndex(swap.cleaned_path(directory, base, ".index")),
                     builder.offsets, builder.positions)
        _write_index(TimeIndex(swap.cleaned_path(directory, base, ".timeindex")),
                     builder.times, builder.time_offsets)
        # An aborted transaction's entry lives as long as its marker: without the marker a
        # consumer would never stop dropping the producer's later (committed) batches.
        aborted = [txn for segment in group for txn in segment.txn_index
                   if txn.last_offset not in txns.removed_markers]
        if aborted:
            write_index_file(swap.cleaned_path(directory, base, ".txnindex"), aborted)
        for segment in group:  # outside the log lock: its swap must not wait on fsyncs
            segment.flush()
        if not plog.replace_segments(group, base):
            raise _Aborted
    except BaseException:
        swap.discard(directory, base)
        raise
    return pos, removed, False


def _filter_batch(h: BatchHeader, data: memoryview, latest: dict[bytes, int],
                  txns: _Transactions, drop_tombstones: bool,
                  producer_last: dict[int, int]) -> tuple[Buffer | None, int]:
    """(the batch to keep — `data` itself if unchanged — or None, records removed)."""
    last_of_producer = h.producer_id >= 0 and producer_last.get(h.producer_id) == h.last_offset
    if h.is_control:
        if h.producer_id < 0 or parse_marker(data) is None:
            return data, 0
        ended = h.producer_id in txns.retained
        txns.retained.discard(h.producer_id)
        if drop_tombstones and not ended and not last_of_producer:
            txns.removed_markers.add(h.base_offset)
            return None, h.records_count
        return data, 0
    outcome = txns.outcome(h) if h.is_transactional else COMMITTED
    if outcome == OPEN:
        txns.retained.add(h.producer_id)
        return data, 0
    if outcome == ABORTED and not last_of_producer:
        return None, h.records_count
    out, dropped = _filter_records(h, data, latest, drop_tombstones, last_of_producer)
    if out is not None and h.is_transactional:
        txns.retained.add(h.producer_id)
    return out, dropped


def _filter_records(h: BatchHeader, data: memoryview, latest: dict[bytes, int],
                    drop_tombstones: bool, last_of_producer: bool) -> tuple[Buffer | None, int]:
    kept = []
    total = 0
    for r in iter_raw_records(data):
        total += 1
        if (r.key is not None
                and latest.get(_map_key(r.key)) == h.base_offset + r.offset_delta
                and not (r.is_tombstone and drop_tombstones)):
            kept.append(r)
    if not kept:
        if last_of_producer:
            return (data if total == 0 else rebuild_batch(h, [])), total
        return None, total
    if len(kept) == total:
        return data, 0
    return rebuild_batch(h, kept), total - len(kept)


def _read_batches(segment: LogSegment) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every batch of an inactive segment, read through a private descriptor so that a
    concurrent close or delete of the segment cannot pull the file from under us."""
    fd = os.open(segment.log_path, os.O_RDONLY)
    try:
        size = min(segment.size, os.fstat(fd).st_size)
        buf, buf_pos, pos = b"", 0, 0
        while pos + HEADER_SIZE <= size:
            if pos + HEADER_SIZE > buf_pos + len(buf):
                buf, buf_pos = os.pread(fd, min(_READ_CHUNK, size - pos), pos), pos
            h = parse_header(buf, pos - buf_pos)
            if check_header(h) or pos + h.size > size:
                raise LogError(E.corrupt_message, f"{segment.log_path}: bad batch at {pos}")
            if pos + h.size > buf_pos + len(buf):
                buf, buf_pos = os.pread(fd, min(max(_READ_CHUNK, h.size), size - pos), pos), pos
            start = pos - buf_pos
            yield h, memoryview(buf)[start:start + h.size]
            pos += h.size
    finally:
        os.close(fd)


def _write_all(fd: int, data: Buffer) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write_index(index: OffsetIndex | TimeIndex, keys: array[int], values: array[int]) -> None:
    try:
        index.replace(keys, values)
        index.flush()
    finally:
        index.close()
