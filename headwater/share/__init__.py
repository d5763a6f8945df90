"""Share groups (KIP-932): the share-partition leader's state machine and the
share coordinator's persisted-state records. Sans-IO; not yet wired into the APIs
(see docs/architecture.md)."""

from .config import AcquireMode, OffsetReset, SharePartitionConfig, initial_start_offset
from .inflight import InFlightState
from .outcomes import (
    AcknowledgementBatch,
    AcknowledgeResult,
    AcquiredRecords,
    AcquireResult,
    Outcome,
    ReleaseResult,
)
from .partition import SharePartition
from .record_state import AcknowledgeType, Event, RecordState
from .records import ShareSnapshot, ShareUpdate, StateBatch, StateWrite, apply_update

__all__ = [
    "AcknowledgeResult", "AcknowledgeType", "AcknowledgementBatch", "AcquireMode",
    "AcquireResult", "AcquiredRecords", "Event", "InFlightState", "OffsetReset", "Outcome",
    "RecordState", "ReleaseResult", "SharePartition", "SharePartitionConfig", "ShareSnapshot",
    "ShareUpdate", "StateBatch", "StateWrite", "apply_update", "initial_start_offset",
]
