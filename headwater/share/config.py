"""Share-partition settings (Kafka's group config names and defaults) and the
`share.auto.offset.reset` strategies.

The leader does not read configs itself: the caller resolves the group's values
(group config over broker `group.share.*` default) and passes a `SharePartitionConfig`;
it may pass a new one at any time (`SharePartition.config`), as Kafka re-reads dynamic
group configs. Where a share-partition starts when nothing is persisted is resolved by
`initial_start_offset` from log positions the caller looks up.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum


class AcquireMode(IntEnum):
    """ShareFetch v2 `ShareAcquireMode` (KIP-1206)."""

    BATCH_OPTIMIZED = 0  # whole batches: MaxRecords is a soft bound
    RECORD_LIMIT = 1  # never more than MaxRecords


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    record_lock_duration_ms: int = 30_000  # share.record.lock.duration.ms
    delivery_count_limit: int = 5  # share.delivery.count.limit
    max_record_locks: int = 2000  # share.partition.max.record.locks
    # errors.deadletterqueue.topic.name is set: rejected records and records at the
    # delivery-count limit go through ARCHIVING to the dead-letter topic (KIP-1191).
    dead_letter: bool = False

    @property
    def throttle_limit(self) -> int:
        """Delivery count from which a batch is acquired in shrinking pieces (Kafka's
        `throttleRecordsDeliveryLimit`: half the limit rounded up, at least 2), so one
        poison record does not burn its neighbours' delivery attempts."""
        return max(2, -(-self.delivery_count_limit // 2))


# ---- share.auto.offset.reset -------------------------------------------------------------

_DURATION = re.compile(
    r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's `Duration.parse` takes it (PnDTnHnMn.nS)."""
    m = _DURATION.match(text.strip())
    if m is None or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    days, hours, minutes = (int(m.group(g) or 0) for g in ("d", "h", "m"))
    seconds = float(m.group("s") or 0)
    return ((days * 24 + hours) * 60 + minutes) * 60_000 + round(seconds * 1000)


@dataclass(frozen=True, slots=True)
class OffsetReset:
    """`latest` (default), `earliest`, or `by_duration:<ISO-8601>`."""

    strategy: str = "latest"
    duration_ms: int = 0

    @classmethod
    def parse(cls, value: str) -> OffsetReset:
        v = value.strip().lower()
        if v in ("latest", "earliest"):
            return cls(v)
        if v.startswith("by_duration:"):
            return cls("by_duration", parse_duration_ms(value.strip()[len("by_duration:"):]))
        raise ValueError(f"invalid share.auto.offset.reset: {value!r}")


def initial_start_offset(reset: OffsetReset, log_start_offset: int, log_end_offset: int,
                         offset_for_timestamp: Callable[[int], int | None],
                         now_ms: int) -> int:
    """The SPSO of a share-partition with no persisted start offset.

    `offset_for_timestamp(ts)` is the first offset with timestamp >= ts (ListOffsets),
    or None when there is none, in which case the log end is used as Kafka does.
    """
    if reset.strategy == "earliest":
        return log_start_offset
    if reset.strategy == "by_duration":
        found = offset_for_timestamp(now_ms - reset.duration_ms)
        return log_end_offset if found is None else max(found, log_start_offset)
    return log_end_offset
