"""Producer state of one partition: epochs, sequence numbers and open transactions.

Everything here comes from batch headers (producerId, producerEpoch, baseSequence,
lastOffsetDelta, the transactional bit) and from transaction markers, so the state is a
pure function of the log: a restart loads the latest snapshot (`<offset:020d>.snapshot`,
JSON, written at roll and close) and replays the log after its offset. The last five
batches per producer are kept so a retried batch is recognised and answered with its
original offsets instead of being written twice.

Transactions (Kafka's ProducerAppendInfo rules): a transactional data batch from a
producer with no open transaction opens one at its base offset; a non-transactional batch
while one is open is INVALID_TXN_STATE; a COMMIT/ABORT marker closes it (a marker with an
older producer epoch is INVALID_PRODUCER_EPOCH, one from an older coordinator epoch
TRANSACTION_COORDINATOR_FENCED; a marker for a producer with nothing open is accepted and
changes nothing but the epochs). The first offsets of the open transactions give the
partition's first unstable offset, i.e. the last stable offset.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from kio.schema.errors import ErrorCode as E

from headwater.log.txn_index import AbortedTxn
from headwater.records.batch import INT32_MAX, TRANSACTIONAL_BIT, BatchHeader
from headwater.records.control import EndTxnMarker
from headwater.storage.errors import LogError
from headwater.storage.partition import ProducerStateInfo

BATCHES_RETAINED = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN (max.in.flight)
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOTS_KEPT = 2  # an older one survives a recovery that truncates below the newest
#: Version 2 snapshots carry open transactions. Version 1 files were written before
#: transactions were tracked (their current_txn_first_offset is always -1 even when a
#: transaction was open), so they are not trusted: the log is replayed instead.
SNAPSHOT_VERSION = 2


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class DuplicateBatch(NamedTuple):
    """A retried batch already in the log: answer with its original offsets."""

    base_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_RETAINED))
    last_timestamp: int = -1
    # The coordinator epoch of the last marker (older ones are fenced) and the first offset
    # of the open transaction (-1: none); they feed DescribeProducers, the LSO and the
    # aborted-transaction index.
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> ProducerEntry:
        return ProducerEntry(self.producer_id, self.epoch,
                             deque(self.batches, maxlen=BATCHES_RETAINED), self.last_timestamp,
                             self.coordinator_epoch, self.current_txn_first_offset)

    def find_duplicate(self, h: BatchHeader) -> DuplicateBatch | None:
        """The retained batch `h` repeats, if any. A transactional batch repeats only one
        of the producer's open transaction: a client sends EndTxn only once its produce
        requests have ended, so a batch matching one before the last marker is a new
        batch under reused sequence numbers (librdkafka purges a batch queued for retry
        on abort_transaction and gives its sequences to the next transaction, TV1 keeping
        the epoch). Answering it with the old offsets would tear the new transaction:
        they are another transaction's, perhaps aborted. Kafka answers them; we let the
        sequence check answer OUT_OF_ORDER_SEQUENCE_NUMBER (docs/differences.md)."""
        if h.producer_epoch != self.epoch:
            return None
        last_seq = h.last_sequence
        for b in self.batches:
            if b.first_seq == h.base_sequence and b.last_seq == last_seq:
                if h.is_transactional and not (
                        0 <= self.current_txn_first_offset <= b.first_offset):
                    return None
                return DuplicateBatch(b.first_offset, b.last_offset, b.timestamp)
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (last_seq == INT32_MAX and next_seq == 0)


def _check_sequence(entry: ProducerEntry | None, h: BatchHeader) -> None:
    """Raise unless `h` may follow `entry` (None: an unknown producer, accepted as is)."""
    if entry is None:
        return
    if h.producer_epoch < entry.epoch:
        raise LogError(E.invalid_producer_epoch,
                       f"producer {h.producer_id} epoch {h.producer_epoch} is older than "
                       f"current epoch {entry.epoch}")
    if h.base_sequence < 0:
        return  # no sequence to check (e.g. a broker-written control batch)
    if h.producer_epoch > entry.epoch:
        if h.base_sequence != 0:
            raise LogError(E.out_of_order_sequence_number,
                           f"producer {h.producer_id} new epoch {h.producer_epoch} must start "
                           f"at sequence 0, got {h.base_sequence}")
        return
    if not _in_sequence(entry.last_seq, h.base_sequence):
        if (h.is_transactional and entry.current_txn_first_offset < 0
                and h.base_sequence <= entry.last_seq):
            # Sequences of the producer's ended transaction used again (librdkafka
            # purges a batch queued for retry on abort_transaction and hands its
            # numbers to the next transaction, TV1 keeping the epoch; `find_duplicate`).
            # OUT_OF_ORDER_SEQUENCE for the head of the queue is fatal to librdkafka
            # ("sequence desynchronization"); UNKNOWN_PRODUCER_ID is an abortable error
            # with an epoch bump, after which the transaction is sent again at sequence
            # 0 (KIP-360; Java's client does the same). Nothing is written.
            raise LogError(E.unknown_producer_id,
                           f"producer {h.producer_id} reuses sequences {h.base_sequence}.."
                           f"{h.last_sequence} of its ended transaction (last sequence "
                           f"{entry.last_seq}): bump the epoch")
        raise LogError(E.out_of_order_sequence_number,
                       f"producer {h.producer_id} expected sequence "
                       f"{(entry.last_seq + 1) if entry.last_seq < INT32_MAX else 0}, "
                       f"got {h.base_sequence}")


def _check_txn_state(entry: ProducerEntry | None, h: BatchHeader, offset: int) -> None:
    if entry is not None and entry.current_txn_first_offset >= 0 and not h.is_transactional:
        raise LogError(E.invalid_txn_state,
                       f"expected a transactional write from producer {h.producer_id} at "
                       f"offset {offset}: its transaction from offset "
                       f"{entry.current_txn_first_offset} is still open")


def _check_marker(entry: ProducerEntry | None, h: BatchHeader, marker: EndTxnMarker,
                  transaction_version: int = 0) -> None:
    """Kafka's fencing of markers. Transaction version 0/1: an equal epoch is fine.
    Version 2: the coordinator bumped the epoch before writing the marker, so one that
    is not above the producer's is late or a duplicate and would fold two transactions
    into one epoch; the exception is an equal epoch with nothing open, a marker re-sent
    after it landed (coordinator restart, lost answer: Kafka's KAFKA-19999 rule)."""
    if entry is None:
        return
    if transaction_version >= 2:
        stale = h.producer_epoch <= entry.epoch and not (
            h.producer_epoch == entry.epoch and entry.current_txn_first_offset < 0)
    else:
        stale = h.producer_epoch < entry.epoch
    if stale:
        relation = "not above" if transaction_version >= 2 else "older than"
        raise LogError(E.invalid_producer_epoch,
                       f"marker for producer {h.producer_id} has epoch {h.producer_epoch}, "
                       f"{relation} current epoch {entry.epoch} (TV{transaction_version})")
    if marker.coordinator_epoch < entry.coordinator_epoch:
        raise LogError(E.transaction_coordinator_fenced,
                       f"marker for producer {h.producer_id} has coordinator epoch "
                       f"{marker.coordinator_epoch}, older than {entry.coordinator_epoch}")


def _set_epoch(entry: ProducerEntry, epoch: int) -> None:
    """A new epoch restarts sequences; the open transaction and coordinator epoch stay."""
    if epoch != entry.epoch:
        entry.epoch = epoch
        entry.batches.clear()


def _apply(entry: ProducerEntry | None, h: BatchHeader, base_offset: int) -> ProducerEntry:
    """Record a data batch (`entry` is changed in place); opens a transaction if needed.
    On every idempotent append, hence the inlined checks."""
    if entry is None:
        entry = ProducerEntry(h.producer_id, h.producer_epoch)
    elif h.producer_epoch != entry.epoch:
        _set_epoch(entry, h.producer_epoch)
    if h.base_sequence >= 0:
        entry.batches.append(BatchMetadata(h.base_sequence, h.last_sequence, base_offset,
                                           base_offset + h.last_offset_delta, h.max_timestamp))
    entry.last_timestamp = h.max_timestamp
    if entry.current_txn_first_offset < 0 and h.attributes & TRANSACTIONAL_BIT:
        entry.current_txn_first_offset = base_offset
    return entry


def _apply_marker(entry: ProducerEntry | None, producer_id: int, producer_epoch: int,
                  marker: EndTxnMarker, timestamp: int) -> ProducerEntry:
    """Record a marker: the transaction (if any) is over (`entry` is changed in place)."""
    if entry is None:
        entry = ProducerEntry(producer_id, producer_epoch)
    else:
        _set_epoch(entry, producer_epoch)
    entry.coordinator_epoch = marker.coordinator_epoch
    entry.current_txn_first_offset = -1
    entry.last_timestamp = timestamp
    return entry


class ProducerStateManager:
    """Producer id -> entry for one partition. Batches with producerId -1 bypass it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        #: First offset -> producer id of every open transaction (one per producer).
        self._ongoing: dict[int, int] = {}
        self._first_unstable = -1

    # ---- transactions -------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int:
        """First offset of the oldest open transaction, -1 if none (the LSO bound)."""
        return self._first_unstable

    @property
    def ongoing_transactions(self) -> dict[int, int]:
        """First offset -> producer id of the open transactions (a copy)."""
        return dict(self._ongoing)

    def _refresh_unstable(self) -> None:
        self._first_unstable = min(self._ongoing) if self._ongoing else -1

    def _rebuild_ongoing(self) -> None:
        self._ongoing = {e.current_txn_first_offset: pid for pid, e in self.producers.items()
                         if e.current_txn_first_offset >= 0}
        self._refresh_unstable()

    def complete_txn(self, producer_id: int, producer_epoch: int, marker: EndTxnMarker,
                     offset: int, timestamp: int) -> AbortedTxn | None:
        """Apply a marker written at `offset` (already validated by `check_all`). Returns
        the aborted-index entry when it aborted an open transaction, else None (a commit,
        or a marker with nothing open: Kafka indexes only non-empty transactions)."""
        entry = self.producers.get(producer_id)
        first = entry.current_txn_first_offset if entry is not None else -1
        aborted = None
        if first >= 0:
            self._ongoing.pop(first, None)
            self._refresh_unstable()
            if not marker.commit:
                # The LSO once this abort is written: the oldest transaction still open
                # (another producer's), or just past the marker.
                lso = self._first_unstable if self._first_unstable >= 0 else offset + 1
                aborted = AbortedTxn(producer_id, first, offset, lso)
        self.producers[producer_id] = _apply_marker(entry, producer_id, producer_epoch,
                                                    marker, timestamp)
        return aborted

    def check(self, header: BatchHeader) -> DuplicateBatch | None:
        """Validate one batch against the current state: the original offsets if it is a
        retry, None if it may be appended; LogError (45, 47) otherwise."""
        if header.producer_id < 0:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is not None:
            duplicate = entry.find_duplicate(header)
            if duplicate is not None:
                return duplicate
        _check_sequence(entry, header)
        _check_txn_state(entry, header, -1)
        return None

    def check_all(self, headers: Iterable[BatchHeader], first_offset: int,
                  markers: dict[int, EndTxnMarker | None] | None = None,
                  transaction_version: int = 0) -> DuplicateBatch | None:
        """`check` for a request's batches in order, each against the state the earlier
        ones would leave (nothing is changed); the first duplicate wins, as in Kafka.
        `markers` (the broker's own writes only) maps the index of each control batch to
        its parsed marker; None there means a control batch that ends nothing."""
        staged: dict[int, ProducerEntry] = {}
        offset = first_offset
        for i, h in enumerate(headers):
            pid = h.producer_id
            if pid >= 0:
                committed = self.producers.get(pid)
                entry = staged.get(pid, committed)
                if markers is not None and h.is_control:
                    marker = markers.get(i)
                    if marker is not None:
                        _check_marker(entry, h, marker, transaction_version)
                        staged[pid] = _apply_marker(entry.copy() if entry else None, pid,
                                                    h.producer_epoch, marker, h.max_timestamp)
                else:
                    if committed is not None:
                        duplicate = committed.find_duplicate(h)
                        if duplicate is not None:
                            return duplicate
                    _check_sequence(entry, h)
                    if entry is not None and entry.current_txn_first_offset >= 0:
                        _check_txn_state(entry, h, offset)
                    staged[pid] = _apply(entry.copy() if entry else None, h, offset)
            offset += h.last_offset_delta + 1
        return None

    def update(self, header: BatchHeader, base_offset: int) -> None:
        """Record a data batch that was appended at `base_offset` (markers go through
        `complete_txn`)."""
        pid = header.producer_id
        if pid < 0:
            return
        entry = self.producers.get(pid)
        was_open = entry is not None and entry.current_txn_first_offset >= 0
        self.producers[pid] = entry = _apply(entry, header, base_offset)
        if not was_open and entry.current_txn_first_offset >= 0:
            self._ongoing[base_offset] = pid
            if self._first_unstable < 0:
                self._first_unstable = base_offset

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget producers whose every batch now lies below the log start (Kafka): an open
        transaction of theirs has nothing left in the log to hold the LSO back."""
        gone = [pid for pid, e in self.producers.items()
                if e.batches and e.last_offset < log_start_offset]
        for pid in gone:
            del self.producers[pid]
        if gone and self._ongoing:
            self._rebuild_ongoing()

    def remove_expired(self, now_ms: int, expiration_ms: int) -> None:
        """Drop producers idle longer than producer.id.expiration.ms."""
        gone = [pid for pid, e in self.producers.items()
                if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in gone:
            del self.producers[pid]

    def states(self) -> list[ProducerStateInfo]:
        return [ProducerStateInfo(e.producer_id, e.epoch, e.last_seq, e.last_timestamp,
                                  e.coordinator_epoch, e.current_txn_first_offset)
                for e in self.producers.values()]

    # ---- snapshots ----------------------------------------------------------------------

    def snapshot_files(self) -> list[tuple[int, Path]]:
        """(offset, path) of the snapshots in the directory, oldest first."""
        found = []
        for path in self.directory.glob(f"*{SNAPSHOT_SUFFIX}"):
            stem = path.name[: -len(SNAPSHOT_SUFFIX)]
            if stem.isdigit():
                found.append((int(stem), path))
        return sorted(found)

    def snapshot(self, offset: int, *, sync: bool = False) -> Path:
        """Persist the state as of `offset` (the log end), then prune older snapshots.
        With `sync`: temp file, fsync, rename. Without (a clean stop, which syncs the
        whole filesystem once afterwards): written in place, no rename (a rename costs
        ~1 ms on ext4 here, a minute at 100,000 partitions); a crash or power loss may
        leave a torn file, which `load_latest` skips for an older one and more replay."""
        path = self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"
        doc = {"version": SNAPSHOT_VERSION, "offset": offset, "producers": [
            {"producer_id": e.producer_id, "epoch": e.epoch, "last_timestamp": e.last_timestamp,
             "coordinator_epoch": e.coordinator_epoch,
             "current_txn_first_offset": e.current_txn_first_offset,
             "batches": [list(b) for b in e.batches]}
            for e in self.producers.values()]}
        tmp = path.with_name(path.name + ".tmp") if sync else path
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, json.dumps(doc, separators=(",", ":")).encode())
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if sync:
            os.replace(tmp, path)
        for _, old in self.snapshot_files()[:-SNAPSHOTS_KEPT]:
            old.unlink(missing_ok=True)
        return path

    def load(self, path: Path) -> int:
        """Replace the state with a snapshot's; returns the offset it was taken at.
        ValueError for a snapshot of another version (see SNAPSHOT_VERSION)."""
        doc = json.loads(path.read_text())
        if doc.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"{path}: snapshot version {doc.get('version')} is not "
                             f"{SNAPSHOT_VERSION}")
        self.producers = {}
        self._ongoing = {}
        for p in doc["producers"]:
            entry = ProducerEntry(p["producer_id"], p["epoch"],
                                  deque((BatchMetadata(*b) for b in p["batches"]),
                                        maxlen=BATCHES_RETAINED),
                                  p["last_timestamp"], p["coordinator_epoch"],
                                  p["current_txn_first_offset"])
            self.producers[entry.producer_id] = entry
        self._rebuild_ongoing()
        return int(doc["offset"])

    def load_latest(self, log_end_offset: int) -> int | None:
        """Load the newest readable snapshot not beyond the log end; returns its offset,
        or None (state cleared) when there is none and the whole log must be replayed."""
        for offset, path in reversed(self.snapshot_files()):
            if offset > log_end_offset:
                path.unlink(missing_ok=True)  # describes offsets recovery truncated away
                continue
            try:
                return self.load(path)
            except (OSError, ValueError, KeyError, TypeError):
                path.unlink(missing_ok=True)
        self.producers = {}
        self._rebuild_ongoing()
        return None

    def delete_snapshots_below(self, offset: int) -> None:
        """Drop snapshots older than the log start, keeping the newest one regardless."""
        files = self.snapshot_files()
        for snap_offset, path in files[:-1]:
            if snap_offset < offset:
                path.unlink(missing_ok=True)
