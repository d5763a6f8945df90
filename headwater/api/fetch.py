"""Fetch (key 1): decode, resolve topics, authorize, call the fetch service
(`fetch/service.py`: sessions, reads through the storage seam, the long poll), apply the
fetch quota, encode.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..fetch.service import FetchPlan, PartitionData
from ..fetch.sessions import FetchSessionError, PartitionKey
from ..security import acl as A
from ..wire.dispatch import Dispatcher, RequestContext
from .services import HasAccess, HasFetch, HasImage, HasQuotas

ZERO_UUID = uuid.UUID(int=0)
FIRST_SESSION_VERSION = 7  # KIP-227


class Services(HasAccess, HasImage, HasQuotas, HasFetch, Protocol):
    """What these handlers use of the broker."""


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker
        self.service = broker.fetch

    def resolve_topic(self, name: str | None, topic_id: Any) -> tuple[str | None, Any, int]:
        image = self.broker.image
        if topic_id is not None and topic_id != ZERO_UUID:
            topic = image.topic_by_id(topic_id)
            return (topic.name if topic else None), topic_id, E.unknown_topic_id
        topic = image.topic(name) if name else None
        return name, (topic.topic_id if topic else ZERO_UUID), E.unknown_topic_or_partition

    def entry(self, index: int, data: PartitionData) -> dict[str, Any]:
        return {"partition_index": index, "error_code": data.error_code,
                "high_watermark": data.high_watermark,
                "last_stable_offset": data.last_stable_offset,
                "log_start_offset": data.log_start_offset, "records": data.records,
                "aborted_transactions": None if data.aborted is None else [
                    {"producer_id": pid, "first_offset": first}
                    for pid, first in data.aborted],
                "preferred_read_replica": -1}

    async def handle(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        isolation = getattr(req, "isolation_level", 0)
        unknown: list[tuple[str | None, Any, int, int]] = []
        requested: list[tuple[PartitionKey, int, int, Any]] = []
        leader_epochs: dict[PartitionKey, int] = {}
        for t in req.topics:
            name, topic_id, missing = self.resolve_topic(getattr(t, "topic", None),
                                                         getattr(t, "topic_id", None))
            for p in t.partitions:
                if name is None:
                    unknown.append((None, topic_id, p.partition, missing))
                else:
                    requested.append(((name, p.partition), p.fetch_offset,
                                      p.partition_max_bytes, topic_id))
                    current = getattr(p, "current_leader_epoch", -1)
                    if current >= 0:
                        leader_epochs[(name, p.partition)] = current
        forgotten: list[PartitionKey] = []
        for t in getattr(req, "forgotten_topics_data", ()) or ():
            name, _tid, _ = self.resolve_topic(getattr(t, "topic", None),
                                               getattr(t, "topic_id", None))
            if name is not None:  # an unresolved name is never a key
                forgotten.extend((name, index) for index in t.partitions)
        try:
            plan: FetchPlan = self.service.plan(
                getattr(req, "session_id", 0), getattr(req, "session_epoch", -1),
                ctx.api_version < FIRST_SESSION_VERSION, requested, forgotten,
                leader_epochs)
        except FetchSessionError as exc:
            return {"throttle_time": 0, "error_code": exc.code, "session_id": 0,
                    "responses": ()}
        wanted = plan.wanted
        if self.broker.access.enabled:
            # READ on every topic read, those an incremental session kept from earlier
            # fetches included (an ACL removed since is honoured, as Kafka re-checks).
            denied = {t for t in {k[0] for k in wanted}
                      if self.broker.access.denies(ctx, A.READ, A.TOPIC, t)}
            for key in [k for k in wanted if k[0] in denied]:
                cached = wanted.pop(key)
                unknown.append((key[0], cached.topic_id, key[1], E.topic_authorization_failed))
        result = await self.service.read(wanted, isolation, req.max_bytes, req.min_bytes,
                                         req.max_wait.total_seconds(),
                                         self.broker.quotas.fetch_limit(ctx), answer_now=bool(unknown))
        session = plan.session
        throttle = self.broker.quotas.throttle(self.broker.quotas.fetch, ctx, result.total_bytes)
        if throttle > 0:
            # As Kafka: a throttled fetch is answered with no partitions, its bytes taken
            # back from the quota, and a new session not established (the client's next
            # fetch is a full one).
            self.broker.quotas.unrecord(self.broker.quotas.fetch, ctx, result.total_bytes)
            return {"throttle_time": throttle, "error_code": 0,
                    "session_id": session.session_id if session is not None and not plan.full
                    else 0, "responses": ()}
        by_topic: dict[str, dict[str, Any]] = {}
        for (name, index), cached, data in self.service.answer(plan, result):
            topic = by_topic.get(name)
            if topic is None:
                topic = by_topic[name] = {"topic": name, "topic_id": cached.topic_id,
                                          "partitions": []}
            topic["partitions"].append(self.entry(index, data))
        responses = list(by_topic.values())
        for name, topic_id, index, code in unknown:
            responses.append({"topic": name or "", "topic_id": topic_id, "partitions": [{
                "partition_index": index, "error_code": code, "high_watermark": -1,
                "last_stable_offset": -1, "log_start_offset": -1, "records": b"",
                "aborted_transactions": None, "preferred_read_replica": -1}]})
        return {"throttle_time": 0, "error_code": 0,
                "session_id": session.session_id if session is not None else 0,
                "responses": responses}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)
    # v18 (KIP-1166) adds a follower's high watermark (a tagged field a consumer leaves
    # at its default); advertised as by Kafka 4.4 (4.3 served it without advertising).
    # headwater has no followers, so the field is read and ignored, as Kafka ignores it
    # from a consumer.
    dispatcher.register(1, 4, 18, handlers.handle)
