"""What the share-partition leader's operations take and return: the ShareFetch /
ShareAcknowledge shapes (acquired ranges, acknowledgement batches) and the outcomes
carrying the state write the caller must persist."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .record_state import DeadLetterReason
from .records import StateWrite


class AcquiredRecords(NamedTuple):
    """ShareFetch's AcquiredRecords entry."""

    first_offset: int
    last_offset: int
    delivery_count: int


class DeadLetter(NamedTuple):
    """ARCHIVING offsets of a share-partition that share one delivery count and reason:
    what the dead-letter writer must write before they become ARCHIVED."""

    first_offset: int
    last_offset: int
    delivery_count: int
    reason: DeadLetterReason


class AcknowledgementBatch(NamedTuple):
    """ShareFetch/ShareAcknowledge's AcknowledgementBatches entry: one type for the
    whole range, or one per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an operation asks the caller to persist (`write`, None when nothing), and
    the sequence number `rollback` checks."""

    write: StateWrite | None
    seq: int


@dataclass(frozen=True, slots=True)
class AcquireResult(Outcome):
    records: tuple[AcquiredRecords, ...]
    count: int  # records acquired (what MaxRecords is measured against)


@dataclass(frozen=True, slots=True)
class AcknowledgeResult(Outcome):
    error_code: int  # the partition's AcknowledgeErrorCode: first failing batch's, or NONE
    batch_errors: tuple[int, ...]  # one per acknowledgement batch, in request order


@dataclass(frozen=True, slots=True)
class ReleaseResult(Outcome):
    released: int  # records that changed state
