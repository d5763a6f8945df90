"""ShareFetch (78) and ShareAcknowledge (79), v1-v2: decode, authorize, call the share
fetch service (`share/fetch_service.py`: sessions, acknowledgements, acquisition and the
long poll), encode.

The responses name exactly the partitions of the request, plus, for a ShareFetch, those
of its session that acquired records (librdkafka 2.16 crashes on any other partition).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..security import acl as A
from ..share.config import AcquireMode
from ..share.fetch_service import FetchRequest, Key, Outcome, Unreadable
from ..share.outcomes import AcknowledgementBatch
from ..wire.dispatch import Dispatcher, RequestContext
from .services import (
    HasAccess,
    HasCluster,
    HasIdentity,
    HasImage,
    HasQuotas,
    HasShareGroups,
)
from .share_wire import PartitionEntry, share_acknowledge_response, share_fetch_response

ZERO_UUID = uuid.UUID(int=0)  # kio's None topic id: no topic

ACQUIRE_MODES = frozenset(int(m) for m in AcquireMode)


class Services(HasAccess, HasImage, HasIdentity, HasCluster, HasQuotas, HasShareGroups,
               Protocol):
    """What these handlers use of the broker."""


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker
        self.service = broker.share_fetch

    def top_error(self, code: E, message: str, lock_ms: int = 0) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "error_message": message,
                "acquisition_lock_timeout": lock_ms, "responses": (), "node_endpoints": ()}

    def requested(self, topics: Iterable[Any]) -> dict[Key, tuple[AcknowledgementBatch, ...]]:
        out: dict[Key, tuple[AcknowledgementBatch, ...]] = {}
        for t in topics:
            for p in t.partitions:
                out[(t.topic_id, p.partition_index)] = tuple(
                    AcknowledgementBatch(b.first_offset, b.last_offset,
                                         tuple(b.acknowledge_types))
                    for b in p.acknowledgement_batches)
        return out

    def check_ids(self, ctx: RequestContext, req: Any) -> tuple[E, str] | None:
        """Both ids present (so `req.group_id or ""` below never is), and READ on the
        group."""
        if not req.group_id:
            return E.invalid_group_id, "The group id is empty"
        if not req.member_id:
            return E.unknown_member_id, "The member id is empty"
        if self.broker.access.denies(ctx, A.READ, A.GROUP, req.group_id):
            return E.group_authorization_failed, "Group authorization failed."
        return None

    def unreadable(self, ctx: RequestContext) -> Unreadable:
        """The share-partitions whose topic the principal may not READ: they answer
        TOPIC_AUTHORIZATION_FAILED, the others are served (as Kafka)."""
        access = self.broker.access

        def check(keys: Iterable[Key]) -> set[Key]:
            if not access.enabled:
                return set()
            verdict: dict[uuid.UUID, bool] = {}
            out = set()
            for key in keys:
                if key[0] not in verdict:
                    topic = self.broker.image.topic_by_id(key[0])
                    verdict[key[0]] = topic is not None and access.denies(
                        ctx, A.READ, A.TOPIC, topic.name)
                if verdict[key[0]]:
                    out.add(key)
            return out
        return check

    # ---- ShareFetch ------------------------------------------------------------------
    async def recover(self, ctx: RequestContext, req: Any) -> list[bytes | bytearray]:
        """Another broker's share coordinator asks this leader to load share-partitions
        that owe dead letters (shared/node.py's `recover_share_partition`)."""
        refused = self.broker.access.denies(ctx, A.CLUSTER_ACTION, A.CLUSTER, A.CLUSTER_NAME)
        by_topic: dict[uuid.UUID, list[PartitionEntry]] = {}
        for t in req.topics:
            for p in t.partitions:
                code = E.cluster_authorization_failed if refused else \
                    await self.broker.share_partitions.recover((req.group_id, t.topic_id,
                                                                p.partition_index))
                by_topic.setdefault(t.topic_id, []).append(
                    PartitionEntry(p.partition_index, int(code), leader_id=self.broker.node_id))
        return share_fetch_response(0, None, 0, by_topic.items())

    async def share_fetch(self, ctx: RequestContext, req: Any
                          ) -> dict[str, Any] | list[bytes | bytearray]:
        if self.broker.cluster is not None and self.broker.cluster.asks_to_recover_share(ctx.client_id):
            return await self.recover(ctx, req)
        bad = self.check_ids(ctx, req)
        if bad is not None:
            return self.top_error(*bad)
        # v1 and v2 read into one typed FetchRequest here, not upgraded to v2's class
        # first (`wire.dispatch.typed`): on this path that cost ~17 us per request.
        mode = getattr(req, "share_acquire_mode", 0)  # v2+
        if mode not in ACQUIRE_MODES:
            return self.top_error(E.invalid_request, f"Unknown share acquire mode: {mode}")
        request = FetchRequest(
            req.group_id or "", req.member_id or "", req.share_session_epoch,
            self.requested(req.topics),
            forgotten=[(t.topic_id or ZERO_UUID, p) for t in req.forgotten_topics_data
                       for p in t.partitions],
            renew=getattr(req, "is_renew_ack", False), max_bytes=req.max_bytes,
            max_records=req.max_records, batch_size=req.batch_size,
            mode=AcquireMode(mode),
            max_wait_s=req.max_wait.total_seconds())
        outcome = await self.service.fetch(request, self.unreadable(ctx))
        if outcome.error is not None:
            return self.top_error(*outcome.error, outcome.lock_ms)
        # consumer_byte_rate counts a share fetch's records, as Kafka does; they are sent
        # all the same (the client is slowed by the throttle time and the mute), where
        # Kafka drops them and leaves them acquired until their locks expire.
        throttle = self.broker.quotas.throttle(
            self.broker.quotas.fetch, ctx, sum(len(f.records) for f in outcome.fetched.values())
        ) if outcome.fetched else 0
        return self.respond(outcome, throttle)

    def respond(self, outcome: Outcome, throttle_ms: int = 0) -> list[bytes | bytearray]:
        by_topic: dict[uuid.UUID, list[PartitionEntry]] = {}
        node = self.broker.node_id
        fetched, errors = outcome.fetched, outcome.errors
        for key in dict.fromkeys([*outcome.named, *fetched, *errors]):
            err = errors.get(key)
            got = fetched.get(key)
            entry = PartitionEntry(key[1], leader_id=node, acknowledge_error_code=int(
                outcome.ack_errors.get(key, E.none)))
            if err is not None:
                entry.error_code, entry.error_message = int(err.code), err.message or None
            if got is not None:
                entry.records = got.records
                entry.acquired = [(r.first_offset, r.last_offset, r.delivery_count)
                                  for r in got.acquired]
            by_topic.setdefault(key[0], []).append(entry)
        return share_fetch_response(0, None, outcome.lock_ms, by_topic.items(), throttle_ms)

    # ---- ShareAcknowledge ------------------------------------------------------------
    async def share_acknowledge(self, ctx: RequestContext, req: Any
                                ) -> dict[str, Any] | list[bytes | bytearray]:
        bad = self.check_ids(ctx, req)
        if bad is not None:
            return self.top_error(*bad)
        outcome = await self.service.acknowledge(
            req.group_id or "", req.member_id or "", req.share_session_epoch,
            self.requested(req.topics),
            getattr(req, "is_renew_ack", False), self.unreadable(ctx))  # v2+
        if outcome.error is not None:
            return self.top_error(*outcome.error, outcome.lock_ms)
        by_topic: dict[uuid.UUID, list[tuple[int, int, int]]] = {}
        for key in outcome.named:
            by_topic.setdefault(key[0], []).append(
                (key[1], int(outcome.ack_errors.get(key, E.none)), self.broker.node_id))
        return share_acknowledge_response(ctx.api_version, 0, None, outcome.lock_ms,
                                          by_topic.items())


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)
    # Not `typed`: upgrading a v1 request to v2's class measured ~17 us per request on
    # the share path (bench/share_path_bench.py), against ~330 us a round trip.
    dispatcher.register(78, 1, 2, handlers.share_fetch)
    dispatcher.register(79, 1, 2, handlers.share_acknowledge)
