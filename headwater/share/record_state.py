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
    ACQUIRED  --reject, limit (with a DLQ)---> ARCHIVING             (KIP-1191)
    ACQUIRED  --renew (lock re-armed)--------> ACQUIRED
    AVAILABLE --archive----------------------> ARCHIVED
    ARCHIVING --dead-lettered----------------> ARCHIVED              (KIP-1191)

With a dead-letter topic (`errors.deadletterqueue.topic.name`, KIP-1191), the two ends
that mean "this record could not be processed" -- reject, and the delivery-count limit
(on release, lock timeout or a member leaving) -- go to ARCHIVING instead of ARCHIVED.

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
  record that keeps failing stops being redelivered forever (the record stays in the
  log; with a dead-letter topic it is also copied there, see below).
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
* **dead-lettered** (KIP-1191): ARCHIVING (3) is the transient state between the
  decision and the dead-letter write. It is persisted first, so a crash cannot lose the
  decision; then the record is written to the dead-letter topic (`dead_letter.py`), and
  only then does it become ARCHIVED. ARCHIVING is not finished: the SPSO stops at it, and
  it does not count as delivered-and-finished for lag. Every client event on it is
  illegal (INVALID_RECORD_STATE), as on the terminal states.

ACKNOWLEDGED and ARCHIVED are terminal: every event is illegal there, as is every
event other than acquire/archive on AVAILABLE (Kafka's `RecordState.validateTransition`).
An acknowledgement that hits an illegal pair is answered INVALID_RECORD_STATE.

AVAILABLE (0), ACKNOWLEDGED (2), ARCHIVING (3) and ARCHIVED (4) are persisted; ACQUIRED
never is: an acquisition is not written to the share coordinator (Kafka does not either),
so after a restart an acquired record is AVAILABLE with the count it had before it was
acquired, and an ARCHIVING record is written to the dead-letter topic (unless it already
is there) and finished.

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
    ARCHIVING = 3  # KIP-1191: archived, its dead-letter record not yet written
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
    DEAD_LETTERED = "dead-lettered"


class DeadLetterReason(Enum):
    """Why a record goes to the dead-letter topic: Kafka's `__dlq.errors.message`."""

    REJECTED = "Offset rejected by client."
    DELIVERY_LIMIT = "Offset delivery count exceeded the threshold."


class CountOp(IntEnum):
    """What a transition does to the delivery count."""

    KEEP = 0
    INCREASE = 1


class Step(NamedTuple):
    """Where an event leads: the new state, the count change, and whether the
    acquisition lock is (re)armed (only for steps that end in ACQUIRED)."""

    state: RecordState
    count: CountOp = CountOp.KEEP  # type: ignore[assignment]  # a field shadowing tuple.count
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
    S.ARCHIVING: {
        E.DEAD_LETTERED: Step(S.ARCHIVED),
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


def step(state: RecordState, event: Event, delivery_count: int, limit: int,
         dead_letter: bool = False) -> Step | None:
    """The step `event` takes from `state` for a record delivered `delivery_count`
    times, or None when the pair is illegal.

    The delivery-count limit is applied here: a step back to AVAILABLE that keeps the
    count, with the count already at `limit`, ends in ARCHIVED instead. With
    `dead_letter` (the group has a dead-letter topic), that and a reject end in ARCHIVING.
    """
    found = TRANSITIONS[state].get(event)
    if found is None:
        return None
    if found.state is S.AVAILABLE and delivery_count >= limit:
        return Step(S.ARCHIVING if dead_letter else S.ARCHIVED)
    if dead_letter and event is E.REJECT:
        return Step(S.ARCHIVING)
    return found


def dead_letter_reason(event: Event) -> DeadLetterReason:
    """The reason of a record that `event` sent to ARCHIVING."""
    return DeadLetterReason.REJECTED if event is E.REJECT else DeadLetterReason.DELIVERY_LIMIT


def inferred_reason(delivery_count: int, limit: int) -> DeadLetterReason:
    """The reason of an ARCHIVING record read back after a restart (the reason is not
    persisted): Kafka's inference, from the count. A reject on the last delivery reads
    back as the limit."""
    return (DeadLetterReason.DELIVERY_LIMIT if delivery_count >= limit
            else DeadLetterReason.REJECTED)
