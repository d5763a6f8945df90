"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..metadata.controller import ControllerError, NewTopic
from ..metadata.image import TopicImage
from ..security import acl as A
from ..wire.dispatch import Dispatcher, RequestContext
from .configs import describe_topic_configs
from .services import (
    HasAccess,
    HasConfig,
    HasController,
    HasIdentity,
    HasImage,
    HasQuotas,
    HasTopicCreation,
)

ZERO_UUID = uuid.UUID(int=0)
PROTECTED = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class Services(HasAccess, HasImage, HasController, HasIdentity, HasConfig,
               HasTopicCreation, HasQuotas, Protocol):
    """What these handlers use of the broker."""


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def handle_create(self, ctx: RequestContext, req: Any) -> Any:
        seen: dict[str, int] = {}
        for t in req.topics:
            seen[t.name] = seen.get(t.name, 0) + 1
        new_topics = []
        duplicates = {n for n, c in seen.items() if c > 1}
        access = self.broker.access
        cluster_create = not access.enabled or access.allowed(ctx, A.CREATE, A.CLUSTER,
                                                              A.CLUSTER_NAME)
        refused = []
        for t in req.topics:
            if t.name in duplicates:
                continue
            if not cluster_create and not access.allowed(ctx, A.CREATE, A.TOPIC, t.name):
                refused.append({"name": t.name, "topic_id": ZERO_UUID,
                                "error_code": E.topic_authorization_failed,
                                "error_message": "Authorization failed.",
                                "num_partitions": -1, "replication_factor": -1,
                                "configs": ()})
                continue
            assignments = ({a.partition_index: tuple(a.broker_ids) for a in t.assignments}
                           if t.assignments else None)
            new_topics.append(NewTopic(t.name, t.num_partitions, t.replication_factor,
                                       assignments, {c.name: c.value for c in t.configs}))
        quota = self.broker.quotas.mutation_quota(ctx)
        throttled: list[str] = []
        if quota is not None:  # valid topics take their partitions from it, in order
            admitted = []
            for t, err, image in self.broker.controller.create_topics(new_topics, True):
                if err is None and image is not None and not quota.admit(
                        self.partition_count(t, image)):
                    throttled.append(t.name)
                else:
                    admitted.append(t)
            new_topics = admitted
        results = self.broker.controller.create_topics(new_topics, req.validate_only)
        out = refused
        for t, err, image in results:
            if err is not None:
                out.append({"name": t.name, "topic_id": ZERO_UUID, "error_code": err.code,
                            "error_message": err.message, "num_partitions": -1,
                            "replication_factor": -1, "configs": ()})
                continue
            assert image is not None
            if access.enabled and not access.allowed(ctx, A.DESCRIBE_CONFIGS, A.TOPIC,
                                                     t.name):
                # as Kafka: created, but what it was created with is not described
                out.append({"name": t.name,
                            "topic_id": image.topic_id if not req.validate_only
                            else ZERO_UUID, "error_code": 0, "error_message": None,
                            "topic_config_error_code": E.topic_authorization_failed,
                            "num_partitions": -1, "replication_factor": -1, "configs": ()})
                continue
            partitions = self.partition_count(t, image)
            configs = [{"name": c["name"], "value": c["value"], "read_only": c["read_only"],
                        "config_source": c["config_source"], "is_sensitive": False}
                       for c in describe_topic_configs(self.broker, t.name, None, dict(t.configs or {}))]
            out.append({"name": t.name,
                        "topic_id": image.topic_id if not req.validate_only else ZERO_UUID,
                        "error_code": 0, "error_message": None,
                        "num_partitions": partitions, "replication_factor": 1,
                        "configs": configs})
        for name in sorted(duplicates):
            out.append({"name": name, "topic_id": ZERO_UUID, "error_code": E.invalid_request,
                        "error_message": "Create topics request from client contains "
                                         f"multiple entries for the following topic: {name}",
                        "num_partitions": -1, "replication_factor": -1, "configs": ()})
        for name in throttled:
            out.append({"name": name, "topic_id": ZERO_UUID,
                        "error_code": E.throttling_quota_exceeded, "error_message": None,
                        "num_partitions": -1, "replication_factor": -1, "configs": ()})
        response = {"throttle_time": self.broker.quotas.mutation_throttle(quota, ctx),
                    "topics": out}
        created = [t.name for t, err, _image in results if err is None]
        ready = (self.broker.partitions_ready(created, max(req.timeout.total_seconds(), 0) or 30.0)
                 if created and not req.validate_only else None)
        return _after(ready, response) if ready is not None else response

    def partition_count(self, t: NewTopic, image: TopicImage) -> int:
        return len(image.partitions) or (
            t.num_partitions if t.num_partitions > 0
            else len(t.assignments or {}) or self.broker.config.get_int("num.partitions"))

    def handle_delete(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        image = self.broker.image
        responses = []
        doomed: list[TopicImage] = []
        quota = self.broker.quotas.mutation_quota(ctx)
        if ctx.api_version >= 6:
            items = [(t.name, t.topic_id) for t in req.topics]
        else:
            items = [(name, None) for name in req.topic_names]
        for name, topic_id in items:
            if topic_id not in (None, ZERO_UUID):
                topic = image.topic_by_id(topic_id)
                if topic is None:
                    responses.append({"name": None, "topic_id": topic_id,
                                      "error_code": E.unknown_topic_id,
                                      "error_message": "This server does not host this "
                                                       "topic ID."})
                    continue
            else:
                topic = image.topic(name) if name else None
                if topic is None and name and self.broker.access.enabled and \
                        not self.broker.access.allowed(ctx, A.DELETE, A.TOPIC, name):
                    responses.append({"name": name, "topic_id": ZERO_UUID,
                                      "error_code": E.topic_authorization_failed,
                                      "error_message": "Topic authorization failed."})
                    continue
                if topic is None:
                    responses.append({"name": name, "topic_id": ZERO_UUID,
                                      "error_code": E.unknown_topic_or_partition,
                                      "error_message": "This server does not host this "
                                                       "topic-partition."})
                    continue
            if self.broker.access.enabled and not self.broker.access.allowed(
                    ctx, A.DELETE, A.TOPIC, topic.name):
                responses.append({"name": topic.name if topic_id in (None, ZERO_UUID)
                                  else None, "topic_id": topic_id or ZERO_UUID,
                                  "error_code": E.topic_authorization_failed,
                                  "error_message": "Topic authorization failed."})
                continue
            if topic.name in PROTECTED:
                responses.append({"name": topic.name, "topic_id": topic.topic_id,
                                  "error_code": E.topic_authorization_failed,
                                  "error_message": "Internal topics cannot be deleted"})
                continue
            if topic not in doomed:
                if quota is not None and not quota.admit(len(topic.partitions)):
                    responses.append({"name": topic.name, "topic_id": topic.topic_id,
                                      "error_code": E.throttling_quota_exceeded,
                                      "error_message": None})
                    continue
                doomed.append(topic)
            responses.append({"name": topic.name, "topic_id": topic.topic_id,
                              "error_code": 0, "error_message": None})
        self.broker.controller.delete_topics(doomed)
        return {"throttle_time": self.broker.quotas.mutation_throttle(quota, ctx),
                "responses": responses}

    def handle_create_partitions(self, ctx: RequestContext, req: Any) -> Any:
        results = []
        quota = self.broker.quotas.mutation_quota(ctx)
        for t in req.topics:
            assignments = ([tuple(a.broker_ids) for a in t.assignments]
                           if t.assignments is not None else None)
            if self.broker.access.enabled and not self.broker.access.allowed(ctx, A.ALTER, A.TOPIC,
                                                                             t.name):
                results.append({"name": t.name, "error_code": E.topic_authorization_failed,
                                "error_message": None})  # as Kafka: no message
                continue
            try:
                if quota is not None:  # a valid increase takes the partitions it adds
                    self.broker.controller.create_partitions(t.name, t.count, assignments, True)
                    topic = self.broker.image.topic(t.name)
                    added = t.count - (len(topic.partitions) if topic is not None else 0)
                    if not quota.admit(added):
                        results.append({"name": t.name,
                                        "error_code": E.throttling_quota_exceeded,
                                        "error_message": None})
                        continue
                self.broker.controller.create_partitions(t.name, t.count, assignments,
                                                         req.validate_only)
                results.append({"name": t.name, "error_code": 0, "error_message": None})
            except ControllerError as exc:
                results.append({"name": t.name, "error_code": exc.code,
                                "error_message": exc.message})
        response = {"throttle_time": self.broker.quotas.mutation_throttle(quota, ctx),
                    "results": results}
        grown = [r["name"] for r in results if r["error_code"] == 0]
        ready = (self.broker.partitions_ready(grown, max(req.timeout.total_seconds(), 0) or 30.0)
                 if grown and not req.validate_only else None)
        return _after(ready, response) if ready is not None else response


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(19, 2, 7, handlers.handle_create)
    dispatcher.register(20, 1, 6, handlers.handle_delete)
    dispatcher.register(37, 0, 3, handlers.handle_create_partitions)


async def _after(ready: Awaitable[None], response: dict[str, Any]) -> dict[str, Any]:
    """The response once the new partitions are served here (the shared log)."""
    await ready
    return response
