"""Transactions in the partition log: LSO, markers, the aborted-transaction index,
recovery, snapshots, retention and the cleaner."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import struct
import time

import pytest
from kafka.record import MemoryRecords
from kio.schema.errors import ErrorCode as E

from headwater.config import LogConfig
from headwater.log import swap
from headwater.log.cleaner import LogCleaner
from headwater.log.partition_log import PartitionLog
from headwater.log.producer_state import SNAPSHOT_VERSION
from headwater.log.segment import LogSegment
from headwater.log.txn_index import ENTRY_SIZE, AbortedTxn
from headwater.records.batch import build_batch, decode_records, iter_batches, parse_header
from headwater.records.control import build_marker, parse_marker
from headwater.storage.errors import LogError
from headwater.storage.waiters import PartitionWaiters
from tests.unit.log.crash import Crash, clean_until_crash

A, B, C = 100, 200, 300


class Producer:
    """A transactional producer writing to one log: tracks its own sequence numbers."""

    def __init__(self, plog: PartitionLog, pid: int, epoch: int = 0) -> None:
        self.plog, self.pid, self.epoch, self.seq = plog, pid, epoch, 0

    def batch(self, n: int = 1, transactional: bool = True, size: int = 20) -> bytes:
        records = [(b"k%d" % i, b"v" * size, [], 1000 + i) for i in range(n)]
        data = build_batch(records, producer_id=self.pid, producer_epoch=self.epoch,
                           base_sequence=self.seq, is_transactional=transactional)
        self.seq += n
        return data

    def send(self, n: int = 1, transactional: bool = True, size: int = 20) -> int:
        """Append one batch; returns its base offset."""
        data = self.batch(n, transactional, size)
        try:
            return self.plog.append(data, 0).base_offset
        except LogError:
            self.seq -= n
            raise

    def end(self, commit: bool, coordinator_epoch: int = 0, epoch: int | None = None) -> int:
        return self.plog.append_marker(self.pid, self.epoch if epoch is None else epoch,
                                       commit, coordinator_epoch, 5000)


def plain(plog: PartitionLog, n: int = 1) -> int:
    records = [(b"p", b"plain", [], 1000) for _ in range(n)]
    return plog.append(build_batch(records), 0).base_offset


def code_of(fn) -> int:
    with pytest.raises(LogError) as exc:
        fn()
    return exc.value.code


def aborted_entries(plog: PartitionLog) -> list[AbortedTxn]:
    return [t for s in plog.segments for t in s.txn_index]


# ---- LSO and transaction state ------------------------------------------------------


def test_lso_moves_with_begin_commit_abort_across_producers(open_log) -> None:
    plog = open_log()
    a, b, c = Producer(plog, A), Producer(plog, B), Producer(plog, C)
    plain(plog, 2)
    assert plog.last_stable_offset == plog.high_watermark == 2
    assert a.send(2) == 2
    assert (plog.last_stable_offset, plog.high_watermark) == (2, 4)
    assert b.send() == 4
    assert a.send() == 5  # continues A's transaction: its first offset stays 2
    assert plog.last_stable_offset == 2
    assert a.end(commit=True) == 6
    assert plog.last_stable_offset == 4  # B's transaction still holds it back
    assert c.send() == 7
    assert b.end(commit=False) == 8
    assert plog.last_stable_offset == 7
    assert c.end(commit=True) == 9
    assert plog.last_stable_offset == plog.high_watermark == 10
    assert a.send() == 10  # A's next transaction
    assert plog.last_stable_offset == 10 and plog.high_watermark == 11
    states = {s.producer_id: s for s in plog.producer_states()}
    assert states[A].current_txn_start_offset == 10
    assert states[B].current_txn_start_offset == states[C].current_txn_start_offset == -1


def test_plain_batch_during_open_transaction_is_invalid_txn_state(open_log) -> None:
    plog = open_log()
    a = Producer(plog, A)
    a.send()
    assert code_of(lambda: a.send(transactional=False)) == E.invalid_txn_state
    assert plog.log_end_offset == 1
    a.end(commit=True)
    assert a.send(transactional=False) == 2  # idempotent writes are fine again


def test_transactional_then_plain_batch_in_one_request_writes_nothing(open_log) -> None:
    plog = open_log()
    a = Producer(plog, A)
    data = a.batch() + a.batch(transactional=False)
    assert code_of(lambda: plog.append(data, 0)) == E.invalid_txn_state
    assert plog.log_end_offset == 0 and plog.last_stable_offset == 0
    assert plog.producer_states() == []


def test_retried_transactional_batch_is_a_duplicate(open_log) -> None:
    plog = open_log()
    a = Producer(plog, A)
    data = a.batch(3)
    plog.append(data, 0)
    retry = plog.append(data, 0)
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (0, 2)
    assert plog.log_end_offset == 3 and plog.last_stable_offset == 0


@pytest.mark.parametrize("commit", [False, True])
def test_a_batch_repeating_one_of_an_ended_transaction_asks_for_an_epoch_bump(
        open_log, commit) -> None:
    """librdkafka purges a batch queued for retry on abort_transaction and hands its
    sequence numbers to the next transaction (same epoch under TV1). Its new batch
    matched the old one's sequences and got the old offsets back, which the marker had
    aborted: the next transaction committed without its records (the chaos campaign's
    torn transaction). Only a batch of the open transaction is a retry. Answered
    OUT_OF_ORDER_SEQUENCE, librdkafka failed fatally (the head of its queue: "sequence
    desynchronization", a CI campaign's copier); UNKNOWN_PRODUCER_ID is an abortable
    error with an epoch bump. Nothing is written either way."""
    plog = open_log()
    a = Producer(plog, A)
    first = a.batch(3)
    plog.append(first, 0)
    a.end(commit)
    a.seq = 0  # the next transaction reuses sequences 0..2
    assert code_of(lambda: plog.append(a.batch(3), 0)) == E.unknown_producer_id
    a.seq = 1  # overlapping them, not repeating one
    assert code_of(lambda: plog.append(a.batch(4), 0)) == E.unknown_producer_id
    assert plog.log_end_offset == 4 and plog.last_stable_offset == 4
    a.seq = 5  # a gap ahead of them stays out of order
    assert code_of(lambda: plog.append(a.batch(1), 0)) == E.out_of_order_sequence_number


def test_a_retry_within_the_open_transaction_is_still_a_duplicate(open_log) -> None:
    plog = open_log()
    a = Producer(plog, A)
    a.send(2)
    a.end(True)
    second = a.batch(2)
    plog.append(second, 0)
    a.send(1)
    retry = plog.append(second, 0)
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (3, 4)
    assert plog.log_end_offset == 6 and plog.last_stable_offset == 3


def test_non_idempotent_transactional_batch_is_not_tracked(open_log) -> None:
    """Kafka tracks transactions by producer id; a batch without one opens none."""
    plog = open_log()
    plog.append(build_batch([(b"k", b"v", [], 0)], is_transactional=True), 0)
    assert plog.last_stable_offset == 1 and plog.producer_states() == []


# ---- markers ------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_marker_is_kafkas_control_batch(open_log, commit) -> None:
    plog = open_log()
    Producer(plog, A, epoch=3).send(2)
    offset = plog.append_marker(A, 3, commit, 17, 123_456)
    assert offset == 2 and plog.high_watermark == 3
    raw = plog.read(offset, 1 << 20)
    h = parse_header(raw)
    assert (h.base_offset, h.records_count, h.last_offset_delta) == (2, 1, 0)
    assert h.is_control and h.is_transactional and h.attributes == 0x30
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (A, 3, -1)
    [record] = decode_records(raw)
    assert record.key == struct.pack(">hh", 0, 1 if commit else 0)
    assert record.value == struct.pack(">hi", 0, 17)
    assert record.timestamp == 123_456 and record.headers == []
    # An independent decoder (kafka-python) reads the same thing.
    batch = MemoryRecords(raw).next_batch()
    assert batch.is_control_batch and batch.is_transactional and batch.producer_id == A
    [control] = list(batch)
    assert (control.commit, control.abort, control.offset) == (commit, not commit, 2)
    assert parse_marker(raw) == (commit, 17)


def test_marker_round_trip_helpers() -> None:
    raw = build_marker(9, 2, False, 5, 77)
    assert parse_marker(raw) == (False, 5)
    assert parse_marker(build_marker(9, 2, True, -1, 77)) == (True, -1)


def test_marker_with_older_producer_epoch_is_fenced(open_log) -> None:
    plog = open_log()
    a = Producer(plog, A, epoch=5)
    a.send()
    assert code_of(lambda: a.end(commit=True, epoch=4)) == E.invalid_producer_epoch
    assert plog.log_end_offset == 1 and plog.last_stable_offset == 0
    assert a.end(commit=True, epoch=5) == 1  # the same epoch is fine (Kafka TV0/1)


def test_tv2_marker_must_carry_a_bumped_epoch(open_log) -> None:
    """Transaction version 2: the coordinator bumps the epoch before writing the marker,
    so a marker at the producer's own epoch is late (Kafka's ProducerAppendInfo rule);
    the same bumped marker again, with nothing open, is a re-send and is written."""
    plog = open_log()
    a = Producer(plog, A, epoch=3)
    a.send()

    def tv2(epoch: int, commit: bool = True) -> int:
        return plog.append_marker(A, epoch, commit, 0, 5000, transaction_version=2)

    assert code_of(lambda: tv2(3)) == E.invalid_producer_epoch
    assert code_of(lambda: tv2(2)) == E.invalid_producer_epoch
    assert plog.last_stable_offset == 0
    assert tv2(4) == 1  # the bump: ends the transaction
    assert plog.last_stable_offset == 2
    assert tv2(4) == 2  # re-sent after a coordinator restart: nothing open, accepted
    assert code_of(lambda: a.send()) == E.invalid_producer_epoch  # epoch 3 is old
    a.epoch, a.seq = 4, 0
    a.send()  # the next transaction at the bumped epoch
    assert code_of(lambda: tv2(4, commit=False)) == E.invalid_producer_epoch
    assert tv2(5, commit=False) == 4
    assert plog.aborted_transactions(0, 5) == [(A, 3)]


def test_marker_with_newer_epoch_ends_the_transaction_and_fences_old_writes(open_log) -> None:
    """The coordinator bumps the epoch when it aborts a timed-out transaction."""
    plog = open_log()
    a = Producer(plog, A, epoch=1)
    a.send()
    assert a.end(commit=False, epoch=2) == 1
    assert plog.last_stable_offset == 2
    assert code_of(lambda: a.send()) == E.invalid_producer_epoch
    [state] = plog.producer_states()
    assert (state.producer_epoch, state.last_sequence, state.current_txn_start_offset) == \
        (2, -1, -1)


def test_marker_from_an_older_coordinator_epoch_is_fenced(open_log) -> None:
    plog = open_log()
    a = Producer(plog, A)
    a.send()
    a.end(commit=True, coordinator_epoch=7)
    a.send()
    assert code_of(lambda: a.end(commit=True, coordinator_epoch=6)) == \
        E.transaction_coordinator_fenced
    assert plog.last_stable_offset == 2
    assert a.end(commit=True, coordinator_epoch=7) == 3
    [state] = plog.producer_states()
    assert state.coordinator_epoch == 7


def test_marker_without_open_transaction_is_written_and_harmless(open_log) -> None:
    plog = open_log()
    a = Producer(plog, A)
    a.send()
    assert a.end(commit=False) == 1
    assert a.end(commit=False) == 2  # coordinator retrying after a crash
    assert plog.append_marker(B, 0, False, 0, 0) == 3  # a producer never seen here
    assert plog.last_stable_offset == plog.high_watermark == 4
    assert aborted_entries(plog) == [AbortedTxn(A, 0, 1, 2)]
    assert plog.aborted_transactions(0, 4) == [(A, 0)]


def test_markers_wake_long_polls(open_log) -> None:
    plog = open_log()
    a = Producer(plog, A)
    a.send()
    seen: list[int] = []
    plog.subscribe_append(lambda: seen.append(plog.last_stable_offset))
    a.end(commit=True)
    assert seen == [2]


def test_clients_still_cannot_write_markers(open_log) -> None:
    plog = open_log()
    Producer(plog, A).send()
    assert code_of(lambda: plog.append(build_marker(A, 0, True, 0, 0), 0)) == \
        E.invalid_record
    assert plog.last_stable_offset == 0


def test_internal_append_of_a_marker_batch_ends_the_transaction(open_log) -> None:
    plog = open_log()
    Producer(plog, A).send(2)
    plog.append(build_marker(A, 0, False, 0, 9), 0, origin_client=False)
    assert plog.last_stable_offset == 3 and plog.aborted_transactions(0, 3) == [(A, 0)]


# ---- the aborted-transaction index ----------------------------------------------------


def test_aborted_index_entries_and_file_format(open_log) -> None:
    plog = open_log()
    a, b = Producer(plog, A), Producer(plog, B)
    a.send(2)  # 0-1
    b.send()  # 2
    a.end(commit=False)  # 3: LSO after it is B's first offset
    b.end(commit=False)  # 4: nothing else open
    a.send()  # 5
    a.end(commit=True)  # 6: commits are not indexed
    assert aborted_entries(plog) == [AbortedTxn(A, 0, 3, 2), AbortedTxn(B, 2, 4, 5)]
    [segment] = plog.segments
    raw = segment.txn_index.path.read_bytes()
    assert len(raw) == 2 * ENTRY_SIZE == 68
    assert struct.unpack(">hqqqq", raw[:ENTRY_SIZE]) == (0, A, 0, 3, 2)
    assert struct.unpack(">hqqqq", raw[ENTRY_SIZE:]) == (0, B, 2, 4, 5)


def test_no_txnindex_file_until_an_abort(open_log) -> None:
    plog = open_log()
    a = Producer(plog, A)
    a.send()
    a.end(commit=True)
    assert not list(plog.path.glob("*.txnindex"))


def test_aborted_transactions_overlap_ranges(open_log) -> None:
    plog = open_log()
    a, b = Producer(plog, A), Producer(plog, B)
    plain(plog, 2)  # 0-1
    a.send(3)  # 2-4
    a.end(commit=False)  # 5
    plain(plog)  # 6
    b.send()  # 7
    a.send()  # 8
    b.end(commit=False)  # 9
    a.end(commit=False)  # 10
    assert plog.aborted_transactions(0, 2) == []
    assert plog.aborted_transactions(0, 3) == [(A, 2)]
    assert plog.aborted_transactions(5, 6) == [(A, 2)]  # the marker itself is in range
    assert plog.aborted_transactions(6, 7) == []
    assert plog.aborted_transactions(6, 8) == [(B, 7)]
    assert plog.aborted_transactions(0, 11) == [(A, 2), (B, 7), (A, 8)]
    assert plog.aborted_transactions(9, 11) == [(B, 7), (A, 8)]
    assert plog.aborted_transactions(11, 11) == []


def test_transaction_spanning_segments_is_found_from_its_start(open_log) -> None:
    plog = open_log()
    a = Producer(plog, A)
    a.send()
    for _ in range(30):  # several rolls (1 KiB segments)
        plain(plog, 3)
    assert len(plog.segments) > 3
    marker = a.end(commit=False)
    last = plog.segments[-1]
    assert [t.first_offset for t in last.txn_index] == [0]
    assert all(len(s.txn_index) == 0 for s in plog.segments[:-1])
    assert plog.aborted_transactions(0, 1) == [(A, 0)]
    assert plog.aborted_transactions(50, 60) == [(A, 0)]
    assert plog.aborted_transactions(marker + 1, marker + 1) == []


def test_search_stops_at_an_entry_whose_lso_covers_the_range(open_log) -> None:
    plog = open_log()
    a, b = Producer(plog, A), Producer(plog, B)
    a.send()  # 0
    a.end(commit=False)  # 1, LSO 2 recorded
    first_segment = plog.segments[0]
    for _ in range(30):
        plain(plog, 3)
    b.send()
    b.end(commit=False)
    # [0, 2) is settled by the first segment's entry: later segments are not consulted.
    found: list[AbortedTxn] = []
    assert first_segment.txn_index.collect(0, 2, found) is True
    assert plog.aborted_transactions(0, 2) == [(A, 0)]


# ---- recovery and snapshots -------------------------------------------------------------


def build_history(plog: PartitionLog) -> tuple[Producer, Producer]:
    """Aborted and committed transactions over several segments, B left open."""
    a, b = Producer(plog, A), Producer(plog, B)
    for i in range(12):
        a.send(2)
        plain(plog, 2)
        a.end(commit=i % 2 == 0)
    b.send()
    for _ in range(3):
        plain(plog, 2)
    a.send()
    a.end(commit=False)
    return a, b


def test_unclean_reopen_rebuilds_lso_and_aborted_list(open_log) -> None:
    plog = open_log()
    a, b = build_history(plog)
    lso, hw = plog.last_stable_offset, plog.high_watermark
    assert lso < hw and len(plog.segments) > 2
    aborted = plog.aborted_transactions(0, hw)
    entries = aborted_entries(plog)
    for path in plog.path.glob("*.snapshot"):  # lose all producer state...
        path.unlink()
    for path in plog.path.glob("*.txnindex"):  # ...and every aborted index
        path.unlink()

    again = open_log(clean_shutdown=False)
    assert (again.last_stable_offset, again.high_watermark) == (lso, hw)
    assert again.aborted_transactions(0, hw) == aborted
    assert aborted_entries(again) == entries
    b.plog = again
    b.end(commit=False)
    assert again.last_stable_offset == again.high_watermark


def test_unclean_reopen_with_stale_snapshot_and_lost_index_entry(open_log) -> None:
    """kill -9 between writing a marker and its index entry: the replay after the newest
    snapshot (taken at the last roll) adds the entry back."""
    plog = open_log()
    a, _ = build_history(plog)
    entries = aborted_entries(plog)
    active = plog.segments[-1]
    assert len(active.txn_index) >= 1
    with open(active.txn_index.path, "r+b") as f:  # the last entry never made it
        f.truncate((len(active.txn_index) - 1) * ENTRY_SIZE)
    lso = plog.last_stable_offset

    again = open_log(clean_shutdown=False)
    assert aborted_entries(again) == entries
    assert again.last_stable_offset == lso


def test_torn_marker_is_truncated_with_its_index_entry(open_log) -> None:
    plog = open_log()
    a = Producer(plog, A)
    plain(plog)
    a.send(2)
    marker = a.end(commit=False)
    segment = plog.segments[-1]
    pos = segment.find_position(marker)[0]
    os.truncate(segment.log_path, pos + 10)  # the marker batch is torn

    again = open_log(clean_shutdown=False)
    assert again.log_end_offset == marker
    assert again.last_stable_offset == 1  # A's transaction is open again
    assert aborted_entries(again) == [] and again.aborted_transactions(0, marker) == []


def test_snapshot_round_trip_keeps_open_transactions(open_log) -> None:
    plog = open_log()
    a, b = build_history(plog)
    lso, entries = plog.last_stable_offset, aborted_entries(plog)
    plog.close()
    [*_, newest] = sorted(plog.path.glob("*.snapshot"))
    doc = json.loads(newest.read_text())
    assert doc["version"] == SNAPSHOT_VERSION == 2
    assert {p["producer_id"]: p["current_txn_first_offset"] for p in doc["producers"]} == \
        {A: -1, B: lso}

    again = open_log(clean_shutdown=True)
    assert again.last_stable_offset == lso and aborted_entries(again) == entries
    assert again.producer_state.ongoing_transactions == {lso: B}
    b.plog = again
    assert code_of(lambda: b.send(transactional=False)) == E.invalid_txn_state


def test_version_1_snapshot_is_not_trusted(open_log) -> None:
    """Snapshots from before transactions were tracked say nothing is open."""
    plog = open_log()
    Producer(plog, A).send()
    plain(plog)
    plog.close()
    [snapshot] = plog.path.glob("*.snapshot")
    doc = json.loads(snapshot.read_text())
    doc["version"] = 1
    doc["producers"][0]["current_txn_first_offset"] = -1
    snapshot.write_text(json.dumps(doc))

    again = open_log(clean_shutdown=True)
    assert again.last_stable_offset == 0  # replayed from the log instead


# ---- retention, DeleteRecords, the cleaner ------------------------------------------------


def test_segment_deletion_drops_index_entries(open_log, config) -> None:
    plog = open_log()
    a = Producer(plog, A)
    for _ in range(20):
        a.send(2)
        plain(plog, 3)
        a.end(commit=False)
    assert len(plog.segments) > 3
    files = sorted(plog.path.glob("*.txnindex"))
    before = aborted_entries(plog)
    cut = plog.segments[2].base_offset
    plog.delete_records_before(cut)
    assert plog.segments[0].base_offset == cut
    assert sorted(plog.path.glob("*.txnindex")) == [f for f in files if int(f.stem) >= cut]
    assert aborted_entries(plog) == [t for t in before if t.last_offset >= cut]
    assert all(first >= cut - 6 for _, first in plog.aborted_transactions(cut, 10**6))

    plog.update_config(dataclasses.replace(config, retention_bytes=0))
    plog.apply_retention(0)
    assert aborted_entries(plog) == [] and not list(plog.path.glob("*.txnindex"))


def test_delete_records_past_a_producers_data_releases_its_transaction(open_log) -> None:
    plog = open_log()
    Producer(plog, A).send()
    plain(plog, 3)
    assert plog.last_stable_offset == 0
    plog.delete_records_before(2)
    assert plog.last_stable_offset == plog.high_watermark == 4


COMPACT = LogConfig(segment_bytes=1024, index_interval_bytes=128, retention_ms=-1,
                    cleanup_policy="compact", delete_retention_ms=60_000)


def compacted_history(plog: PartitionLog) -> None:
    a = Producer(plog, A)
    for i in range(15):
        plog.append(build_batch([(b"k%d" % (i % 3), b"x" * 40, [], 1000)]), 0)
        a.send(2)
        a.end(commit=i % 3 == 1)
        plog.roll(0)  # small segments, so the cleaner merges runs of them
    plain(plog)
    plog.roll(0)
    plain(plog)


def committed_view(plog: PartitionLog) -> dict[bytes | None, bytes | None]:
    """Key -> latest value as a read_committed consumer sees the log (Kafka's rules)."""
    data = plog.read(0, 1 << 30)
    aborted = sorted(plog.aborted_transactions(0, plog.high_watermark), key=lambda a: a[1])
    active: set[int] = set()
    view: dict[bytes | None, bytes | None] = {}
    for pos, h in iter_batches(data):
        while aborted and aborted[0][1] <= h.last_offset:
            active.add(aborted.pop(0)[0])
        batch = data[pos:pos + h.size]
        if h.is_control:
            marker = parse_marker(batch)
            if marker is not None and not marker.commit:
                active.discard(h.producer_id)
        elif not (h.is_transactional and h.producer_id in active):
            view.update((r.key, r.value) for r in decode_records(batch))
    return view


def test_cleaner_compacts_committed_drops_aborted_then_old_markers(open_log) -> None:
    plog = open_log(COMPACT)
    compacted_history(plog)  # 15 transactions: 5 committed, 10 aborted
    before = plog.read(0, 1 << 30)
    view = committed_view(plog)
    markers = [h.base_offset for _, h in iter_batches(before) if h.is_control]
    entries = aborted_entries(plog)
    segments = len(plog.segments)

    LogCleaner(lambda: 0).clean(plog, 0)  # markers are younger than delete.retention.ms
    assert len(plog.segments) < segments  # runs were merged
    after = plog.read(0, 1 << 30)
    assert committed_view(plog) == view
    assert [h.base_offset for _, h in iter_batches(after) if h.is_control] == markers
    txn_data = [h for _, h in iter_batches(after) if h.is_transactional and not h.is_control]
    # the last committed transaction; of the aborted ones only the producer's last batch
    # stays, emptied, for its producer state (so its marker must stay too)
    assert [h.records_count for h in txn_data] == [2, 0]
    assert aborted_entries(plog) == entries  # an entry whose data went filters nothing

    later = int(time.time() * 1000) + 10**9  # past every segment's delete horizon
    LogCleaner(lambda: later).clean(plog, later)
    assert committed_view(plog) == view
    left = [h.base_offset for _, h in iter_batches(plog.read(0, 1 << 30)) if h.is_control]
    # the marker of the retained transaction, and the producer's last batch
    assert left == [txn_data[0].last_offset + 1, markers[-1]]
    # only the aborted transaction whose marker is left keeps its index entry
    assert aborted_entries(plog) == [e for e in entries if e.last_offset == markers[-1]]
    assert [h.records_count for _, h in iter_batches(plog.read(0, 1 << 30))
            if h.is_transactional and not h.is_control] == [2, 0]

    again = PartitionLog.open(plog.path, COMPACT, "topic", 0, 0)  # files agree too
    assert aborted_entries(again) == aborted_entries(plog)
    assert committed_view(again) == view
    assert again.last_stable_offset == again.high_watermark  # no transaction looks open
    again.close()


def die_installing_the_log(monkeypatch, plog: PartitionLog) -> None:
    """A clean that dies after `swap.install` renamed the indexes, before the log."""
    real_replace = os.replace

    def replace(src, dst):
        if str(src).endswith(".log.swap"):
            raise Crash
        real_replace(src, dst)

    monkeypatch.setattr(swap.os, "replace", replace)
    monkeypatch.setattr(swap, "discard", lambda *a: None)
    with pytest.raises(Crash):
        LogCleaner(lambda: 0).clean(plog, 0)
    monkeypatch.undo()


@pytest.mark.parametrize("when", [
    "committed",  # the swap file exists, no old segment deleted yet
    "first-deleted",  # ... and the old first segment (with its index) is gone
    "indexes-installed",  # the cleaned indexes are in place, the log not yet renamed
    "installed",  # all renamed, the segment not yet opened
])
def test_cleaner_crash_keeps_the_merged_aborted_index(open_log, monkeypatch, when) -> None:
    plog = open_log(COMPACT)
    compacted_history(plog)
    entries = aborted_entries(plog)
    aborted = plog.aborted_transactions(0, plog.high_watermark)
    assert sum(1 for s in plog.segments[:3] if len(s.txn_index)) >= 2  # a merge of indexes
    if when == "indexes-installed":
        die_installing_the_log(monkeypatch, plog)
    elif when == "installed":
        clean_until_crash(monkeypatch, plog, LogSegment, "open", 1)
    else:
        clean_until_crash(monkeypatch, plog, LogSegment, "delete", 1 if when == "committed" else 2)
    assert bool(list(plog.path.glob("*.log.swap"))) == (when != "installed")
    for segment in plog.segments:
        segment.close()

    again = open_log(COMPACT, clean_shutdown=False)
    assert not list(plog.path.glob("*.cleaned")) and not list(plog.path.glob("*.swap"))
    assert aborted_entries(again) == entries
    assert again.aborted_transactions(0, again.high_watermark) == aborted
    LogCleaner(lambda: 0).clean(again, 0)
    assert aborted_entries(again) == entries


def test_marker_wakes_a_parked_fetch(open_log) -> None:
    """What a read_committed long poll relies on: the LSO moves by an append."""
    plog = open_log()
    a = Producer(plog, A)
    a.send()

    async def park_then_commit() -> float:
        waiters = PartitionWaiters()
        asyncio.get_running_loop().call_later(0.05, a.end, True)
        start = time.monotonic()
        await waiters.wait([plog], 10)
        return time.monotonic() - start

    assert asyncio.run(park_then_commit()) < 5
    assert plog.last_stable_offset == 2
