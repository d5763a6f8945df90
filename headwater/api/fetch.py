"""Fetch (key 1): byte ranges of segment files, long polling, fetch sessions.

Records are never decoded here: a partition's answer is the bytes of whole batches
from the one holding the fetch offset, read straight from the segment file. A fetch
that finds fewer than `min_bytes` parks until an append wakes it or `max_wait_ms`
runs out.

read_committed (isolation level 1) reads only below the last stable offset and lists the
aborted transactions overlapping the returned batches, so the consumer can drop their
records; a marker appended to end a transaction wakes parked fetches like data does.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as E

from ..log.batch import batches_end_offset
from ..security import acl as A
from ..storage.errors import LogError
from ..wire.dispatch import Dispatcher, RequestContext
from .fetch_sessions import CachedPartition, FetchSessionError

if TYPE_CHECKING:
    from ..broker import Broker
    from ..storage.partition import Partition

ZERO_UUID = uuid.UUID(int=0)
READ_COMMITTED = 1


def register(dispatcher: Dispatcher, broker: Broker) -> None:
    sessions = broker.fetch_sessions
    waiters = broker.partition_waiters

    def resolve_topic(name: str | None, topic_id: Any) -> tuple[str | None, Any, int]:
        image = broker.image
        if topic_id is not None and topic_id != ZERO_UUID:
            topic = image.topic_by_id(topic_id)
            return (topic.name if topic else None), topic_id, E.unknown_topic_id
        topic = image.topic(name) if name else None
        return name, (topic.topic_id if topic else ZERO_UUID), E.unknown_topic_or_partition

    def read_partition(name: str | None, index: int, cached: CachedPartition,
                       budget: int, isolation: int, missing_code: int) -> tuple[dict, int]:
        plog = broker.partition(name, index) if name is not None else None
        base: dict[str, Any] = {"partition_index": index, "preferred_read_replica": -1,
                "aborted_transactions": [] if isolation == READ_COMMITTED else None}
        if plog is None:
            return {**base, "error_code": missing_code, "high_watermark": -1,
                    "last_stable_offset": -1, "log_start_offset": -1, "records": b""}, 0
        hw = plog.high_watermark
        lso = plog.last_stable_offset
        start = plog.log_start_offset
        entry = {**base, "error_code": 0, "high_watermark": hw, "last_stable_offset": lso,
                 "log_start_offset": start, "records": b""}
        limit = min(cached.max_bytes, budget)
        try:
            upper = lso if isolation == READ_COMMITTED else hw
            data = plog.read(cached.fetch_offset, limit, upper) if limit > 0 else b""
            if data and isolation == READ_COMMITTED:
                entry["aborted_transactions"] = aborted_in(plog, cached.fetch_offset, upper,
                                                           data)
        except LogError as exc:
            # As Kafka: a partition that fails its read (OFFSET_OUT_OF_RANGE) reports no
            # watermarks (-1), not the log's.
            return {**entry, "error_code": exc.code, "high_watermark": -1,
                    "last_stable_offset": -1, "log_start_offset": -1, "records": b""}, 0
        entry["records"] = data
        return entry, len(data)

    async def handle(ctx: RequestContext, req: Any) -> dict:
        now = broker.now_ms()
        version = ctx.api_version
        isolation = getattr(req, "isolation_level", 0)
        session = None
        full = True
        session_id = getattr(req, "session_id", 0)
        epoch = getattr(req, "session_epoch", -1)
        if version >= 7:
            try:
                session, full = sessions.resolve(session_id, epoch, now)
            except FetchSessionError as exc:
                return {"throttle_time": 0, "error_code": exc.code, "session_id": 0,
                        "responses": ()}

        # The partition set this fetch covers: (name, topic_id, index) -> cached state.
        wanted: dict[tuple[str, int], CachedPartition] = (
            {} if session is None or full else session.partitions)
        unknown: list[tuple[str | None, Any, int, int]] = []
        if session is not None and full:
            session.partitions.clear()
            wanted = session.partitions
        for t in req.topics:
            name, topic_id, missing = resolve_topic(getattr(t, "topic", None),
                                                    getattr(t, "topic_id", None))
            for p in t.partitions:
                if name is None:
                    unknown.append((None, topic_id, p.partition, missing))
                    continue
                key = (name, p.partition)
                cached = wanted.get(key)
                if cached is None:
                    cached = wanted[key] = CachedPartition(p.fetch_offset,
                                                           p.partition_max_bytes, topic_id)
                else:
                    cached.fetch_offset = p.fetch_offset
                    cached.max_bytes = p.partition_max_bytes
        for t in getattr(req, "forgotten_topics_data", ()) or ():
            name, _tid, _ = resolve_topic(getattr(t, "topic", None),
                                          getattr(t, "topic_id", None))
            for index in t.partitions:
                wanted.pop((name, index), None)  # type: ignore[arg-type]  # an unresolved name is never a key

        if broker.access.enabled:
            # READ on every topic read, those an incremental session kept from earlier
            # fetches included (an ACL removed since is honoured, as Kafka re-checks).
            denied = {t for t in {k[0] for k in wanted}
                      if broker.access.denies(ctx, A.READ, A.TOPIC, t)}
            for key in [k for k in wanted if k[0] in denied]:
                cached = wanted.pop(key)
                unknown.append((key[0], cached.topic_id, key[1], E.topic_authorization_failed))
        quota_cap = broker.quotas.fetch_limit(ctx)
        max_wait_s = req.max_wait.total_seconds()
        min_bytes = req.min_bytes
        deadline = None
        while True:
            budget = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
            if quota_cap is not None:
                budget = min(budget, quota_cap)
            total = 0
            results: list[tuple[tuple[str, int], CachedPartition, dict]] = []
            errors = False
            for key, cached in wanted.items():
                entry, size = read_partition(key[0], key[1], cached, budget, isolation,
                                             E.unknown_topic_or_partition)
                if total == 0 and size > budget:
                    budget = 0
                else:
                    budget -= size
                total += size
                errors = errors or entry["error_code"] != 0
                results.append((key, cached, entry))
            if total >= min_bytes or errors or unknown or max_wait_s <= 0:
                break
            loop_now = broker.now_ms()
            if deadline is None:
                deadline = loop_now + max_wait_s * 1000
            remaining = (deadline - loop_now) / 1000
            if remaining <= 0:
                break
            plogs = [p for p in (broker.partition(k[0], k[1]) for k in wanted) if p]
            if not plogs:
                break
            await waiters.wait(plogs, remaining)

        throttle = broker.quotas.throttle(broker.quotas.fetch, ctx, total)
        if throttle > 0:
            # As Kafka: a throttled fetch is answered with no partitions, its bytes taken
            # back from the quota, and a new session not established (the client's next
            # fetch is a full one).
            broker.quotas.unrecord(broker.quotas.fetch, ctx, total)
            return {"throttle_time": throttle, "error_code": 0,
                    "session_id": session.session_id if session is not None and not full
                    else 0, "responses": ()}
        by_topic: dict[str, dict] = {}
        for (name, _index), cached, entry in results:
            if session is not None and not full:
                changed = (entry["records"] or entry["error_code"]
                           or entry["high_watermark"] != cached.high_watermark
                           or entry["log_start_offset"] != cached.log_start_offset
                           or entry["last_stable_offset"] != cached.last_stable_offset)
                if not changed:
                    continue
            cached.high_watermark = entry["high_watermark"]
            cached.log_start_offset = entry["log_start_offset"]
            cached.last_stable_offset = entry["last_stable_offset"]
            topic = by_topic.get(name)
            if topic is None:
                topic = by_topic[name] = {"topic": name, "topic_id": cached.topic_id,
                                          "partitions": []}
            topic["partitions"].append(entry)
        responses = list(by_topic.values())
        for name, topic_id, index, code in unknown:
            responses.append({"topic": name or "", "topic_id": topic_id, "partitions": [{
                "partition_index": index, "error_code": code, "high_watermark": -1,
                "last_stable_offset": -1, "log_start_offset": -1, "records": b"",
                "aborted_transactions": None, "preferred_read_replica": -1}]})
        if session is not None and not full:
            sessions.advance(session)
        return {"throttle_time": 0, "error_code": 0,
                "session_id": session.session_id if session is not None else 0,
                "responses": responses}

    # v18 (KIP-1166) adds a follower's high watermark (a tagged field a consumer leaves
    # at its default); advertised as by Kafka 4.4 (4.3 served it without advertising).
    # headwater has no followers, so the field is read and ignored, as Kafka ignores it
    # from a consumer.
    dispatcher.register(1, 4, 18, handle)


def aborted_in(plog: Partition, fetch_offset: int, upper: int, data: bytes) -> list[dict]:
    """The aborted transactions overlapping the batches in `data` (read from
    `fetch_offset` below `upper`). Looked up over the whole readable range first, which
    is cheap and nearly always empty; only when it is not are the returned batches walked
    to find where they end, so the list covers exactly what was returned (Kafka)."""
    found = plog.aborted_transactions(fetch_offset, upper)
    if not found:
        return []
    end = batches_end_offset(data)
    return [{"producer_id": pid, "first_offset": first} for pid, first in found
            if first < end]
