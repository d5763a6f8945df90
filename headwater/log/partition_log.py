"""The log of one partition: an ordered list of segments in `<data_dir>/<topic>-<partition>`.

Produce appends a request's batches to the active segment in one `os.write` after
validating all of them (atomic per request); fetch returns whole-batch byte ranges. A
single node has no followers, so the high watermark is the log end offset.

Transactions: transactional batches open a transaction per producer (see
`producer_state`); `append_marker` writes the COMMIT/ABORT control batch that closes it
and, for an abort, an entry in the segment's aborted-transaction index (`txn_index`).
The last stable offset is the first offset of the oldest open transaction (else the high
watermark); read_committed fetches read up to it and get `aborted_transactions` for the
range they read. Only markers are decoded: plain and idempotent batches stay header-only.

Threading: everything runs on the broker's event-loop thread, synchronously, except
`flush()`, which may run in a worker thread (it only fsyncs), and the log cleaner, which
rewrites inactive segments in a worker thread. After `append`, a caller that sees
`needs_flush` (fsync_always, or `flush.messages` reached) awaits `flush()` in a thread
before acknowledging. Every method that walks or changes the segment list holds `_lock`,
so the cleaner's `replace_segments` (a few renames, ms at most) never swaps segments under
a read, an append or retention; `flush()` needs no log lock (segment locks suffice).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from bisect import bisect_right
from collections.abc import Callable, Sequence
from pathlib import Path

from kio.schema.errors import ErrorCode as E

from headwater.config import LogConfig
from headwater.log import swap
from headwater.log.producer_state import ProducerStateManager
from headwater.log.segment import LogSegment
from headwater.log.txn_index import AbortedTxn
from headwater.records.batch import (
    HEADER_SIZE,
    INT32_MAX,
    TIMESTAMP_TYPE_BIT,
    TOPIC_CODECS,
    BatchHeader,
    check_records,
    decode_records,
    parse_header,
    recompress,
    set_base_offset,
    set_log_append_time,
    validate_produce_records,
)
from headwater.records.control import EndTxnMarker, build_marker, parse_marker, parse_markers
from headwater.storage.errors import LogError
from headwater.storage.partition import AppendResult, ProducerStateInfo

log = logging.getLogger(__name__)

LOG_START_CHECKPOINT = "log-start-offset"


class PartitionLog:
    """Append, read, retention and recovery for one partition directory."""

    def __init__(self, path: Path, config: LogConfig, topic: str, partition: int,
                 segments: list[LogSegment], log_start_offset: int,
                 producers: ProducerStateManager, now_ms: int) -> None:
        self.path = path
        self.config = config
        self.topic = topic
        self.partition = partition
        self._name = f"{topic}-{partition}"  # Kafka's TopicPartition in messages
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._log_start_offset = log_start_offset
        self._producers = producers
        self._flushed_offset = segments[-1].next_offset  # offsets below it were fsynced
        self._dir_dirty = False
        self._closed = False
        #: (log end, log start, producer snapshot offset) at open; see `close`.
        self._opened_as: tuple[int, int, int | None] = (-1, -1, None)
        #: The log start offset in the checkpoint file (None: not known to be there).
        self._checkpointed: int | None = None
        self._lock = threading.RLock()  # see the module docstring
        #: Time of the last flush, kept by LogManager.flush_due for `flush.ms`.
        self.last_flush_ms = now_ms
        #: Called with no arguments after every successful (non-duplicate) append; the
        #: long-poll waiters subscribe here (`subscribe_append`) to wake parked fetches.
        self._on_append: list[Callable[[], None]] = []
        #: When a list, every append's written bytes and batch headers go to it too: the
        #: shared log's commit windows upload them from here instead of reading the
        #: segment back (issue 23's 1 KiB produce: a copy and a pread less per byte).
        self.tee: list[tuple[bytearray, list[BatchHeader]]] | None = None

    # ---- opening and recovery ---------------------------------------------------------

    @classmethod
    def open(cls, path: Path, config: LogConfig, topic: str, partition: int, now_ms: int,
             *, clean_shutdown: bool = False) -> PartitionLog:
        """Load (or create) the partition directory.

        Every segment gets a cheap tail check, or a full CRC recovery when its indexes are
        missing, the check fails, or — after an unclean shutdown — it holds offsets past
        the newest producer snapshot (the active segment, in practice). A recovery that
        truncates an older segment drops the segments after it.
        """
        path.mkdir(parents=True, exist_ok=True)
        for tmp in path.glob("*.tmp"):
            tmp.unlink(missing_ok=True)
        for base in swap.recover_swaps(path):  # finish a clean that was committed
            log.warning("%s: completed an interrupted segment swap at offset %d", path, base)
        interval = config.index_interval_bytes
        producers = ProducerStateManager(path)
        snapshots = producers.snapshot_files()
        recover_from = snapshots[-1][0] if snapshots else -1
        bases = sorted(int(p.stem) for p in path.glob("*.log") if p.stem.isdigit())
        segments: list[LogSegment] = []
        for i, base in enumerate(bases):
            segment = LogSegment.open(path, base, interval)
            segments.append(segment)
            after_snapshot = i + 1 == len(bases) or bases[i + 1] > recover_from
            full = segment.indexes_missing or (not clean_shutdown and after_snapshot)
            if full or not segment.load_tail():
                truncated = segment.recover()
                if truncated:
                    log.warning("%s: truncated %d bytes of torn/corrupt data at offset %d",
                                segment.log_path, truncated, segment.next_offset)
                    if i + 1 < len(bases):
                        for later in bases[i + 1:]:
                            LogSegment.open(path, later, interval).delete()
                        break
        _remove_orphan_indexes(path, {s.base_offset for s in segments})

        checkpoint = _read_checkpoint(path)
        if segments and checkpoint > segments[-1].next_offset:
            for segment in segments:  # everything below the recorded log start is gone
                segment.delete()
            segments = []
        if not segments:
            segments = [LogSegment.create(path, checkpoint, interval)]
        log_start = max(checkpoint, segments[0].base_offset)

        self = cls(path, config, topic, partition, segments, log_start, producers, now_ms)
        self._checkpointed = checkpoint
        self._rebuild_producer_state()
        return self

    def _rebuild_producer_state(self) -> None:
        """Load the newest usable snapshot, then replay the log after it: batch headers,
        plus the markers (the only batches decoded). The aborted-transaction entries from
        that point on are dropped first and rebuilt by the replay, so an entry lost to a
        crash between a marker's write and its index write, or one describing a marker
        that recovery truncated away, is put right."""
        leo = self.log_end_offset
        start = self._producers.load_latest(leo)
        self._opened_as = (leo, self._log_start_offset, start)
        if start is None:
            start = self._segments[0].base_offset
        for segment in self._segments:
            segment.txn_index.truncate_to(start)
        for segment in self._segments:
            if segment.next_offset <= start or segment.size == 0:
                continue
            pos = segment.find_position(start)[0] if segment.base_offset < start else 0
            for p, h in segment.iter_headers(pos):
                if h.base_offset < start:
                    continue
                if h.is_control:
                    if h.producer_id >= 0:
                        self._replay_marker(segment, p, h)
                else:
                    self._producers.update(h, h.base_offset)
        self._producers.truncate_head(self._log_start_offset)

    def _replay_marker(self, segment: LogSegment, pos: int, h: BatchHeader) -> None:
        try:
            marker = parse_marker(segment.read(pos, h.size))
        except LogError as exc:
            log.warning("%s: unreadable control batch at offset %d: %s", self.path,
                        h.base_offset, exc.message)
            return
        if marker is not None:
            aborted = self._producers.complete_txn(h.producer_id, h.producer_epoch, marker,
                                                   h.base_offset, h.max_timestamp)
            if aborted is not None:
                segment.txn_index.append(aborted)

    # ---- properties -------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned."""
        return self._segments[-1].next_offset

    @property
    def leader_epoch(self) -> int:
        return 0  # one node: the leader never changes

    @property
    def high_watermark(self) -> int:
        return self._segments[-1].next_offset  # single node: everything is replicated

    @property
    def last_stable_offset(self) -> int:
        """First offset of the oldest open transaction, else the high watermark: what
        read_committed consumers may read below (Kafka's LSO; single node, so every
        completed transaction's marker is already below the high watermark)."""
        first = self._producers.first_unstable_offset
        hw = self._segments[-1].next_offset
        return first if 0 <= first < hw else hw

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in tuple(self._segments))

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def unflushed_messages(self) -> int:
        """Records appended since the start of the last completed flush."""
        return self.log_end_offset - self._flushed_offset

    @property
    def needs_flush(self) -> bool:
        """True when the caller must `flush()` before acknowledging the last append
        (fsync_always with unflushed data, or `flush.messages` reached). Stays True until a
        flush that started after the append has finished, so concurrent flushes are safe."""
        pending = self.log_end_offset - self._flushed_offset
        return pending > 0 and (self.config.fsync_always or pending >= self.config.flush_messages)

    # ---- append -----------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, now_ms: int,
               *, origin_client: bool = True,
               transaction_version: int = 0) -> AppendResult:
        """Validate, assign offsets and write a produce request's record set for this
        partition. Nothing is written unless every batch is valid. `origin_client=False`
        lets the broker's own writers append control batches."""
        with self._lock:
            result = self._append(data, now_ms, origin_client, transaction_version)
        if not result.duplicate:
            for callback in tuple(self._on_append):
                try:
                    callback()
                except Exception:
                    log.exception("on_append callback failed for %s-%d",
                                  self.topic, self.partition)
        return result

    def subscribe_append(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback` after every append that wrote something; returns the
        unsubscribe handle."""
        self._on_append.append(callback)

        def unsubscribe() -> None:
            if callback in self._on_append:
                self._on_append.remove(callback)

        return unsubscribe

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int, now_ms: int,
                      transaction_version: int = 0) -> int:
        """Write a COMMIT (`commit`) or ABORT marker ending the producer's transaction on
        this partition; returns the marker's offset. An abort of an open transaction is
        added to the aborted-transaction index. A marker for a producer with nothing open
        is still written and harmless (a coordinator re-sending markers after a restart).
        LogError INVALID_PRODUCER_EPOCH (47) if `producer_epoch` is older than the
        producer's, TRANSACTION_COORDINATOR_FENCED (52) if `coordinator_epoch` is older
        than the last marker's. Wakes long-polling fetches like any append (the LSO may
        have moved). At `transaction_version` 2 the epoch must be above the producer's
        (the coordinator bumped it), or equal with nothing open (a re-sent marker)."""
        data = build_marker(producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
        return self.append(data, now_ms, origin_client=False,
                           transaction_version=transaction_version).base_offset

    def _append(self, data: bytes | bytearray | memoryview, now_ms: int,
                origin_client: bool, transaction_version: int = 0) -> AppendResult:
        self._check_open()
        config = self.config
        headers = validate_produce_records(data, config.max_message_bytes,
                                           allow_control=not origin_client)
        append_time = config.message_timestamp_type == "LogAppendTime"
        if origin_client:
            self._check_client_records(data, headers, now_ms, append_time)
        # Clients cannot write control batches, so only the broker's own appends pay for
        # looking for markers.
        markers = None if origin_client else parse_markers(data, headers)
        first_offset = self.log_end_offset
        duplicate = self._producers.check_all(headers, first_offset, markers,
                                              transaction_version)
        if duplicate is not None:
            return AppendResult(duplicate.base_offset, duplicate.last_offset,
                                duplicate.timestamp if append_time else -1,
                                self._log_start_offset, True)
        codec = TOPIC_CODECS.get(config.compression_type)
        if origin_client and codec is not None:  # after the duplicate check: retries skip it
            recompressed = recompress(data, headers, codec, config.compression_level(codec))
            if recompressed is not None:
                data, headers = recompressed
        if len(data) > config.segment_bytes:
            raise LogError(E.record_list_too_large,
                           f"{len(data)} bytes exceed segment.bytes {config.segment_bytes}")
        count = sum(h.last_offset_delta + 1 for h in headers)
        segment = self._maybe_roll(len(data), first_offset + count - 1, now_ms)

        buf = bytearray(data)
        stored: list[BatchHeader] = []
        offset = first_offset
        pos = 0
        for h in headers:
            set_base_offset(buf, pos, offset)
            if append_time:
                set_log_append_time(buf, pos, now_ms)
                h = h._replace(base_offset=offset, max_timestamp=now_ms,
                               attributes=h.attributes | TIMESTAMP_TYPE_BIT)
            else:
                h = h._replace(base_offset=offset)
            stored.append(h)
            offset += h.last_offset_delta + 1
            pos += h.size
        segment.append(buf, stored, now_ms)
        if self.tee is not None:
            self.tee.append((buf, stored))
        if markers is None:
            for h in stored:
                self._producers.update(h, h.base_offset)
        else:
            self._update_with_markers(segment, stored, markers)
        return AppendResult(first_offset, offset - 1, now_ms if append_time else -1,
                            self._log_start_offset, False)

    def _check_client_records(self, data: bytes | bytearray | memoryview,
                              headers: list[BatchHeader], now_ms: int,
                              append_time: bool) -> None:
        """Kafka's checks on a client's record set: base offsets 0, then the per-record
        ones (keys on compacted topics, timestamps; see `check_records`), which report
        the offending records (RecordValidationError)."""
        config = self.config
        for h in headers:
            if h.base_offset != 0:
                # Kafka: a client's batches are numbered by the broker, so they carry 0.
                raise LogError(E.invalid_record, f"the base offset of a record batch from a "
                                                 f"client should be 0, but it is {h.base_offset}")
        check_records(data, headers, now_ms, compacted="compact" in config.cleanup_policy,
                      log_append_time=append_time,
                      before_max_ms=config.timestamp_before_max_ms,
                      after_max_ms=config.timestamp_after_max_ms,
                      topic_partition=self._name,
                      target_codec=TOPIC_CODECS.get(config.compression_type),
                      max_decompressed=config.max_decompressed_message_bytes)

    def _update_with_markers(self, segment: LogSegment, stored: list[BatchHeader],
                             markers: dict[int, EndTxnMarker | None]) -> None:
        """Producer state after a broker write that may hold markers; aborts are indexed
        in `segment`, the one the batches went to."""
        for i, h in enumerate(stored):
            if not h.is_control:
                self._producers.update(h, h.base_offset)
                continue
            marker = markers.get(i)
            if marker is None or h.producer_id < 0:
                continue
            aborted = self._producers.complete_txn(h.producer_id, h.producer_epoch, marker,
                                                   h.base_offset, h.max_timestamp)
            if aborted is not None:
                try:
                    segment.txn_index.append(aborted)
                except OSError as exc:
                    raise LogError(E.kafka_storage_error,
                                   f"txn index write in {self.path} failed: {exc}") from exc

    def _maybe_roll(self, size: int, last_offset: int, now_ms: int) -> LogSegment:
        active = self._segments[-1]
        if active.size == 0:
            return active
        config = self.config
        roll_ms = config.segment_ms
        if "compact" in config.cleanup_policy:  # the active segment is never compacted
            roll_ms = min(roll_ms, config.max_compaction_lag_ms)
        if (active.size + size > config.segment_bytes
                or (active.created_ms is not None and now_ms - active.created_ms > roll_ms)
                or last_offset - active.base_offset > INT32_MAX):
            return self._roll(now_ms)
        return active

    def roll(self, now_ms: int) -> LogSegment:
        """Start a new active segment at the log end (no-op if the active one is empty)."""
        with self._lock:
            return self._roll(now_ms)

    def _roll(self, now_ms: int) -> LogSegment:
        active = self._segments[-1]
        if active.size == 0:
            return active
        active.seal()
        leo = active.next_offset
        try:
            segment = LogSegment.create(self.path, leo, self.config.index_interval_bytes)
            self._producers.snapshot(leo)
        except OSError as exc:
            raise LogError(E.kafka_storage_error, f"roll of {self.path} failed: {exc}") from exc
        self._segments.append(segment)
        self._bases.append(leo)
        self._dir_dirty = True
        return segment

    # ---- read -------------------------------------------------------------------------

    def read(self, fetch_offset: int, max_bytes: int, upper_bound: int | None = None) -> bytes:
        """Whole batches from the one containing `fetch_offset`: at most `max_bytes` of
        them but always at least one (KIP-74), none whose base offset is >= `upper_bound`
        (default: the high watermark). Spans segments; b"" at the log end."""
        with self._lock:
            return self._read(fetch_offset, max_bytes, upper_bound)

    def _read(self, fetch_offset: int, max_bytes: int, upper_bound: int | None) -> bytes:
        self._check_open()
        leo = self.log_end_offset
        if fetch_offset < self._log_start_offset or fetch_offset > leo:
            raise LogError(E.offset_out_of_range,
                           f"offset {fetch_offset} outside [{self._log_start_offset}, {leo}]")
        bound = leo if upper_bound is None else min(upper_bound, leo)
        if fetch_offset >= bound:
            return b""
        i = bisect_right(self._bases, fetch_offset) - 1
        segment = self._segments[i]
        pos = segment.find_position(fetch_offset)[0]
        parts: list[bytes] = []
        remaining = max_bytes
        try:
            while True:
                if bound >= segment.next_offset:
                    end = segment.size
                else:
                    end = segment.position_of_first_batch_from(bound)
                chunk = segment.read_batches(pos, remaining, end, min_one=not parts)
                if chunk:
                    parts.append(chunk)
                    remaining -= len(chunk)
                i += 1
                if (pos + len(chunk) < end or end < segment.size or remaining <= 0
                        or i >= len(self._segments)):
                    break
                segment, pos = self._segments[i], 0
        except OSError as exc:
            raise LogError(E.kafka_storage_error, f"read of {self.path} failed: {exc}") from exc
        if len(parts) == 1:
            return parts[0]
        return b"".join(parts)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp`, or None.

        ListOffsets' special values (-1 latest, -2 earliest, -3 max) are the caller's."""
        with self._lock:
            return self._offset_for_timestamp(timestamp)

    def _offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        self._check_open()
        lso = self._log_start_offset
        for segment in self._segments:
            if segment.size == 0 or segment.max_timestamp < timestamp:
                continue
            start = max(segment.base_offset + segment.time_index.lookup_time(timestamp), lso)
            pos = segment.find_position(start)[0]
            for p, h in segment.iter_headers(pos):
                if h.max_timestamp < timestamp or h.last_offset < lso:
                    continue
                for record in decode_records(segment.read(p, h.size)):
                    if record.timestamp >= timestamp and record.offset >= lso:
                        return record.offset, record.timestamp
        return None

    def max_timestamp_entry(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets
        MAX_TIMESTAMP); the earliest such record on ties. None for an empty log."""
        with self._lock:
            return self._max_timestamp_entry()

    def _max_timestamp_entry(self) -> tuple[int, int] | None:
        self._check_open()
        best: LogSegment | None = None
        for segment in self._segments:
            if segment.size and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None:
            return None
        pos = best.find_position(best.offset_of_max_timestamp)[0]
        h = parse_header(best.read(pos, HEADER_SIZE))
        for record in decode_records(best.read(pos, h.size)):
            if record.timestamp == best.max_timestamp:
                return record.offset, record.timestamp
        return h.last_offset, best.max_timestamp

    def aborted_transactions(self, start_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of the aborted transactions overlapping
        [start_offset, upper_bound): what a read_committed Fetch returning that range
        must list. Searches the index of the segment holding `start_offset` and later
        ones, stopping at the first entry whose recorded LSO reaches `upper_bound`."""
        with self._lock:
            self._check_open()
            found: list[AbortedTxn] = []
            if upper_bound <= start_offset:
                return []
            i = max(bisect_right(self._bases, start_offset) - 1, 0)
            for segment in self._segments[i:]:
                if segment.txn_index.collect(start_offset, upper_bound, found):
                    break
            return [(t.producer_id, t.first_offset) for t in found]

    # ---- log start, retention ---------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start to `offset`; returns the new log start."""
        with self._lock:
            self._check_open()
            if offset < 0 or offset > self.high_watermark:
                raise LogError(E.offset_out_of_range,
                               f"offset {offset} outside [0, {self.high_watermark}]")
            if offset > self._log_start_offset:
                self._set_log_start(offset)
            return self._log_start_offset

    def apply_retention(self, now_ms: int) -> int:
        """Delete the oldest whole segments breaching retention.ms (by max timestamp) or
        retention.bytes; returns how many were deleted. A breaching active segment is
        first rolled, as in Kafka, so an idle expired topic does empty out. An inactive
        segment the cleaner emptied counts by its file's mtime (Kafka)."""
        with self._lock:
            return self._apply_retention(now_ms)

    def _apply_retention(self, now_ms: int) -> int:
        self._check_open()
        config = self.config
        if "delete" not in config.cleanup_policy:
            return 0
        segments = self._segments
        count = 0
        if config.retention_ms >= 0:
            while (count < len(segments) and _deletable(segments, count)
                   and now_ms - segments[count].largest_timestamp() > config.retention_ms):
                count += 1
        if config.retention_bytes >= 0:
            excess = self.size_bytes - config.retention_bytes
            by_size = 0
            while (by_size < len(segments) and _deletable(segments, by_size)
                   and excess - segments[by_size].size >= 0):
                excess -= segments[by_size].size
                by_size += 1
            count = max(count, by_size)
        if count == 0:
            return 0
        if count == len(segments):
            self._roll(now_ms)
        self._delete_oldest(count)
        self._set_log_start(max(self._log_start_offset, self._segments[0].base_offset))
        return count

    def _set_log_start(self, offset: int) -> None:
        self._log_start_offset = offset
        deletable = 0
        while (deletable + 1 < len(self._segments)
               and self._segments[deletable + 1].base_offset <= offset):
            deletable += 1
        self._delete_oldest(deletable)
        _write_checkpoint(self.path, offset)
        self._checkpointed = offset
        self._producers.truncate_head(offset)
        self._producers.delete_snapshots_below(offset)

    def _delete_oldest(self, count: int) -> None:
        for segment in self._segments[:count]:
            segment.delete()
        del self._segments[:count]
        del self._bases[:count]

    # ---- producers --------------------------------------------------------------------

    def producer_states(self) -> list[ProducerStateInfo]:
        """DescribeProducers rows: (producer_id, producer_epoch, last_sequence,
        last_timestamp, coordinator_epoch, current_txn_start_offset)."""
        return self._producers.states()

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producers

    # ---- log cleaner --------------------------------------------------------------------

    def knows_producer(self, producer_id: int) -> bool:
        """Whether this partition has any state for the producer (batches or markers)."""
        with self._lock:
            return producer_id in self._producers.producers

    def in_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether this producer (at this epoch) has a transaction open on the partition."""
        with self._lock:
            entry = self._producers.producers.get(producer_id)
            return (entry is not None and entry.epoch == producer_epoch
                    and entry.current_txn_first_offset >= 0)

    def cleanable_snapshot(self) -> tuple[tuple[LogSegment, ...], int, dict[int, int]]:
        """Taken atomically for the cleaner: the segments it may rewrite (all but the
        active one), the first offset it may not touch (the active segment's base), and
        the offset of each producer's last batch. Nothing once closed."""
        with self._lock:
            if self._closed:
                return (), 0, {}
            last = {pid: e.last_offset for pid, e in self._producers.producers.items()}
            return tuple(self._segments[:-1]), self._segments[-1].base_offset, last

    def replace_segments(self, old: Sequence[LogSegment], base_offset: int) -> bool:
        """Swap the inactive run `old` for the cleaned segment the cleaner wrote as
        `<base_offset>.log.cleaned` (+ indexes), crash-safely (see `swap`). False, with
        nothing changed, if the run is no longer in the log (retention, DeleteRecords,
        close); the caller then discards its files. An emptied segment is dropped unless
        it is the first one, whose base offset keeps reads below the next segment valid."""
        with self._lock:
            if self._closed or not old:
                return False
            try:
                start = next(i for i, s in enumerate(self._segments) if s is old[0])
            except StopIteration:
                return False
            end = start + len(old)
            if (end >= len(self._segments) or tuple(self._segments[start:end]) != tuple(old)
                    or old[0].base_offset != base_offset):
                return False
            try:
                swap.commit(self.path, base_offset)
                for segment in old:  # ascending: see `swap`
                    segment.delete()
                swap.install(self.path, base_offset)
                segment = LogSegment.open(self.path, base_offset, self.config.index_interval_bytes)
                if segment.indexes_missing or not segment.load_tail():
                    segment.recover()
            except OSError as exc:
                raise LogError(E.kafka_storage_error,
                               f"segment swap in {self.path} failed: {exc}") from exc
            segment.dirty = True  # let the next flush fsync the renamed indexes
            self._segments[start:end] = [segment]
            self._bases[start:end] = [base_offset]
            if segment.size == 0 and start > 0:
                segment.delete()
                del self._segments[start]
                del self._bases[start]
            self._dir_dirty = True
            return True

    # ---- lifecycle --------------------------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            for segment in self._segments:
                segment.index_interval_bytes = config.index_interval_bytes

    def flush(self) -> None:
        """fsync every segment written since the last flush (safe in a worker thread).

        Everything below the log end seen at the start is durable when this returns: a
        segment's data is written before the log end moves past it, and a segment another
        flush is fsyncing holds its lock until that fsync is done."""
        target = self.log_end_offset
        if self._dir_dirty and not self._closed:
            self._dir_dirty = False  # new segment files: make their names durable too
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:  # deleted under a background flush
                return
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        for segment in list(self._segments):
            segment.flush()
        self._flushed_offset = max(self._flushed_offset, target)

    def close(self, sync: bool = True) -> None:
        """Flush, snapshot producer state at the log end, and close every file. A log
        unchanged since it was opened from a snapshot at its end writes nothing (a
        clean stop of 100,000 idle partitions is then quick). `sync=False` leaves the
        fsyncs to the caller (`LogManager.close_all` syncs once for every log)."""
        with self._lock:
            if self._closed:
                return
            leo = self.log_end_offset
            if self._opened_as != (leo, self._log_start_offset, leo):
                self._segments[-1].seal()
                if sync:
                    self.flush()
                self._producers.snapshot(leo, sync=sync)
                if self._checkpointed != self._log_start_offset:
                    _write_checkpoint(self.path, self._log_start_offset)
            elif sync:
                self.flush()  # no-op unless recovery rewrote an index
            for segment in self._segments:
                segment.close()
            self._closed = True

    def delete(self) -> None:
        """Close without flushing and remove the whole partition directory."""
        with self._lock:
            for segment in self._segments:
                segment.close()
            self._closed = True
            shutil.rmtree(self.path, ignore_errors=True)

    def _check_open(self) -> None:
        if self._closed:
            raise LogError(E.kafka_storage_error, f"log {self.topic}-{self.partition} is closed")

    def __repr__(self) -> str:
        return (f"PartitionLog({self.topic}-{self.partition}, start={self._log_start_offset}, "
                f"end={self.log_end_offset}, segments={len(self._segments)})")


def _deletable(segments: list[LogSegment], i: int) -> bool:
    """Retention may consider segment i: it holds data or is not the active one."""
    return segments[i].size > 0 or i + 1 < len(segments)


def _read_checkpoint(path: Path) -> int:
    try:
        return max(int((path / LOG_START_CHECKPOINT).read_text().strip()), 0)
    except (OSError, ValueError):
        return 0


def _write_checkpoint(path: Path, offset: int) -> None:
    """tmp + rename, so a crash leaves the old or the new value, never a torn one."""
    tmp = path / (LOG_START_CHECKPOINT + ".tmp")
    tmp.write_text(f"{offset}\n")
    os.replace(tmp, path / LOG_START_CHECKPOINT)


def _remove_orphan_indexes(path: Path, bases: set[int]) -> None:
    for suffix in ("*.index", "*.timeindex", "*.txnindex"):
        for index in path.glob(suffix):
            if index.stem.isdigit() and int(index.stem) not in bases:
                index.unlink(missing_ok=True)
