"""What the share fetch path hands out of log data: control batches and aborted
transactions never become deliverable, and only batches with acquired offsets travel."""

from __future__ import annotations

from headwater.log.batch import build_batch
from headwater.log.control import build_marker
from headwater.share.manager import SharePartitionManager, _trim
from headwater.share.outcomes import AcquiredRecords


class _Log:
    """The one call `_batches` makes of a partition log under read_committed."""

    def __init__(self, aborted: list[tuple[int, int]]) -> None:
        self.aborted = aborted

    def aborted_transactions(self, start: int, upper: int) -> list[tuple[int, int]]:
        return self.aborted


def batch(base: int, n: int, pid: int = -1, txn: bool = False) -> bytes:
    return build_batch([(b"k", b"v", [], 1000)] * n, base_offset=base, producer_id=pid,
                       producer_epoch=0 if pid >= 0 else -1, is_transactional=txn)


def marker(base: int, pid: int, commit: bool) -> bytes:
    data = bytearray(build_marker(pid, 0, commit, 0, 1000))
    data[0:8] = base.to_bytes(8, "big")
    return bytes(data)


def test_markers_are_skipped_and_aborted_batches_only_under_read_committed():
    data = (batch(0, 3) + batch(3, 2, pid=7, txn=True) + batch(5, 2, pid=8, txn=True)
            + marker(7, 7, commit=False) + marker(8, 8, commit=True) + batch(9, 1))
    plog = _Log(aborted=[(7, 3)])
    batches, skip = SharePartitionManager._batches(data, plog, 0, 10, committed=True)
    assert batches == [(0, 2), (3, 4), (5, 6), (7, 7), (8, 8), (9, 9)]
    assert skip == [(3, 4), (7, 7), (8, 8)]
    _, skip = SharePartitionManager._batches(data, plog, 0, 10, committed=False)
    assert skip == [(7, 7), (8, 8)]


def test_trim_keeps_the_batches_holding_acquired_offsets():
    a, b, c = batch(0, 3), batch(3, 2), batch(5, 2)
    data = a + b + c
    assert _trim(data, [AcquiredRecords(3, 4, 1)]) == b
    assert _trim(data, [AcquiredRecords(1, 1, 2), AcquiredRecords(6, 6, 1)]) is data
    assert _trim(data, [AcquiredRecords(20, 21, 1)]) == b""
