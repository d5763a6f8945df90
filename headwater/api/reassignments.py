"""AlterPartitionReassignments (45), ListPartitionReassignments (46) and
AlterReplicaLogDirs (34): `kafka-reassign-partitions`.

One broker and one log directory: a partition's only possible replica set is this node,
in `log.dirs`. A plan that keeps it there is accepted and completes at once (Kafka writes
no record when the target equals the current assignment), so `--execute` then
`--verify` report the reassignment completed and `--list` finds none in progress. A
plan naming another broker gets Kafka's INVALID_REPLICA_ASSIGNMENT ("... but no such
broker is registered."), a move to another directory LOG_DIR_NOT_FOUND, and cancelling
gets NO_REASSIGNMENT_IN_PROGRESS: there is never one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from kio.schema.alter_partition_reassignments.v1.request import (
    AlterPartitionReassignmentsRequest,
)
from kio.schema.errors import ErrorCode as E

from ..metadata.assignments import assignment_error
from ..security import acl as A
from ..wire.dispatch import Dispatcher, RequestContext, typed
from .services import HasAccess, HasCluster, HasDataDir, HasImage


class Services(HasAccess, HasImage, HasCluster, HasDataDir, Protocol):
    """What these handlers use of the broker."""


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def denied(self, ctx: RequestContext, op: int) -> bool:
        return self.broker.access.denies(ctx, op, A.CLUSTER, A.CLUSTER_NAME)

    def alter(self, ctx: RequestContext, req: AlterPartitionReassignmentsRequest
              ) -> dict[str, Any]:
        allow_rf_change = req.allow_replication_factor_change  # True before v1
        base = {"throttle_time": 0, "allow_replication_factor_change": allow_rf_change}
        if self.denied(ctx, A.ALTER):
            return {**base, "error_code": E.cluster_authorization_failed,
                    "error_message": None, "responses": []}
        image = self.broker.image
        responses = []
        for t in req.topics:
            topic = image.topic(t.name)
            parts = {p.partition_id: p for p in topic.partitions} if topic else {}
            out = []
            for target in t.partitions:
                index = target.partition_index
                code, message = 0, None
                if topic is None:
                    code, message = (E.unknown_topic_or_partition,
                                     f"Unable to find a topic named {t.name}.")
                elif index not in parts:
                    code, message = (E.unknown_topic_or_partition,
                                     f"Unable to find partition {t.name}:{index}.")
                elif target.replicas is None:
                    code = E.no_reassignment_in_progress
                else:
                    message = assignment_error(tuple(target.replicas), parts[index].replicas,
                                               set(self.broker.broker_ids()), allow_rf_change)
                    if message is not None:
                        code = (E.invalid_replication_factor
                                if message.startswith("The replication factor")
                                else E.invalid_replica_assignment)
                out.append({"partition_index": index, "error_code": code,
                            "error_message": message})
            responses.append({"name": t.name, "partitions": out})
        return {**base, "error_code": 0, "error_message": None, "responses": responses}

    def list_reassignments(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        if self.denied(ctx, A.DESCRIBE):
            return {"throttle_time": 0, "error_code": E.cluster_authorization_failed,
                    "error_message": None, "topics": []}
        return {"throttle_time": 0, "error_code": 0, "error_message": None, "topics": []}

    def alter_log_dirs(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        refused = self.denied(ctx, A.ALTER)
        image = self.broker.image
        results: dict[str, list[dict[str, Any]]] = {}
        for d in req.dirs:
            # (a NUL byte is no path: resolve() would raise)
            here = "\0" not in d.path and Path(d.path).resolve() == self.broker.data_dir
            code: int
            for t in d.topics:
                topic = image.topic(t.name)
                indexes = {p.partition_id for p in topic.partitions} if topic else set()
                for index in t.partitions:
                    if refused:
                        code = E.cluster_authorization_failed
                    elif not here:  # Kafka checks the directory first
                        code = E.log_dir_not_found
                    elif index not in indexes:
                        code = E.unknown_topic_or_partition
                    else:
                        code = 0
                    results.setdefault(t.name, []).append(
                        {"partition_index": index, "error_code": code})
        return {"throttle_time": 0, "results": [
            {"topic_name": name, "partitions": parts} for name, parts in results.items()]}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(34, 1, 2, handlers.alter_log_dirs)
    dispatcher.register(45, 0, 1, typed(AlterPartitionReassignmentsRequest, handlers.alter))
    dispatcher.register(46, 0, 0, handlers.list_reassignments)
