"""DescribeQuorum (55), UnregisterBroker (64), Add/RemoveRaftVoter (80, 81) and
UnregisterController (94): the one node as its own KRaft quorum (static: kraft.version 0,
no voter changes).

headwater is Kafka's combined mode on one node without Raft: the node is the only voter
and always the leader of `__cluster_metadata-0`, there are no observers, and the
metadata log's batches carry leader epoch 0 (as its snapshots do). So
`kafka-metadata-quorum describe --status / --replication` shows one voter, lag 0, and
the metadata log's end offset as high watermark. The voter's endpoints are the node's own
listeners: there is no separate controller listener.

UnregisterBroker removes a broker's registration in Kafka. An id that was never
registered gets Kafka's BROKER_ID_NOT_REGISTERED. Kafka also unregisters a broker that is
running, its own node included, after which a single-node Kafka has no broker and every
admin call times out; headwater refuses that case (INVALID_REQUEST, docs/differences.md).

In a cluster (the shared log) the quorum is the holder of the controller lease: these
requests are forwarded to it (`api/forwarding.py`), as Kafka's brokers forward them to
the active controller, so every broker answers as the controller does: DescribeQuorum's
leader and only voter is the active controller, which alone cannot unregister itself.
A live broker is registered (the `brokers` table) and refused as above: it registers
itself while it runs and deregisters when it stops.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..metadata.controller import METADATA_TOPIC
from ..security import acl as A
from ..wire.dispatch import Dispatcher, RequestContext
from .services import (
    HasAccess,
    HasClock,
    HasCluster,
    HasController,
    HasIdentity,
    HasListeners,
)

CONTROLLER_ID_NOT_REGISTERED = 136


ZERO_UUID = uuid.UUID(int=0)
# The leader epoch of every batch headwater writes to the metadata log (no elections).
METADATA_LEADER_EPOCH = 0


class Services(HasAccess, HasController, HasIdentity, HasCluster, HasListeners, HasClock,
               Protocol):
    """What these handlers use of the broker."""


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def describe_quorum(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        if self.broker.access.denies(ctx, A.DESCRIBE, A.CLUSTER, A.CLUSTER_NAME):
            return {"error_code": E.cluster_authorization_failed, "topics": (), "nodes": ()}
        wanted = [(t.topic_name, p.partition_index) for t in req.topics for p in t.partitions]
        if wanted != [(METADATA_TOPIC, 0)]:  # Kafka's raft client: that one partition only
            return {"error_code": 0, "error_message": "", "nodes": (), "topics": [
                {"topic_name": t.topic_name, "partitions": [
                    {"partition_index": p.partition_index,
                     "error_code": E.unknown_topic_or_partition,
                     "error_message": "This server does not host this topic-partition.",
                     "leader_id": 0, "leader_epoch": 0, "high_watermark": 0,
                     "current_voters": (), "observers": ()} for p in t.partitions]}
                for t in req.topics]}
        log = self.broker.controller.log
        now = self.broker.now_ms()
        voter = {"replica_id": self.broker.node_id, "replica_directory_id": ZERO_UUID,
                 "log_end_offset": log.log_end_offset, "last_fetch_timestamp": now,
                 "last_caught_up_timestamp": now}
        listeners = []
        for listener, server in zip(self.broker.listeners, self.broker.servers, strict=False):
            listeners.append({"name": listener.name, "host": listener.advertised_host,
                              "port": listener.advertised_port or server.port})
        return {"error_code": 0, "error_message": None,
                "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{
                    "partition_index": 0, "error_code": 0, "error_message": None,
                    "leader_id": self.broker.node_id, "leader_epoch": METADATA_LEADER_EPOCH,
                    "high_watermark": log.high_watermark,
                    "current_voters": [voter], "observers": []}]}],
                "nodes": [{"node_id": self.broker.node_id, "listeners": listeners}]}

    def unregister_broker(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        if self.broker.access.denies(ctx, A.ALTER, A.CLUSTER, A.CLUSTER_NAME):
            return {"throttle_time": 0, "error_code": E.cluster_authorization_failed,
                    "error_message": None}
        live = self.broker.broker_ids()
        if req.broker_id not in live:
            return {"throttle_time": 0, "error_code": E.broker_id_not_registered,
                    "error_message": f"Broker ID {req.broker_id} is not currently registered"}
        if len(live) > 1:
            return {"throttle_time": 0, "error_code": E.invalid_request,
                    "error_message": f"Broker {req.broker_id} is running: a broker of this "
                                     "cluster is registered while it runs and deregisters "
                                     "itself when it stops; it cannot be unregistered"}
        return {"throttle_time": 0, "error_code": E.invalid_request,
                "error_message": f"Broker {req.broker_id} is the only broker of this "
                                 "single-node cluster and serves this request; it cannot "
                                 "be unregistered"}

    def voter_change(self, ctx: RequestContext, req: Any, verb: str) -> dict[str, Any]:
        """AddRaftVoter / RemoveRaftVoter (`kafka-metadata-quorum add-controller /
        remove-controller`), checked as Kafka 4.4's KafkaRaftClient checks them, in its
        order: ALTER on the cluster, the cluster id, a valid voter (id >= 0, a directory
        id), for an addition an endpoint; then, as Kafka with a static quorum, refused:
        kraft.version is 0 (headwater supports no other), the voter set cannot change."""
        def answer(code: int, message: str | None) -> dict[str, Any]:
            return {"throttle_time": 0, "error_code": code, "error_message": message}
        if self.broker.access.denies(ctx, A.ALTER, A.CLUSTER, A.CLUSTER_NAME):
            return answer(E.cluster_authorization_failed, None)
        if req.cluster_id is not None and req.cluster_id != self.broker.cluster_id:
            return answer(E.inconsistent_cluster_id,
                          f'The given id "{req.cluster_id}" doesn\'t match the cluster id '
                          f'"{self.broker.cluster_id}"')
        directory = req.voter_directory_id
        if req.voter_id < 0 or directory is None or directory == ZERO_UUID:
            return answer(E.invalid_request,
                          f"{verb.capitalize()} voter request didn't include a valid voter")
        if verb == "add" and not req.listeners:
            return answer(E.invalid_request,
                          "Add voter request didn't include the endpoint "
                          "(Endpoints(endpoints={})) for the default listener "
                          f"ListenerName({self.broker.listeners[0].name})")
        return answer(E.unsupported_version,
                      f"Cluster doesn't support {'adding' if verb == 'add' else 'removing'} "
                      "voter because the kraft.version feature is 0")

    def unregister_controller(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        """`kafka-cluster unregister-controller` (Kafka 4.4): the only controller is this
        node, active, so as Kafka: itself INVALID_REQUEST, any other id
        CONTROLLER_ID_NOT_REGISTERED (136, not in kio's ErrorCode)."""
        if self.broker.access.denies(ctx, A.ALTER, A.CLUSTER, A.CLUSTER_NAME):
            return {"throttle_time": 0, "error_code": int(E.cluster_authorization_failed),
                    "error_message": None}
        if req.controller_id == self.broker.node_id:
            return {"throttle_time": 0, "error_code": int(E.invalid_request),
                    "error_message": "Controller cannot unregister itself while it is "
                                     "active."}
        return {"throttle_time": 0, "error_code": CONTROLLER_ID_NOT_REGISTERED,
                "error_message": f"Controller ID {req.controller_id} is not currently "
                                 "registered."}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)
    dispatcher.register(55, 0, 2, handlers.describe_quorum)
    dispatcher.register(64, 0, 0, handlers.unregister_broker)
    dispatcher.register(94, 0, 0, handlers.unregister_controller)
    dispatcher.register(80, 0, 1, lambda ctx, req: handlers.voter_change(ctx, req, "add"))
    dispatcher.register(81, 0, 0, lambda ctx, req: handlers.voter_change(ctx, req, "remove"))
