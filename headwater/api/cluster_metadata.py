"""Metadata (key 3), DescribeCluster (key 60) and DescribeTopicPartitions (key 75).

Metadata is also where topics are auto-created (`auto.create.topics.enable`), as in
Kafka: a client asking for an unknown topic with allow_auto_topic_creation gets it
created with `num.partitions` partitions. Kafka answers LEADER_NOT_AVAILABLE until the
leader is elected; creation is synchronous here, so the answer already has the topic.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from kio.schema.describe_cluster.v2.request import DescribeClusterRequest
from kio.schema.errors import ErrorCode as E

from ..metadata.assignments import reported_replicas
from ..metadata.controller import NewTopic
from ..metadata.image import PartitionImage, TopicImage
from ..metadata.topics import INTERNAL_TOPICS, topic_name_error
from ..security import acl as A
from ..wire.dispatch import LISTENER, Dispatcher, RequestContext, typed
from .services import (
    HasAccess,
    HasCluster,
    HasConfig,
    HasController,
    HasIdentity,
    HasImage,
    HasListeners,
    HasTopicCreation,
)

ZERO_UUID = uuid.UUID(int=0)


class Services(HasAccess, HasImage, HasController, HasIdentity, HasConfig, HasCluster,
               HasListeners, HasTopicCreation, Protocol):
    """What these handlers use of the broker."""


def topic_entry(broker: Services, topic: TopicImage) -> dict[str, Any]:
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.name in INTERNAL_TOPICS,
        "partitions": [partition_entry(broker, topic, p) for p in topic.partitions],
    }


def partition_entry(broker: Services, topic: TopicImage, p: PartitionImage,
                    **extra: Any) -> dict[str, Any]:
    """One partition as Metadata and DescribeTopicPartitions describe it. In a cluster the
    leader is the broker serving it (the holder of its lease, epoch the lease's); the
    coordinators' internal topics too, unless they follow the controller
    (headwater.shared.coordinators=controller)."""
    cluster = broker.cluster
    if cluster is None:
        return {"error_code": 0, "partition_index": p.partition_id, "leader_id": p.leader,
                "leader_epoch": p.leader_epoch, "replica_nodes": p.replicas,
                "isr_nodes": p.isr, "offline_replicas": (), **extra}
    if topic.name in INTERNAL_TOPICS and not cluster.spreads_coordinators:
        leader, epoch = cluster.controller_id(), 0
    else:
        leader, epoch = cluster.leader(topic.name, topic.topic_id, p.partition_id)
    nodes = reported_replicas(p.replicas, leader, broker.broker_ids()) if leader >= 0 else ()
    return {"error_code": 0 if leader >= 0 else E.leader_not_available,
            "partition_index": p.partition_id, "leader_id": leader, "leader_epoch": epoch,
            "replica_nodes": nodes, "isr_nodes": nodes, "offline_replicas": (), **extra}


def broker_entries(broker: Services, ctx: RequestContext) -> list[tuple[int, str, int,
                                                                      str | None]]:
    """(node id, host, port, rack) of the live brokers: this one alone on one node."""
    listener = ctx.attrs.get(LISTENER)
    return [(b.node_id, *b.address(listener), b.rack) for b in broker.topology.brokers()]


def controller_id(broker: Services) -> int:
    return broker.topology.controller_id()


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def brokers(self, ctx: RequestContext) -> list[dict[str, Any]]:
        return [{"node_id": n, "host": h, "port": p, "rack": r}
                for n, h, p, r in broker_entries(self.broker, ctx)]

    def handle_metadata(self, ctx: RequestContext, req: Any) -> dict[str, Any]:  # noqa: C901
        # Untyped (not read as the newest version): v8-10's
        # include_cluster_authorized_operations is gone from v11, and Metadata is on
        # every client's path.
        image = self.broker.image
        access = self.broker.access
        topics_out: list[dict[str, Any]] = []
        requested = req.topics

        def hidden(name: str) -> bool:
            return access.enabled and not access.allowed(ctx, A.DESCRIBE, A.TOPIC, name)

        def denied(name: str | None, topic_id: Any) -> dict[str, Any]:
            return {"error_code": E.topic_authorization_failed, "name": name,
                    "topic_id": ZERO_UUID if topic_id is None else topic_id,
                    "partitions": ()}

        if requested is None or (ctx.api_version == 0 and not requested):
            for listed in image.topics_by_name.values():
                if not hidden(listed.name):  # as Kafka: unauthorized topics are left out
                    topics_out.append(topic_entry(self.broker, listed))
        else:
            auto = (self.broker.config.get_bool("auto.create.topics.enable")
                    and getattr(req, "allow_auto_topic_creation", True))
            to_create: list[str] = []
            for t in requested:
                name = getattr(t, "name", None)
                topic_id = getattr(t, "topic_id", None)  # v10+
                if name is None and topic_id is not None and topic_id != ZERO_UUID:
                    topic = image.topic_by_id(topic_id)
                    if topic is None:
                        topics_out.append({"error_code": E.unknown_topic_id, "name": None,
                                           "topic_id": topic_id, "partitions": ()})
                    elif hidden(topic.name):
                        topics_out.append(denied(None, topic_id))
                    else:
                        topics_out.append(topic_entry(self.broker, topic))
                    continue
                topic = image.topic(name) if name is not None else None
                if name is not None and hidden(name):
                    topics_out.append(denied(name, None))
                elif topic is not None:
                    topics_out.append(topic_entry(self.broker, topic))
                elif name is not None and topic_name_error(name):
                    topics_out.append({"error_code": E.invalid_topic_exception, "name": name,
                                       "topic_id": ZERO_UUID, "partitions": ()})
                elif auto and name is not None and access.enabled and not (
                        access.allowed(ctx, A.CREATE, A.CLUSTER, A.CLUSTER_NAME)
                        or access.allowed(ctx, A.CREATE, A.TOPIC, name)):
                    topics_out.append(denied(name, None))
                elif auto and name is not None:
                    to_create.append(name)
                    topics_out.append({"name": name})
                else:
                    topics_out.append({"error_code": E.unknown_topic_or_partition,
                                       "name": name, "topic_id": ZERO_UUID, "partitions": ()})
            if to_create and not self.broker.is_controller():
                # the controller creates it (as Kafka's brokers ask theirs); until this
                # broker's image has it, clients are told to retry
                self.broker.auto_create_elsewhere(ctx, to_create)
                for i, entry in enumerate(topics_out):
                    if entry.keys() == {"name"}:
                        topics_out[i] = {"error_code": E.leader_not_available,
                                         "name": entry["name"], "topic_id": ZERO_UUID,
                                         "partitions": ()}
            elif to_create:
                results = self.broker.controller.create_topics([NewTopic(n) for n in to_create])
                by_name = {t.name: (err, img) for t, err, img in results}
                for i, entry in enumerate(topics_out):
                    if entry.keys() == {"name"}:
                        err, img = by_name[entry["name"]]
                        current = self.broker.image.topic(entry["name"])
                        if current is not None:
                            topics_out[i] = topic_entry(self.broker, current)
                        else:
                            code = err.code if err else E.leader_not_available
                            topics_out[i] = {"error_code": code, "name": entry["name"],
                                             "topic_id": ZERO_UUID, "partitions": ()}
        if getattr(req, "include_topic_authorized_operations", False):
            for entry in topics_out:
                if entry.get("error_code", 0) == 0 and entry.get("name"):
                    entry["topic_authorized_operations"] = access.operations(
                        ctx, A.TOPIC, entry["name"])
        cluster_ops = -2147483648
        if getattr(req, "include_cluster_authorized_operations", False):  # v8-10
            cluster_ops = access.cluster_operations(ctx)
        return {
            "throttle_time": 0,
            "brokers": self.brokers(ctx),
            "cluster_id": self.broker.cluster_id,
            "controller_id": controller_id(self.broker),
            "topics": topics_out,
            "cluster_authorized_operations": cluster_ops,
        }

    def handle_describe_cluster(self, ctx: RequestContext, req: DescribeClusterRequest
                                ) -> dict[str, Any]:
        endpoint_type = req.endpoint_type  # brokers (1) before v1
        if endpoint_type not in (1,):
            return {"error_code": E.unsupported_endpoint_type, "cluster_id": self.broker.cluster_id,
                    "error_message": f"endpoint type {endpoint_type} is not served here",
                    "brokers": ()}
        return {
            "throttle_time": 0,
            "error_code": 0,
            "cluster_id": self.broker.cluster_id,
            "controller_id": controller_id(self.broker),
            "endpoint_type": endpoint_type,
            "brokers": [{"broker_id": n, "host": h, "port": p, "rack": r,
                         "is_fenced": False} for n, h, p, r in broker_entries(self.broker, ctx)],
            "cluster_authorized_operations": (
                self.broker.access.cluster_operations(ctx)
                if req.include_cluster_authorized_operations else -2147483648),
        }

    def handle_describe_topic_partitions(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        return describe_topic_partitions(self.broker, ctx, req)


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(3, 0, 13, handlers.handle_metadata)
    dispatcher.register(60, 0, 2, typed(DescribeClusterRequest, handlers.handle_describe_cluster))
    dispatcher.register(75, 0, 0, handlers.handle_describe_topic_partitions)


def _dtp_error(req: Any, code: int) -> dict[str, Any]:
    """Kafka's error response (DescribeTopicPartitionsRequest.getErrorResponse): every
    requested topic with the error, nothing else (no cursor)."""
    return {"throttle_time": 0, "next_cursor": None, "topics": [
        {"error_code": code, "name": t.name, "topic_id": ZERO_UUID, "is_internal": False,
         "partitions": ()} for t in req.topics]}


def describe_topic_partitions(broker: Services, ctx: RequestContext, req: Any) -> dict[str, Any]:
    """DescribeTopicPartitions (KIP-966), as Kafka 4.4's
    DescribeTopicPartitionsRequestHandler and KRaftMetadataCache.describeTopicResponse
    answer it: the requested topics (all topics when none is named) from the cursor's
    topic on, sorted by name, authorized for DESCRIBE; partitions from the cursor's
    partition for the cursor's topic; at most min(max.request.partition.size.limit,
    ResponsePartitionLimit) partitions (at least 1), NextCursor pointing at the first
    partition left out. A named topic that is unknown (or illegally named) is answered
    with its error; a named topic the principal may not describe with
    TOPIC_AUTHORIZATION_FAILED after the others. A cursor with a negative partition, or
    naming a topic the list does not contain, is INVALID_REQUEST for every topic."""
    image = broker.image
    access = broker.access
    cursor = req.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not req.topics
    if any(not t.name for t in req.topics):
        # Kafka fails the request (an empty resource name) with UNKNOWN_SERVER_ERROR
        return _dtp_error(req, E.unknown_server_error)
    if fetch_all:
        names = {n for n in image.topics_by_name if n >= cursor_topic}
    else:
        names = {t.name for t in req.topics if t.name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in names:
            return _dtp_error(req, E.invalid_request)
    if cursor is not None and cursor.partition_index < 0:
        return _dtp_error(req, E.invalid_request)
    limit = broker.config.get_int("max.request.partition.size.limit")
    remaining = max(min(limit, req.response_partition_limit), 1)
    topics: list[dict[str, Any]] = []
    denied: list[dict[str, Any]] = []
    next_cursor = None
    for name in sorted(names):
        if access.enabled and not access.allowed(ctx, A.DESCRIBE, A.TOPIC, name):
            if not fetch_all:
                denied.append({"error_code": E.topic_authorization_failed, "name": name,
                               "topic_id": ZERO_UUID, "is_internal": False,
                               "partitions": ()})
            continue
        if remaining == 0:
            # the previous topics are complete: the next page starts at this one
            # (which may not exist, as in Kafka)
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        topic = image.topic(name)
        if topic is None:
            if not fetch_all:
                code = (E.invalid_topic_exception if topic_name_error(name)
                        else E.unknown_topic_or_partition)
                topics.append({"error_code": code, "name": name, "topic_id": ZERO_UUID,
                               "is_internal": name in INTERNAL_TOPICS, "partitions": ()})
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        count = len(topic.partitions)
        upper = min(count, start + remaining)
        parts = [partition_entry(broker, topic, p, eligible_leader_replicas=(),
                                 last_known_elr=())
                 for p in topic.partitions[start:upper]] if start < upper else []
        topics.append({"error_code": 0, "name": name, "topic_id": topic.topic_id,
                       "is_internal": name in INTERNAL_TOPICS, "partitions": parts})
        remaining -= len(parts)
        if upper < count:
            next_cursor = {"topic_name": name, "partition_index": upper}
            break
    for entry in topics:
        entry["topic_authorized_operations"] = access.operations(ctx, A.TOPIC, entry["name"])
    return {"throttle_time": 0, "topics": topics + denied, "next_cursor": next_cursor}
