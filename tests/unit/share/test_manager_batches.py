"""What the share fetch path hands out of log data: control batches and aborted
transactions never become deliverable, and only batches with acquired offsets travel."""

from __future__ import annotations

from headwater.log.batch import build_batch, iter_batches
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


class _Backlog:
    """A partition log of `n` one-record batches of `size` bytes; records each read."""

    def __init__(self, n: int, value_size: int) -> None:
        self.batches = [build_batch([(b"k", b"v" * value_size, [], 1000)], base_offset=i)
                        for i in range(n)]
        self.reads: list[int] = []

    def read(self, offset: int, max_bytes: int, upper: int) -> bytes:
        self.reads.append(max_bytes)
        out: list[bytes] = []
        size = 0
        for b in self.batches[offset:upper]:
            if out and size + len(b) > max_bytes:
                break
            out.append(b)
            size += len(b)
        return b"".join(out)


def test_a_share_fetch_reads_what_max_records_needs_not_the_whole_backlog():
    # 100 B records, a 50 MB fetch: one 1 MiB read (not the 50 MB backlog) covers 500.
    log = _Backlog(20_000, 100)
    data = SharePartitionManager._read(log, 0, 50_000_000, 20_000, 500)
    assert log.reads == [1 << 20]
    assert sum(1 for _ in iter_batches(data)) >= 500
    # 100 KiB records: the first read has too few, the second is sized for max_records.
    log = _Backlog(100, 100 * 1024)
    data = SharePartitionManager._read(log, 0, 50_000_000, 100, 50)
    assert len(log.reads) == 2 and sum(1 for _ in iter_batches(data)) == 50
    # The log end or max_bytes ends it; nothing is read at the upper bound.
    log = _Backlog(10, 100 * 1024)
    assert sum(1 for _ in iter_batches(SharePartitionManager._read(log, 0, 50_000_000, 10, 500))) == 10
    assert SharePartitionManager._read(log, 10, 50_000_000, 10, 500) == b""
    log = _Backlog(100, 100 * 1024)
    SharePartitionManager._read(log, 0, 3 << 20, 100, 500)
    assert log.reads[-1] == 3 << 20
