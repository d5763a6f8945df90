"""Which batches a read_committed reader keeps: Kafka's consumer-side filter
(`CompletedFetch`), for the readers the broker runs itself (share groups' acquisition,
the Iceberg table writer). Control batches (transaction markers) are never records; a
transactional batch is dropped from its producer's aborted transaction's first offset
until that producer's next control batch."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .batch import BatchHeader


def committed_batches(headers: Iterable[BatchHeader], aborted: Iterable[tuple[int, int]],
                      read_committed: bool = True) -> Iterator[tuple[BatchHeader, bool]]:
    """Each batch header with whether a reader keeps its records. `aborted`: the
    (producer id, first offset) of the aborted transactions overlapping the batches (a
    Fetch response's AbortedTransactions); ignored unless `read_committed`."""
    pending: dict[int, list[int]] = {}
    if read_committed:
        for pid, first in aborted:
            pending.setdefault(pid, []).append(first)
        for firsts in pending.values():
            firsts.sort()
    open_aborts: set[int] = set()
    for h in headers:
        if h.is_control:
            open_aborts.discard(h.producer_id)
            yield h, False
            continue
        if read_committed and h.is_transactional:
            starts = pending.get(h.producer_id)
            while starts and starts[0] <= h.base_offset:
                open_aborts.add(h.producer_id)
                starts.pop(0)
            if h.producer_id in open_aborts:
                yield h, False
                continue
        yield h, True
