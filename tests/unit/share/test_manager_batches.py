"""What the share fetch path hands out of log data: control batches and aborted
transactions never become deliverable, and only batches with acquired offsets travel."""

from __future__ import annotations

from headwater.records.batch import build_batch, iter_batches
from headwater.records.control import build_marker
from headwater.share.manager import SharePartitionManager, _Leader, _trim
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
    headers = list(iter_batches(data))
    batches, skip = SharePartitionManager._batches(headers, plog, 0, 10, committed=True)
    assert batches == [(0, 2), (3, 4), (5, 6), (7, 7), (8, 8), (9, 9)]
    assert skip == [(3, 4), (7, 7), (8, 8)]
    _, skip = SharePartitionManager._batches(headers, plog, 0, 10, committed=False)
    assert skip == [(7, 7), (8, 8)]


def test_trim_keeps_the_batches_holding_acquired_offsets():
    a, b, c = batch(0, 3), batch(3, 2), batch(5, 2)
    data = a + b + c
    h = list(iter_batches(data))
    assert _trim(data, h, [AcquiredRecords(3, 4, 1)]) == b
    assert _trim(data, h, [AcquiredRecords(1, 1, 2), AcquiredRecords(6, 6, 1)]) is data
    assert _trim(data, h, [AcquiredRecords(20, 21, 1)]) == b""


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


def leader() -> _Leader:
    return _Leader(("g", None, 0), None, "t")  # type: ignore[arg-type]


def read(ldr: _Leader, log: _Backlog, offset: int, max_bytes: int, upper: int,
         max_records: int) -> bytes:
    data, headers = SharePartitionManager._read(ldr, log, offset, max_bytes, upper,
                                                max_records)
    assert headers == list(iter_batches(data))
    return data


def test_a_share_fetch_reads_what_max_records_needs_not_the_whole_backlog():
    # 100 B records, a 50 MB fetch: reads sized by max_records (not the 50 MB backlog),
    # and once the partition's bytes per offset are known, one read is enough.
    log, ldr = _Backlog(20_000, 100), leader()
    data = read(ldr, log, 0, 50_000_000, 20_000, 500)
    assert max(log.reads) < 1 << 20
    assert sum(1 for _ in iter_batches(data)) >= 500
    log.reads.clear()
    data = read(ldr, log, 500, 50_000_000, 20_000, 500)
    assert len(log.reads) == 1 and log.reads[0] < 200_000
    assert sum(1 for _ in iter_batches(data)) >= 500
    # 100 KiB records: the first read has too few, the next is sized for max_records.
    log, ldr = _Backlog(100, 100 * 1024), leader()
    data = read(ldr, log, 0, 50_000_000, 100, 50)
    assert len(log.reads) == 2 and 50 <= sum(1 for _ in iter_batches(data)) < 60
    # The log end or max_bytes ends it; nothing is read at the upper bound.
    log = _Backlog(10, 100 * 1024)
    assert sum(1 for _ in iter_batches(read(leader(), log, 0, 50_000_000, 10, 500))) == 10
    assert read(leader(), log, 10, 50_000_000, 10, 500) == b""
    log = _Backlog(100, 100 * 1024)
    read(leader(), log, 0, 3 << 20, 100, 500)
    assert log.reads[-1] == 3 << 20
