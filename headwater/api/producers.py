"""InitProducerId (22) for idempotent producers, DescribeProducers (61), and in a
cluster AllocateProducerIds (67, KIP-730).

Producer ids come from blocks the controller commits as ProducerIdsRecords, so an
id is never handed out twice, across restarts included. On one node the controller's
own block serves them; in a cluster (headwater.storage=shared) every broker answers
InitProducerId itself from a block it asked the controller for in AllocateProducerIds
(`txn/producer_id_blocks.py`; COORDINATOR_LOAD_IN_PROGRESS while it has none). A
transactional id goes to the transaction coordinator (`headwater.txn`), which answers
NOT_COORDINATOR on a broker that does not own the id's shard.

AllocateProducerIds is the controller's side: as in Kafka the sender needs CLUSTER_ACTION
on the cluster, a broker that is not the controller answers NOT_CONTROLLER, and the
block is answered once it is durable in the shared metadata log.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest

from ..coordinator.runtime import NotReady
from ..metadata.controller import ControllerError
from ..security import acl as A
from ..wire.dispatch import Dispatcher, RequestContext, typed
from .committed import once_committed
from .services import (
    HasAccess,
    HasCluster,
    HasController,
    HasPartitions,
    HasProducerIds,
    HasTransactions,
)


class Services(HasAccess, HasController, HasCluster, HasPartitions, HasTransactions,
               HasProducerIds, Protocol):
    """What these handlers use of the broker."""


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def handle_init(self, ctx: RequestContext, req: Any
                    ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        access = self.broker.access
        if access.enabled:
            if req.transactional_id is not None:
                if not access.allowed(ctx, A.WRITE, A.TRANSACTIONAL_ID, req.transactional_id):
                    return {"throttle_time": 0, "producer_id": -1, "producer_epoch": -1,
                            "error_code": E.transactional_id_authorization_failed}
            elif not (access.allowed(ctx, A.IDEMPOTENT_WRITE, A.CLUSTER, A.CLUSTER_NAME)
                      or access.allowed_any(ctx, A.WRITE, A.TOPIC)):
                # As Kafka (KIP-679): IDEMPOTENT_WRITE on the cluster, or WRITE on a topic.
                return {"throttle_time": 0, "producer_id": -1, "producer_epoch": -1,
                        "error_code": E.cluster_authorization_failed}
        if req.transactional_id is not None:
            # The transaction coordinator bumps the epoch, fencing the previous producer
            # (and aborting its open transaction).
            timeout_ms = int(req.transaction_timeout.total_seconds() * 1000)
            pid, epoch = req.producer_id, req.producer_epoch  # -1 before v3
            expected = (pid, epoch) if pid >= 0 else None
            error: int
            try:
                error, pid, epoch = self.broker.transactions.init_producer_id(
                    req.transactional_id, timeout_ms, expected)
            except NotReady as exc:
                error, pid, epoch = exc.code, -1, -1
            if error == E.producer_fenced and ctx.api_version < 4:
                error = E.invalid_producer_epoch  # PRODUCER_FENCED is v4+ (KIP-588)
            # answered once the new epoch (or what it read) is committed
            return once_committed({"throttle_time": 0, "error_code": error,
                                   "producer_id": pid, "producer_epoch": epoch},
                                  self.broker.transactions.pending_commits(
                                      req.transactional_id))
        # Without a transactional id Kafka "always blindly accepts the request and
        # returns a new producerId" at epoch 0, whatever id and epoch the producer names
        # (an idempotent producer resetting its sequences, KIP-360). Bumping the named
        # epoch instead, as headwater did, ran a producer's epoch into the tens of
        # thousands in a campaign's outages (librdkafka bumps on every message timeout).
        try:
            new_pid = self.broker.producer_ids.allocate_producer_id()
        except NotReady as exc:  # no block yet: the client retries
            return {"throttle_time": 0, "error_code": exc.code, "producer_id": -1,
                    "producer_epoch": -1}
        return {"throttle_time": 0, "error_code": 0, "producer_id": new_pid,
                "producer_epoch": 0}

    async def handle_allocate(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        def answer(code: int, start: int = -1, length: int = 0) -> dict[str, Any]:
            return {"throttle_time": 0, "error_code": code, "producer_id_start": start,
                    "producer_id_len": length}
        if self.broker.access.denies(ctx, A.CLUSTER_ACTION, A.CLUSTER, A.CLUSTER_NAME):
            return answer(E.cluster_authorization_failed)
        cluster, controller = self.broker.cluster, self.broker.controller
        if cluster is None or not self.broker.is_controller():
            return answer(E.not_controller)
        try:
            start, length = controller.allocate_producer_ids(req.broker_id,
                                                             req.broker_epoch)
        except ControllerError as exc:
            return answer(exc.code)
        durable = cluster.durable()
        if durable is not None:
            try:
                await durable
            except Exception:  # not committed: this broker is no longer the controller
                return answer(E.not_controller)
        return answer(E.none, start, length)

    def handle_describe(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        topics = []
        for t in req.topics:
            parts = []
            denied = self.broker.access.denies(ctx, A.READ, A.TOPIC, t.name)
            for index in t.partition_indexes:
                plog = None if denied else self.broker.partition(t.name, index)
                if denied:
                    parts.append({"partition_index": index,
                                  "error_code": E.topic_authorization_failed,
                                  "error_message": None, "active_producers": ()})
                    continue
                if plog is None:  # NOT_LEADER_OR_FOLLOWER where another broker serves it
                    parts.append({"partition_index": index,
                                  "error_code": self.broker.absent_error(t.name, index),
                                  "error_message": None, "active_producers": ()})
                    continue
                parts.append({"partition_index": index, "error_code": 0,
                              "error_message": None,
                              "active_producers": [{
                                  "producer_id": s.producer_id,
                                  "producer_epoch": s.producer_epoch,
                                  "last_sequence": s.last_sequence,
                                  "last_timestamp": s.last_timestamp,
                                  "coordinator_epoch": s.coordinator_epoch,
                                  "current_txn_start_offset": s.current_txn_start_offset,
                              } for s in plog.producer_states()]})
            topics.append({"name": t.name, "partitions": parts})
        return {"throttle_time": 0, "topics": topics}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(22, 0, 5, typed(InitProducerIdRequest, handlers.handle_init))
    dispatcher.register(61, 0, 0, handlers.handle_describe)
    if broker.cluster is not None:
        dispatcher.register(67, 0, 0, handlers.handle_allocate)
