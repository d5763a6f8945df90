"""Idempotent producers: duplicates, sequence gaps, epochs, and state across restarts."""

from __future__ import annotations

import os

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.storage.errors import LogError

PID = 1000


def produce(plog, batch, seq: int, n: int = 2, epoch: int = 0, pid: int = PID):
    return plog.append(batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq), 0)


def error_code(fn) -> int:
    with pytest.raises(LogError) as exc:
        fn()
    return exc.value.code


def test_retried_batch_returns_original_offsets_without_writing(open_log, batch) -> None:
    plog = open_log()
    first = produce(plog, batch, seq=0)
    produce(plog, batch, seq=2)
    size = plog.size_bytes
    retry = produce(plog, batch, seq=0)
    assert (retry.base_offset, retry.last_offset, retry.duplicate) == (0, 1, True)
    assert not first.duplicate
    assert plog.size_bytes == size and plog.log_end_offset == 4


def test_sequence_gap_is_out_of_order(open_log, batch) -> None:
    plog = open_log()
    produce(plog, batch, seq=0)
    assert error_code(lambda: produce(plog, batch, seq=3)) == E.out_of_order_sequence_number
    assert plog.log_end_offset == 2
    assert produce(plog, batch, seq=2).base_offset == 2


def test_older_epoch_is_invalid_producer_epoch(open_log, batch) -> None:
    plog = open_log()
    produce(plog, batch, seq=0, epoch=3)
    assert error_code(lambda: produce(plog, batch, seq=2, epoch=2)) == E.invalid_producer_epoch


def test_epoch_bump_restarts_sequence_at_zero(open_log, batch) -> None:
    plog = open_log()
    produce(plog, batch, seq=0)
    produce(plog, batch, seq=2)
    assert error_code(lambda: produce(plog, batch, seq=4, epoch=1)) == \
        E.out_of_order_sequence_number
    assert produce(plog, batch, seq=0, epoch=1).base_offset == 4
    [state] = plog.producer_states()
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (PID, 1, 1)
    assert (state.coordinator_epoch, state.current_txn_start_offset) == (-1, -1)


def test_unknown_producer_may_start_at_any_sequence(open_log, batch) -> None:
    plog = open_log()
    assert produce(plog, batch, seq=17).base_offset == 0
    assert error_code(lambda: produce(plog, batch, seq=0)) == E.out_of_order_sequence_number


def test_sequence_wraps_to_zero(open_log, batch) -> None:
    plog = open_log()
    produce(plog, batch, seq=2**31 - 2, n=2)  # last sequence INT32_MAX
    assert produce(plog, batch, seq=0).base_offset == 2


def test_only_last_five_batches_are_deduplicated(open_log, batch) -> None:
    plog = open_log()
    for i in range(6):
        produce(plog, batch, seq=2 * i)
    assert produce(plog, batch, seq=2).duplicate  # still cached
    assert error_code(lambda: produce(plog, batch, seq=0)) == E.out_of_order_sequence_number


def test_request_with_two_batches_checks_the_second_against_the_first(open_log, batch) -> None:
    plog = open_log()
    ok = (batch(2, producer_id=PID, producer_epoch=0, base_sequence=0)
          + batch(1, producer_id=PID, producer_epoch=0, base_sequence=2))
    assert plog.append(ok, 0).last_offset == 2
    gap = (batch(1, producer_id=PID, producer_epoch=0, base_sequence=3)
           + batch(1, producer_id=PID, producer_epoch=0, base_sequence=5))
    assert error_code(lambda: plog.append(gap, 0)) == E.out_of_order_sequence_number
    assert plog.log_end_offset == 3  # the valid first batch was not written either


def test_non_idempotent_batches_skip_producer_state(open_log, batch) -> None:
    plog = open_log()
    plog.append(batch(1), 0)
    plog.append(batch(1), 0)
    assert plog.log_end_offset == 2 and plog.producer_states() == []


def test_state_survives_clean_close_via_snapshot(open_log, batch) -> None:
    plog = open_log()
    for i in range(20):  # several rolls, each writing a snapshot
        produce(plog, batch, seq=2 * i)
    plog.close()
    snapshots = sorted(p.name for p in plog.path.glob("*.snapshot"))
    assert snapshots[-1] == f"{40:020d}.snapshot"

    again = open_log(clean_shutdown=True)
    retry = produce(again, batch, seq=38)
    assert retry.duplicate and retry.base_offset == 38
    assert error_code(lambda: produce(again, batch, seq=41)) == E.out_of_order_sequence_number
    assert produce(again, batch, seq=40).base_offset == 40


def test_state_rebuilt_from_log_after_unclean_shutdown(open_log, batch) -> None:
    plog = open_log()
    for i in range(20):
        produce(plog, batch, seq=2 * i, pid=PID)
        produce(plog, batch, seq=i, n=1, pid=PID + 1, epoch=4)
    # Crash: no close(), so the newest snapshot predates the last appends. Remove them all
    # to force a replay of every batch header in the log.
    for snap in plog.path.glob("*.snapshot"):
        snap.unlink()

    again = open_log(clean_shutdown=False)
    assert produce(again, batch, seq=38).duplicate
    assert produce(again, batch, seq=19, n=1, pid=PID + 1, epoch=4).duplicate
    assert error_code(lambda: produce(again, batch, seq=0, n=1, pid=PID + 1, epoch=3)) == \
        E.invalid_producer_epoch
    assert produce(again, batch, seq=40).base_offset == 60


def test_stale_snapshot_plus_replay(open_log, batch) -> None:
    plog = open_log()
    for i in range(20):
        produce(plog, batch, seq=2 * i)
    snapshot_offsets = [int(p.stem) for p in plog.path.glob("*.snapshot")]
    assert snapshot_offsets and max(snapshot_offsets) < 40  # taken at rolls only

    again = open_log(clean_shutdown=False)  # crash: replay from the snapshot to the end
    assert produce(again, batch, seq=38).duplicate
    assert produce(again, batch, seq=40).base_offset == 40


def test_snapshot_beyond_truncated_log_is_ignored(open_log, batch) -> None:
    plog = open_log()
    for i in range(5):
        produce(plog, batch, seq=2 * i)
    segment = plog.segments[-1]
    pos = segment.find_position(8)[0]
    plog.close()  # snapshot at offset 10
    os.truncate(segment.log_path, pos)  # lose the last batch (seq 8-9)

    again = open_log(clean_shutdown=False)
    assert again.log_end_offset == 8
    assert not (again.path / f"{10:020d}.snapshot").exists()
    assert produce(again, batch, seq=8).base_offset == 8  # not mistaken for a duplicate
