"""ListOffsets (2), OffsetForLeaderEpoch (23) and DeleteRecords (21)."""

from __future__ import annotations

from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E
from kio.schema.list_offsets.v11.request import ListOffsetsRequest
from kio.schema.offset_for_leader_epoch.v4.request import OffsetForLeaderEpochRequest

from ..security import acl as A
from ..storage.errors import LogError
from ..wire.dispatch import Dispatcher, RequestContext, typed
from .services import HasAccess, HasPartitions

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
EARLIEST_PENDING_UPLOAD = -6
# The first ListOffsets version of each special target time (Kafka's ReplicaManager: an
# older version, or a negative time it does not know, gets UNSUPPORTED_VERSION for the
# partition). -6 (KIP-1023, v11): with no tiered storage there is no pending upload, so
# the answer is offset -1, as Kafka's UnifiedLog gives without remote storage.
SPECIAL_SINCE = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8,
                 LATEST_TIERED: 9, EARLIEST_PENDING_UPLOAD: 11}
LEADER_EPOCH = 0
READ_COMMITTED = 1


class Services(HasAccess, HasPartitions, Protocol):
    """What these handlers use of the broker."""


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def allowed(self, ctx: RequestContext, op: int, topic: str) -> bool:
        return not self.broker.access.enabled or self.broker.access.allowed(ctx, op, A.TOPIC, topic)

    def handle_list_offsets(self, ctx: RequestContext, req: ListOffsetsRequest
                            ) -> dict[str, Any]:
        isolation = req.isolation_level  # read_uncommitted (0) before v2
        topics = []
        for t in req.topics:
            parts = []
            denied = not self.allowed(ctx, A.DESCRIBE, t.name)
            for p in t.partitions:
                base = {"partition_index": p.partition_index, "leader_epoch": LEADER_EPOCH}
                if denied:
                    parts.append({**base, "error_code": E.topic_authorization_failed,
                                  "timestamp": -1, "offset": -1, "leader_epoch": -1})
                    continue
                plog = self.broker.partition(t.name, p.partition_index)
                if plog is None:
                    parts.append({**base, "error_code": self.broker.absent_error(
                                      t.name, p.partition_index),
                                  "timestamp": -1, "offset": -1, "leader_epoch": -1})
                    continue
                current_epoch = p.current_leader_epoch  # -1 before v4
                if current_epoch > plog.leader_epoch:
                    parts.append({**base, "error_code": E.unknown_leader_epoch,
                                  "timestamp": -1, "offset": -1})
                    continue
                ts = p.timestamp
                offset, found_ts = -1, -1
                if ts < 0 and ctx.api_version < SPECIAL_SINCE.get(ts, 1 << 15):
                    parts.append({**base, "error_code": E.unsupported_version,
                                  "timestamp": -1, "offset": -1, "leader_epoch": -1})
                    continue
                if ts == LATEST or ts == LATEST_TIERED:
                    # read_committed consumers must not be told of offsets they cannot
                    # read yet: "latest" is the last stable offset for them.
                    offset = (plog.last_stable_offset if isolation == READ_COMMITTED
                              else plog.high_watermark)
                    if ts == LATEST_TIERED:
                        offset = -1
                elif ts in (EARLIEST, EARLIEST_LOCAL):
                    offset = plog.log_start_offset
                elif ts == MAX_TIMESTAMP:
                    entry = plog.max_timestamp_entry()
                    if entry is not None:
                        offset, found_ts = entry
                elif ts == EARLIEST_PENDING_UPLOAD:
                    offset = -1
                else:
                    entry = plog.offset_for_timestamp(ts)
                    if entry is not None:
                        offset, found_ts = entry
                if (isolation == READ_COMMITTED and (ts >= 0 or ts == MAX_TIMESTAMP)
                        and offset >= plog.last_stable_offset):
                    offset, found_ts = -1, -1  # Kafka: nothing past what the client may read
                # As Kafka: no offset found (by time, max timestamp of an empty log) has
                # no leader epoch either.
                parts.append({**base, "error_code": 0, "timestamp": found_ts,
                              "offset": offset,
                              "leader_epoch": LEADER_EPOCH if offset >= 0 else -1})
            topics.append({"name": t.name, "partitions": parts})
        return {"throttle_time": 0, "topics": topics}

    def handle_offset_for_leader_epoch(self, ctx: RequestContext,
                                       req: OffsetForLeaderEpochRequest) -> dict[str, Any]:
        topics = []
        for t in req.topics:
            parts = []
            denied = not self.allowed(ctx, A.DESCRIBE, t.topic)
            for p in t.partitions:
                plog = None if denied else self.broker.partition(t.topic, p.partition)
                if denied:
                    parts.append({"partition": p.partition,
                                  "error_code": E.topic_authorization_failed})
                    continue
                if plog is None:
                    parts.append({"partition": p.partition,
                                  "error_code": self.broker.absent_error(t.topic, p.partition)})
                    continue
                current = p.current_leader_epoch
                if current > plog.leader_epoch:
                    parts.append({"partition": p.partition,
                                  "error_code": E.unknown_leader_epoch})
                elif p.leader_epoch > plog.leader_epoch:
                    parts.append({"partition": p.partition, "error_code": 0,
                                  "leader_epoch": -1, "end_offset": -1})
                else:
                    parts.append({"partition": p.partition, "error_code": 0,
                                  "leader_epoch": plog.leader_epoch,
                                  "end_offset": plog.log_end_offset})
            topics.append({"topic": t.topic, "partitions": parts})
        return {"throttle_time": 0, "topics": topics}

    def handle_delete_records(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        topics = []
        for t in req.topics:
            parts = []
            denied = not self.allowed(ctx, A.DELETE, t.name)
            for p in t.partitions:
                plog = None if denied else self.broker.partition(t.name, p.partition_index)
                if plog is None:
                    parts.append({"partition_index": p.partition_index, "low_watermark": -1,
                                  "error_code": E.topic_authorization_failed if denied
                                  else self.broker.absent_error(t.name, p.partition_index)})
                    continue
                offset = plog.high_watermark if p.offset == -1 else p.offset
                try:
                    low = plog.delete_records_before(offset)
                except LogError as exc:
                    parts.append({"partition_index": p.partition_index, "low_watermark": -1,
                                  "error_code": exc.code})
                    continue
                parts.append({"partition_index": p.partition_index, "low_watermark": low,
                              "error_code": 0})
            topics.append({"name": t.name, "partitions": parts})
        return {"throttle_time": 0, "topics": topics}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(2, 1, 11, typed(ListOffsetsRequest, handlers.handle_list_offsets))
    dispatcher.register(23, 2, 4, typed(OffsetForLeaderEpochRequest,
                                        handlers.handle_offset_for_leader_epoch))
    dispatcher.register(21, 0, 2, handlers.handle_delete_records)
