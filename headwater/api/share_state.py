"""Kafka's inter-broker share-state APIs over the share coordinator (`headwater.share`):
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85),
DeleteShareGroupState (86) and ReadShareGroupStateSummary (87), in the versions kio has.

On one node the share-partition leaders call the coordinator in-process; these handlers
serve the same operations on the wire (Kafka's persister speaks them to the share
coordinator), one coordinator operation per partition, answered per partition with
Kafka's error codes and messages. As in Kafka's `ShareCoordinatorService`, a request
with no topics, a topic with no partitions, or an empty group id gets an empty answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E
from kio.schema.write_share_group_state.v1.request import PartitionData as WritePartition
from kio.schema.write_share_group_state.v1.request import WriteShareGroupStateRequest

from ..security import acl as A
from ..share.records import StateBatch, StateWrite
from ..storage.errors import LogError
from ..wire.dispatch import Dispatcher, RequestContext, typed
from .services import HasAccess, HasShareCoordinator

MESSAGES = {
    int(E.invalid_request): "The request was invalid for this share-partition (negative "
                            "partition or epoch, or a read/write of an uninitialized "
                            "share partition).",
    int(E.fenced_state_epoch): "The state epoch in the request is older than the one "
                               "recorded.",
    int(E.fenced_leader_epoch): "The leader epoch in the request is older than the epoch "
                                "on the broker.",
    int(E.unknown_topic_or_partition): "This server does not host this topic-partition.",
    int(E.coordinator_load_in_progress): "The coordinator is loading and hence can't "
                                         "process requests.",
    int(E.coordinator_not_available): "The coordinator is not available.",
}

PartitionOp = Callable[[uuid.UUID, Any], Awaitable[dict[str, Any]]]


class Services(HasAccess, HasShareCoordinator, Protocol):
    """What these handlers use of the broker."""


def _message(code: int) -> str | None:
    return MESSAGES.get(code, E(code).name) if code else None


def _row(partition: int, code: int, **fields: Any) -> dict[str, Any]:
    return {"partition": partition, "error_code": code, "error_message": _message(code),
            **fields}


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    async def each(self, req: Any, op: PartitionOp) -> dict[str, Any]:
        """`op(topic_id, partition data)` for every partition, grouped as requested."""
        topics = req.topics
        if not req.group_id or not topics or any(not t.partitions for t in topics):
            return {"results": []}
        results = []
        for t in topics:
            rows = []
            for p in t.partitions:
                try:
                    rows.append(await op(t.topic_id, p))
                except LogError as exc:
                    # Its records not committed (the coordinator answers once they are):
                    # NOT_COORDINATOR, as Kafka's coordinators answer a failed append;
                    # the persister finds the coordinator again and retries.
                    rows.append(_row(p.partition, E.not_coordinator, error_message=str(exc)))
            results.append({"topic_id": t.topic_id, "partitions": rows})
        return {"results": results}

    async def initialize(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        async def op(topic_id: uuid.UUID, p: Any) -> dict[str, Any]:
            sc = self.broker.share_coordinator
            code = await sc.initialize(req.group_id, topic_id, p.partition, p.state_epoch,
                                       p.start_offset)
            return _row(p.partition, code)
        return await self.each(req, op)

    async def read(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        async def op(topic_id: uuid.UUID, p: Any) -> dict[str, Any]:
            sc = self.broker.share_coordinator
            code, state = await sc.read(req.group_id, topic_id, p.partition, p.leader_epoch)
            if code or state is None:
                return _row(p.partition, code)
            return _row(p.partition, 0, state_epoch=state.state_epoch,
                        start_offset=state.start_offset, state_batches=[
                            {"first_offset": b.first_offset, "last_offset": b.last_offset,
                             "delivery_state": b.delivery_state,
                             "delivery_count": b.delivery_count}
                            for b in state.state_batches])
        return await self.each(req, op)

    async def write(self, ctx: RequestContext, req: WriteShareGroupStateRequest
                    ) -> dict[str, Any]:
        async def op(topic_id: uuid.UUID, p: WritePartition) -> dict[str, Any]:
            sc = self.broker.share_coordinator
            state = StateWrite(
                p.state_epoch, p.leader_epoch, p.start_offset,
                p.delivery_complete_count,  # UNCHANGED (-1) before v1
                tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state,
                                 b.delivery_count) for b in p.state_batches))
            code = await sc.write(req.group_id, topic_id, p.partition, state, p.leader_epoch)
            return _row(p.partition, code)
        return await self.each(req, op)

    async def delete(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        async def op(topic_id: uuid.UUID, p: Any) -> dict[str, Any]:
            sc = self.broker.share_coordinator
            return _row(p.partition, await sc.delete(req.group_id, topic_id, p.partition))
        return await self.each(req, op)

    async def read_summary(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        async def op(topic_id: uuid.UUID, p: Any) -> dict[str, Any]:
            sc = self.broker.share_coordinator
            s = await sc.read_summary(req.group_id, topic_id, p.partition, p.leader_epoch)
            return _row(p.partition, s.error_code, state_epoch=s.state_epoch,
                        leader_epoch=s.leader_epoch, start_offset=s.start_offset,
                        delivery_complete_count=s.delivery_complete_count)
        return await self.each(req, op)

    def guarded(self, handler: Any) -> Any:
        """Brokers' own APIs: CLUSTER_ACTION on the cluster, as Kafka asks."""
        async def run(ctx: RequestContext, req: Any) -> dict[str, Any]:
            if self.broker.access.denies(ctx, A.CLUSTER_ACTION, A.CLUSTER, A.CLUSTER_NAME):
                return {"results": [{"topic_id": t.topic_id, "partitions": [
                    _row(p.partition, E.cluster_authorization_failed) for p in t.partitions]}
                    for t in req.topics]}
            answer: dict[str, Any] = await handler(ctx, req)
            return answer
        return run


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(83, 0, 0, handlers.guarded(handlers.initialize))
    dispatcher.register(84, 0, 0, handlers.guarded(handlers.read))
    dispatcher.register(85, 0, 1, typed(WriteShareGroupStateRequest,
                                        handlers.guarded(handlers.write)))
    dispatcher.register(86, 0, 0, handlers.guarded(handlers.delete))
    dispatcher.register(87, 0, 1, handlers.guarded(handlers.read_summary))
