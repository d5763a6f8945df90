"""The delivery state of one in-flight record of a share-partition, as a table.

Theory of operation
-------------------
A share group (KIP-932) consumes a topic-partition as a queue: many members read the
same partition, and each record is handed to one member at a time. The share-partition
leader (`partition.py`) keeps, for every record between the share-partition start
offset (SPSO) and end offset (SPEO), one of Kafka's `RecordState`s:

    AVAILABLE --acquire (count+1, lock armed)--> ACQUIRED
    ACQUIRED  --accept-----------------------> ACKNOWLEDGED          (terminal)
    ACQUIRED  --reject / gap / archive-------> ARCHIVED              (terminal)
    ACQUIRED  --release / lock timeout-------> AVAILABLE  (or ARCHIVED at the limit)
    ACQUIRED  --member left------------------> AVAILABLE  (or ARCHIVED at the limit)
    ACQUIRED  --renew (lock re-armed)--------> ACQUIRED
    AVAILABLE --archive----------------------> ARCHIVED

Why each transition exists:

* **acquire**: a ShareFetch hands the record to one member. The *delivery count* goes up
  by one: it counts deliveries, and is what the client sees (`Message.delivery_count()`).
  An *acquisition lock* (`share.record.lock.duration.ms`, default 30 s) bounds how long
  the member may hold it without answering.
* **accept** (ack type 1): processed; the record is done for good.
* **reject** (3): the member says it can never be processed (a poison record); done, but
  recorded as ARCHIVED so operators can tell it from an accepted one.
* **gap** (0): the offset has no record (compaction hole, control batch); done.
* **release** (2): the member gives it back for someone else, now. The count is kept, so
  a released record comes back with count 2.
* **lock timeout**: the member went silent; same as release. This is what makes share
  groups at-least-once without heartbeats per record.
* **delivery-count limit** (`share.delivery.count.limit`, default 5): a move back to
  AVAILABLE when the count has already reached the limit becomes ARCHIVED instead, so a
  record that keeps failing stops being redelivered forever (Kafka has no DLQ before
  4.4; the record stays in the log).
* **member left** (share session closed with epoch -1, member fenced or left): its
  acquired records go back to AVAILABLE with the count kept, as a release: Kafka 4.3.1
  does exactly this (measured: a record a closing consumer held comes back with count 2,
  and one held at the limit is archived), although its trunk source has a
  `DeliveryCountOps.DECREASE` on that path (KAFKA-17541). The reference broker is the
  oracle (tests/integration/test_share_delivery_vs_kafka.py; docs/differences.md).
* **renew** (4, KIP-1222, ShareFetch/ShareAcknowledge v2): the member needs more time;
  the record stays ACQUIRED and its lock restarts. The count is unchanged.
* **archive**: the leader itself ends records that must never be delivered: aborted
  transactional records under read_committed, records the log start offset moved past.

ACKNOWLEDGED and ARCHIVED are terminal: every event is illegal there, as is every
event other than acquire/archive on AVAILABLE (Kafka's `RecordState.validateTransition`).
An acknowledgement that hits an illegal pair is answered INVALID_RECORD_STATE.

Only AVAILABLE (0), ACKNOWLEDGED (2) and ARCHIVED (4) are ever persisted: an acquisition
is not written to the share coordinator (Kafka does not either), so after a restart an
acquired record is AVAILABLE with the count it had before it was acquired. Kafka 4.4's
ARCHIVING (3, dead-letter queue) is not implemented.

Two rules for this file: everything that decides a record's next state and its
delivery count lives here; owners, lock deadlines and offsets do not (see
`inflight.py` and `partition.py`).
"""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import NamedTuple


class RecordState(IntEnum):
    """Kafka's `RecordState` ids (the int8 `DeliveryState` persisted for a batch)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    @property
    def is_terminal(self) -> bool:
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class AcknowledgeType(IntEnum):
    """The `AcknowledgeTypes` bytes of ShareFetch / ShareAcknowledge."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # v2 only (KIP-1222)


class Event(Enum):
    ACQUIRE = "acquire"
    ACCEPT = "accept"
    RELEASE = "release"
    REJECT = "reject"
    GAP = "gap"
    RENEW = "renew"
    LOCK_TIMEOUT = "lock timeout"
    MEMBER_LEFT = "member left"
    ARCHIVE = "archive"


class CountOp(IntEnum):
    """What a transition does to the delivery count."""

    KEEP = 0
    INCREASE = 1


class Step(NamedTuple):
    """Where an event leads: the new state, the count change, and whether the
    acquisition lock is (re)armed (only for steps that end in ACQUIRED)."""

    state: RecordState
    count: CountOp = CountOp.KEEP
    arm_lock: bool = False


S, E = RecordState, Event

# state -> event -> step. A missing pair is illegal (INVALID_RECORD_STATE for a client).
TRANSITIONS: dict[RecordState, dict[Event, Step]] = {
    S.AVAILABLE: {
        E.ACQUIRE: Step(S.ACQUIRED, CountOp.INCREASE, arm_lock=True),
        E.ARCHIVE: Step(S.ARCHIVED),
    },
    S.ACQUIRED: {
        E.ACCEPT: Step(S.ACKNOWLEDGED),
        E.REJECT: Step(S.ARCHIVED),
        E.GAP: Step(S.ARCHIVED),
        E.RELEASE: Step(S.AVAILABLE),
        E.LOCK_TIMEOUT: Step(S.AVAILABLE),
        E.MEMBER_LEFT: Step(S.AVAILABLE),
        E.RENEW: Step(S.ACQUIRED, arm_lock=True),
        E.ARCHIVE: Step(S.ARCHIVED),
    },
    S.ACKNOWLEDGED: {},
    S.ARCHIVED: {},
}

ACK_EVENTS: dict[int, Event] = {
    AcknowledgeType.GAP: E.GAP,
    AcknowledgeType.ACCEPT: E.ACCEPT,
    AcknowledgeType.RELEASE: E.RELEASE,
    AcknowledgeType.REJECT: E.REJECT,
    AcknowledgeType.RENEW: E.RENEW,
}


def step(state: RecordState, event: Event, delivery_count: int, limit: int) -> Step | None:
    """The step `event` takes from `state` for a record delivered `delivery_count`
    times, or None when the pair is illegal.

    The delivery-count limit is applied here: a step back to AVAILABLE that keeps the
    count, with the count already at `limit`, ends in ARCHIVED instead.
    """
    found = TRANSITIONS[state].get(event)
    if found is None:
        return None
    if found.state is S.AVAILABLE and delivery_count >= limit:
        return Step(S.ARCHIVED)
    return found
