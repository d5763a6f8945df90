"""One partition as every reader and writer of partition data sees it.

Today's implementation is `headwater.log.PartitionLog` (segments on the local disk); the
shared log of PostgreSQL and object storage is the second. The contract, which
`tests/unit/storage/test_partition_contract.py` checks against every implementation:

- **Batches stay opaque.** `append` takes a produce request's record set (v2 batches) and
  stores the bytes as they came, patching only the base offset (and, under
  LogAppendTime, the batch's max timestamp); `read` returns whole batches, byte for byte.
- **The store assigns offsets.** `append` returns the first and last offset it gave;
  offsets are contiguous from the log start, with no hole and no reuse of an
  acknowledged offset.
- **Atomic per call.** Every batch of one `append` is validated first (sizes, CRCs,
  timestamps, idempotence and transaction state); a refusal raises `LogError` with the
  Kafka error code and writes nothing.
- **Idempotence.** A retried batch (same producer, epoch and sequence range as one of the
  producer's last five) gets its original offsets back with `duplicate=True`; a gap in
  sequence is OUT_OF_ORDER_SEQUENCE_NUMBER, a stale epoch INVALID_PRODUCER_EPOCH.
- **Durable at acknowledgement.** A caller acknowledges an append only once
  `PartitionStore.commit` (awaited when it returns an awaitable) covered it: then the
  batch survives a crash of this process (local: per the topic's flush policy, as Kafka;
  shared: committed in PostgreSQL and the object store).
- **Visibility.** Readers see offsets below `high_watermark`; read_committed readers
  below `last_stable_offset` (the first offset of the oldest open transaction), with
  `aborted_transactions` naming what to drop. Appends and markers wake subscribers
  (`subscribe_append`) after they became visible.
- **Threading.** Every method runs on the event-loop thread and does not block on the
  network; an implementation that reads a remote store serves reads from what it has
  materialised locally and advances its high watermark only past data it can serve.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

from headwater.config import LogConfig


class AppendResult(NamedTuple):
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 under CreateTime
    log_start_offset: int
    duplicate: bool = False  # a retried idempotent batch: nothing was written


class ProducerStateInfo(NamedTuple):
    """One row of DescribeProducers."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class Partition(Protocol):
    """Append, read and offsets of one topic partition (see the module docstring)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def config(self) -> LogConfig:
        """The topic's effective log configs (broker defaults plus overrides)."""
        ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def leader_epoch(self) -> int:
        """The epoch of this broker's leadership: 0 on one node; on the shared log the
        epoch of the partition's lease (what Metadata reports)."""
        ...

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned."""
        ...

    @property
    def high_watermark(self) -> int:
        """Offsets below it are visible to consumers."""
        ...

    @property
    def last_stable_offset(self) -> int:
        """First offset of the oldest open transaction, else the high watermark."""
        ...

    @property
    def size_bytes(self) -> int: ...

    def append(self, data: bytes | bytearray | memoryview, now_ms: int,
               *, origin_client: bool = True,
               transaction_version: int = 0) -> AppendResult:
        """Validate and append a record set; `origin_client=False` lets the broker's own
        writers (coordinators) append control batches. Raises LogError."""
        ...

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int, now_ms: int,
                      transaction_version: int = 0) -> int:
        """Write the COMMIT/ABORT control batch ending the producer's transaction;
        returns its offset. An abort is recorded for `aborted_transactions`."""
        ...

    def read(self, fetch_offset: int, max_bytes: int, upper_bound: int | None = None) -> bytes:
        """Whole batches from the one holding `fetch_offset`: at most `max_bytes` but at
        least one (KIP-74), none at or past `upper_bound` (default: the high watermark).
        OFFSET_OUT_OF_RANGE outside [log start, log end]; b"" at the end."""
        ...

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record stamped at or after `timestamp`."""
        ...

    def max_timestamp_entry(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (earliest on ties)."""
        ...

    def aborted_transactions(self, start_offset: int, upper_bound: int
                             ) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of aborted transactions overlapping the range."""
        ...

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start up to `offset`; returns the new log start."""
        ...

    def producer_states(self) -> list[ProducerStateInfo]: ...

    def knows_producer(self, producer_id: int) -> bool:
        """Whether the partition holds any state for the producer."""
        ...

    def in_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer (at this epoch) has a transaction open here."""
        ...

    def subscribe_append(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` after every append that changed the partition (not a
        duplicate); returns the unsubscribe handle."""
        ...
