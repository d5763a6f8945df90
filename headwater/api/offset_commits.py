"""OffsetCommit (8), OffsetFetch (9) and OffsetDelete (47) over the group coordinator.

OffsetCommit checks topics against the metadata image before the coordinator sees them,
as Kafka's KafkaApis does against its metadata cache: a partition of a topic that does
not exist (or past its partition count) gets UNKNOWN_TOPIC_OR_PARTITION, an unknown
topic id (v10) UNKNOWN_TOPIC_ID, and only the rest goes to the group. So nothing is
written to `__consumer_offsets` for them, and when nothing is left the group is not
consulted at all (no generation or member errors, no simple group created): the same
for classic, consumer (KIP-848) and simple (generation -1) commits.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..coordinator.runtime import NotReady
from ..group.offsets import PartitionCommit, as_fetch_entry
from ..security import acl as A
from ..storage.errors import LogError
from ..wire.dispatch import Dispatcher, RequestContext
from .services import HasAccess, HasGroups, HasImage

if TYPE_CHECKING:
    from ..group.coordinator import GroupCoordinator

ZERO_UUID = uuid.UUID(int=0)


class Services(HasAccess, HasImage, HasGroups, Protocol):
    """What these handlers use of the broker."""


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def groups(self) -> GroupCoordinator:
        return self.broker.groups

    def topic_name(self, t: Any) -> tuple[str | None, Any]:
        """(name, topic_id) of a request topic; name None when an id is unknown."""
        topic_id = getattr(t, "topic_id", None)
        if topic_id is not None or not hasattr(t, "name"):
            # v10 names topics by id only; a zero id (kio's None) is an unknown id.
            topic = self.broker.image.topic_by_id(topic_id) if topic_id is not None else None
            return (topic.name if topic else None), topic_id or ZERO_UUID
        return t.name, None

    # ---- OffsetCommit --------------------------------------------------------------
    async def handle_commit(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        unknown: list[tuple[Any, list[int]]] = []
        topics: list[tuple[str, list[PartitionCommit]]] = []
        missing: dict[str, dict[int, int]] = {}  # topic -> partition -> error
        ids: dict[str, Any] = {}
        image = self.broker.image
        access = self.broker.access
        group_denied = access.denies(ctx, A.READ, A.GROUP, req.group_id)
        for t in req.topics:
            name, topic_id = self.topic_name(t)
            if name is None:
                unknown.append((topic_id, [p.partition_index for p in t.partitions]))
                continue
            ids[name] = topic_id
            if group_denied or access.denies(ctx, A.READ, A.TOPIC, name):
                code = (E.group_authorization_failed if group_denied
                        else E.topic_authorization_failed)
                missing.setdefault(name, {}).update((p.partition_index, code)
                                                    for p in t.partitions)
                continue
            topic = image.topic(name)
            count = len(topic.partitions) if topic is not None else 0
            parts = []
            for p in t.partitions:
                if 0 <= p.partition_index < count:
                    parts.append(PartitionCommit(p.partition_index, p.committed_offset,
                                                 getattr(p, "committed_leader_epoch", -1),
                                                 p.committed_metadata))
                else:
                    missing.setdefault(name, {})[p.partition_index] = \
                        E.unknown_topic_or_partition
            if parts:
                topics.append((name, parts))
        codes: dict[str, dict[int, int]] = {}
        if topics:
            # answered once the offsets are committed (on the shared log, their window)
            try:
                codes = await self.groups().write_committed(
                    req.group_id, lambda shard, now: shard.offsets.commit(
                        req.group_id, req.member_id, getattr(req, "group_instance_id", None),
                        req.generation_id_or_member_epoch, topics, ctx.api_version, now))
            except (NotReady, LogError) as exc:
                # not committed: NOT_COORDINATOR, as Kafka's coordinators answer a failed
                # append (the client finds the coordinator again and retries)
                failed = int(exc.code if isinstance(exc, NotReady) else E.not_coordinator)
                codes = {name: {p.partition: failed for p in parts} for name, parts in topics}
        for name, parts_missing in missing.items():
            codes.setdefault(name, {}).update(parts_missing)
        out = [{"name": name, "topic_id": ids.get(name) or ZERO_UUID,
                "partitions": [{"partition_index": p, "error_code": c}
                               for p, c in parts.items()]}
               for name, parts in codes.items()]
        out += [{"name": "", "topic_id": tid,
                 "partitions": [{"partition_index": p, "error_code": E.unknown_topic_id}
                                for p in parts]} for tid, parts in unknown]
        return {"throttle_time": 0, "topics": out}

    # ---- OffsetFetch ---------------------------------------------------------------
    async def fetch_group(self, ctx: RequestContext, group_id: str, member_id: str | None,
                          member_epoch: int, req_topics: Any, by_id: bool,
                          require_stable: bool = False) -> dict[str, Any]:
        access = self.broker.access
        if access.denies(ctx, A.DESCRIBE, A.GROUP, group_id):
            return {"group_id": group_id, "topics": [],
                    "error_code": E.group_authorization_failed}
        topics: list[tuple[str, list[int]]] | None = None
        unknown = []
        denied: list[tuple[str, Any, list[int]]] = []
        if req_topics is not None:
            topics = []
            for t in req_topics:
                name, topic_id = self.topic_name(t)
                if name is None:
                    unknown.append((topic_id, list(t.partition_indexes)))
                elif access.denies(ctx, A.DESCRIBE, A.TOPIC, name):
                    denied.append((name, topic_id, list(t.partition_indexes)))
                else:
                    topics.append((name, list(t.partition_indexes)))
        try:  # answered once the offsets it read are committed
            error, found = await self.groups().read_committed(
                group_id, lambda shard: shard.offsets.fetch(
                    group_id, member_id, member_epoch, topics, require_stable))
        except NotReady as exc:
            error, found = exc.code, {}
        except LogError:
            error, found = E.not_coordinator, {}
        out = []
        for name, parts in found.items():
            if req_topics is None and access.denies(ctx, A.DESCRIBE, A.TOPIC, name):
                continue  # as Kafka: all offsets means those of topics one may see
            topic = self.broker.image.topic(name)
            out.append({"name": name,
                        "topic_id": topic.topic_id if topic else ZERO_UUID,
                        "partitions": [as_fetch_entry(p, c) for p, c in parts.items()]})
        for tid, parts in unknown:
            out.append({"name": "", "topic_id": tid, "partitions": [
                as_fetch_entry(p, None, E.unknown_topic_id) for p in parts]})
        for name, tid, parts in denied:
            out.append({"name": name, "topic_id": tid or ZERO_UUID, "partitions": [
                as_fetch_entry(p, None, E.topic_authorization_failed) for p in parts]})
        if by_id:
            out = [t for t in out if t["topic_id"] != ZERO_UUID or not t["partitions"]]
        return {"group_id": group_id, "topics": out, "error_code": error}

    async def handle_fetch(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        # RequireStable (v7+): UNSTABLE_OFFSET_COMMIT for partitions whose offsets an
        # open transaction is about to change.
        stable = bool(getattr(req, "require_stable", False))
        if ctx.api_version >= 8:
            results = [await self.fetch_group(ctx, g.group_id, getattr(g, "member_id", None),
                                              getattr(g, "member_epoch", -1), g.topics,
                                              ctx.api_version >= 10, stable)
                       for g in req.groups]
            return {"throttle_time": 0, "groups": results}
        one = await self.fetch_group(ctx, req.group_id, None, -1, req.topics, False, stable)
        if one["error_code"] and ctx.api_version < 2:
            for t in one["topics"]:
                for p in t["partitions"]:
                    p["error_code"] = one["error_code"]
        return {"throttle_time": 0, "topics": one["topics"], "error_code": one["error_code"]}

    # ---- OffsetDelete --------------------------------------------------------------
    async def handle_delete(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        if self.broker.access.denies(ctx, A.DELETE, A.GROUP, req.group_id):
            return {"error_code": E.group_authorization_failed, "throttle_time": 0,
                    "topics": ()}
        readable = [t for t in req.topics
                    if not self.broker.access.denies(ctx, A.READ, A.TOPIC, t.name)]
        refused = [{"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": E.topic_authorization_failed}
            for p in t.partitions]} for t in req.topics if t not in readable]
        topics = [(t.name, [p.partition_index for p in t.partitions]) for t in readable]
        try:
            error, codes = await self.groups().write_committed(
                req.group_id, lambda shard, now: shard.offsets.delete(req.group_id, topics))
        except NotReady as exc:
            error, codes = exc.code, {}
        except LogError:
            error, codes = E.not_coordinator, {}
        return {"error_code": error, "throttle_time": 0, "topics": [
            {"name": name, "partitions": [{"partition_index": p, "error_code": c}
                                          for p, c in codes.get(name, {}).items()]}
            for name, _ in topics] + refused if not error else ()}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(8, 2, 10, handlers.handle_commit)
    dispatcher.register(9, 1, 10, handlers.handle_fetch)
    dispatcher.register(47, 0, 0, handlers.handle_delete)
