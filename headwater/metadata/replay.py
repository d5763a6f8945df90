"""Reading the metadata log: its records in order, and which of them are committed.

Shared by the controller's start-up replay and `headwater metadata` (which reads a
stopped broker's segment files directly, never writing). Records between a
BeginTransactionRecord and its EndTransactionRecord apply together; an
AbortTransactionRecord, or the log's end, drops them (KIP-868).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..records.batch import decode_records, iter_batches
from . import codec
from . import records as R

log = logging.getLogger("headwater.controller")


def read_batches(data: bytes) -> Iterator[tuple[int, object]]:
    """(offset, record) of every record of `data`'s batches; control batches (never the
    controller's) are skipped with a warning, not fatal."""
    for pos, header in iter_batches(data):
        if header.is_control:
            log.warning("metadata log: control batch at offset %d skipped",
                        header.base_offset)
            continue
        for rec in decode_records(data[pos:pos + header.size]):
            yield rec.offset, codec.decode(rec.key or b"", rec.value or b"")


def read_directory(directory: Path) -> Iterator[tuple[int, object]]:
    """Every record of a metadata log directory's segments, read-only."""
    for segment in sorted(directory.glob("*.log")):
        yield from read_batches(segment.read_bytes())


@dataclass
class Replay:
    committed: list[object] = field(default_factory=list)
    last_offset: int = -1
    pending: list[object] | None = None  # a transaction the log leaves open
    # offset -> "begin" | "end" | "aborted" | "open" for records in transactions
    marks: dict[int, str] = field(default_factory=dict)
    _open: list[int] = field(default_factory=list)  # offsets of the open transaction

    def add(self, offset: int, item: object) -> None:
        self.last_offset = offset
        if isinstance(item, R.BeginTransactionRecord):
            if self.pending is not None:  # a Begin inside a transaction ends it
                self._drop("aborted")
            self.pending = []
            self._open = [offset]
            self.marks[offset] = "begin"
        elif isinstance(item, R.EndTransactionRecord):
            self.committed.extend(self.pending or [])
            self._open = []
            self.marks[offset] = "end"
            self.pending = None
        elif isinstance(item, R.AbortTransactionRecord):
            self._drop("aborted")
            self.marks[offset] = "abort"
        elif self.pending is not None:
            self.pending.append(item)
            self._open.append(offset)
            self.marks[offset] = "in transaction"
        else:
            self.committed.append(item)

    def _drop(self, mark: str) -> None:
        for i, o in enumerate(self._open):
            self.marks[o] = f"begin, {mark}" if i == 0 else mark
        self._open = []
        self.pending = None

    def finish(self) -> Replay:
        """At the log's end: a transaction still open is rolled back."""
        if self.pending is not None:  # marked, and left in `pending` for the caller
            for i, o in enumerate(self._open):
                self.marks[o] = "begin, open" if i == 0 else "open: rolled back at start"
        return self


def replay(records: Iterable[tuple[int, object]]) -> Replay:
    state = Replay()
    for offset, item in records:
        state.add(offset, item)
    return state.finish()
