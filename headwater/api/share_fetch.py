"""ShareFetch (78) and ShareAcknowledge (79), v1-v2: share sessions, acknowledgements and
acquisition of records from share-partitions (KIP-932).

A ShareFetch first applies its acknowledgements, then acquires from the session's
partitions in turn (the starting partition rotates, so one busy partition does not
starve the others) until MaxRecords or MaxBytes (MaxBytes 0: nothing, at once, as
Kafka answers it); with nothing acquired it waits up to
MaxWaitMs, woken by an append, an acknowledgement, a release or a lock expiry on one of
them. Each acknowledgement is answered only after its state write was persisted.

The responses name exactly the partitions of the request, plus, for a ShareFetch, those
of its session that acquired records (librdkafka 2.16 crashes on any other partition).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as E

from ..security import acl as A
from ..share.config import AcquireMode
from ..share.manager import PartitionFetch, ShareError
from ..share.outcomes import AcknowledgementBatch
from ..share.sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    ShareSession,
    ShareSessionError,
)
from ..wire.dispatch import Dispatcher, RequestContext
from .share_wire import PartitionEntry, share_acknowledge_response, share_fetch_response

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger("headwater.share")
RENEW = 4
LEAVE_GRACE_S = 5.0
Key = tuple[uuid.UUID, int]


def register(dispatcher: Dispatcher, broker: Broker) -> None:
    manager = broker.share_partitions
    sessions = broker.share_sessions
    rotation = itertools.count()

    if broker.groups is not None:
        def member_left(group_id: str, member_id: str) -> None:
            """A member left the group or was fenced. A consumer that closes sends its
            leave heartbeat first and its final acknowledgements (epoch -1) right after:
            its session is given LEAVE_GRACE_S for them, then closed and its records
            released. Without a session there is nothing to wait for."""
            session = sessions.get(group_id, member_id)
            if session is None:
                asyncio.ensure_future(manager.release_member(group_id, member_id))
                return

            def expire() -> None:
                if sessions.get(group_id, member_id) is session:  # no final request came
                    sessions.close(group_id, member_id)
                    asyncio.ensure_future(manager.release_member(group_id, member_id))

            asyncio.get_running_loop().call_later(LEAVE_GRACE_S, expire)

        broker.groups.add_share_member_listener(member_left)

    def top_error(code: E, message: str, lock_ms: int = 0) -> dict:
        return {"throttle_time": 0, "error_code": code, "error_message": message,
                "acquisition_lock_timeout": lock_ms, "responses": (), "node_endpoints": ()}

    def requested(topics: Iterable[Any]) -> dict[Key, tuple[AcknowledgementBatch, ...]]:
        out: dict[Key, tuple[AcknowledgementBatch, ...]] = {}
        for t in topics:
            for p in t.partitions:
                out[(t.topic_id, p.partition_index)] = tuple(
                    AcknowledgementBatch(b.first_offset, b.last_offset,
                                         tuple(b.acknowledge_types))
                    for b in p.acknowledgement_batches)
        return out

    async def acknowledge_all(group_id: str, member_id: str,
                              acks: dict[Key, tuple[AcknowledgementBatch, ...]],
                              renew_allowed: bool, denied: set[Key]) -> dict[Key, E]:
        results: dict[Key, E] = {}
        for key, batches in acks.items():
            if key in denied:
                results[key] = E.topic_authorization_failed
                continue
            if not batches:
                continue
            if not renew_allowed and any(RENEW in b.acknowledge_types for b in batches):
                results[key] = E.invalid_request
                continue
            results[key] = await manager.acknowledge((group_id, *key), member_id, batches)
        return results

    def is_member(group_id: str, member_id: str) -> bool:
        """Only members of the share group get records: Kafka 4.3 answers a ShareFetch
        from anyone else with nothing acquired (and no error), so do we."""
        groups = broker.groups
        return groups is None or groups.share_assignment(group_id, member_id) is not None

    def renew_enabled(group_id: str) -> bool:
        """KIP-1222's group switch; RENEW acknowledgements are INVALID_REQUEST when off."""
        config = manager.group_config(group_id)
        return config.get("share.renew.acknowledge.enable", "true").lower() == "true"

    def check_ids(ctx: RequestContext, req: Any) -> tuple[E, str] | None:
        if not req.group_id:
            return E.invalid_group_id, "The group id is empty"
        if not req.member_id:
            return E.unknown_member_id, "The member id is empty"
        if broker.access.denies(ctx, A.READ, A.GROUP, req.group_id):
            return E.group_authorization_failed, "Group authorization failed."
        return None

    def unreadable(ctx: RequestContext, keys: Iterable[Key]) -> set[Key]:
        """The share-partitions whose topic the principal may not READ: they answer
        TOPIC_AUTHORIZATION_FAILED, the others are served (as Kafka)."""
        access = broker.access
        if not access.enabled:
            return set()
        verdict: dict[uuid.UUID, bool] = {}
        out = set()
        for key in keys:
            if key[0] not in verdict:
                topic = broker.image.topic_by_id(key[0])
                verdict[key[0]] = topic is not None and access.denies(
                    ctx, A.READ, A.TOPIC, topic.name)
            if verdict[key[0]]:
                out.add(key)
        return out

    # ---- ShareFetch ------------------------------------------------------------------
    async def share_fetch(ctx: RequestContext, req: Any) -> dict[str, Any] | list[bytes | bytearray]:
        group_id, member_id, epoch = req.group_id, req.member_id, req.share_session_epoch
        bad = check_ids(ctx, req)
        if bad is not None:
            return top_error(*bad)
        lock_ms = manager.lock_duration_ms(group_id)
        wanted = requested(req.topics)
        forgotten = [(t.topic_id, p) for t in req.forgotten_topics_data for p in t.partitions]
        has_acks = any(wanted.values())
        renew = bool(getattr(req, "is_renew_ack", False))
        try:
            if epoch == INITIAL_EPOCH:
                if has_acks:
                    return top_error(E.invalid_request, "Acknowledgements are not allowed "
                                     "when opening a share session", lock_ms)
                session, old = sessions.open(group_id, member_id)
                if old is not None:
                    await manager.release_member(group_id, member_id, list(old.partitions))
            else:
                session = sessions.resolve(group_id, member_id, epoch)
        except ShareSessionError as exc:
            return top_error(exc.code, exc.message, lock_ms)
        if epoch == FINAL_EPOCH:
            if forgotten or any(k not in session.partitions for k in wanted):
                return top_error(E.invalid_request, "A final share fetch cannot change the "
                                 "session's partitions", lock_ms)
            ack_errors = await acknowledge_all(group_id, member_id, wanted, False,
                                               unreadable(ctx, wanted))
            sessions.close(group_id, member_id)
            await manager.release_member(group_id, member_id, list(session.partitions))
            return respond(wanted, ack_errors, {}, {}, lock_ms)
        for key in wanted:
            session.partitions[key] = None
        for key in forgotten:
            session.partitions.pop(key, None)
        denied = unreadable(ctx, session.partitions)
        ack_errors = await acknowledge_all(group_id, member_id, wanted,
                                           renew and renew_enabled(group_id), denied)
        if epoch != INITIAL_EPOCH:
            sessions.advance(session)
        if renew:  # KIP-1222: a renewal is not a fetch
            return respond(wanted, ack_errors, {}, {}, lock_ms)
        fetched, errors = await acquire(session, req, denied)
        # consumer_byte_rate counts a share fetch's records, as Kafka does; they are sent
        # all the same (the client is slowed by the throttle time and the mute), where
        # Kafka drops them and leaves them acquired until their locks expire.
        throttle = broker.quotas.throttle(
            broker.quotas.fetch, ctx, sum(len(f.records) for f in fetched.values())
        ) if fetched else 0
        return respond(wanted, ack_errors, fetched, errors, lock_ms, throttle)

    async def acquire(session: ShareSession, req: Any, denied: set[Key]
                      ) -> tuple[dict[Key, PartitionFetch], dict[Key, ShareError]]:
        fetched: dict[Key, PartitionFetch] = {}
        errors: dict[Key, ShareError] = {
            key: ShareError(E.topic_authorization_failed, "Topic authorization failed.")
            for key in denied}
        keys = [key for key in session.partitions if key not in denied]
        if not keys or not is_member(session.group_id, session.member_id):
            return fetched, errors
        if req.max_bytes <= 0:
            # Kafka 4.4 answers MaxBytes 0 at once with no records (its byte budget per
            # partition is 0); so do we, rather than read it as "no limit".
            return fetched, errors
        turn = next(rotation) % len(keys)
        keys = keys[turn:] + keys[:turn]
        mode = AcquireMode(getattr(req, "share_acquire_mode", 0) or 0)
        max_records = req.max_records if req.max_records > 0 else 500
        batch_size = req.batch_size if req.batch_size > 0 else None
        wait_s = max(0.0, req.max_wait.total_seconds())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            budget = req.max_bytes
            left = max_records
            for key in keys:
                if left <= 0 or budget <= 0:
                    break
                if key in errors or key in fetched:
                    continue
                try:
                    got = await manager.fetch((session.group_id, *key), session.member_id,
                                              left, budget, mode, batch_size)
                except ShareError as exc:
                    errors[key] = exc
                    continue
                if got.acquired:
                    fetched[key] = got
                    left -= sum(r.last_offset - r.first_offset + 1 for r in got.acquired)
                    budget -= len(got.records)
            if fetched or errors:
                return fetched, errors
            remaining = deadline - loop.time()
            if remaining <= 0:
                return fetched, errors
            await manager.wait(keys, remaining)

    def respond(wanted: dict[Key, Any], ack_errors: dict[Key, E],
                fetched: dict[Key, PartitionFetch], errors: dict[Key, ShareError],
                lock_ms: int, throttle_ms: int = 0) -> list[bytes | bytearray]:
        by_topic: dict[uuid.UUID, list[PartitionEntry]] = {}
        node = broker.node_id
        for key in dict.fromkeys([*wanted, *fetched, *errors]):
            err = errors.get(key)
            got = fetched.get(key)
            entry = PartitionEntry(key[1], leader_id=node,
                                   acknowledge_error_code=int(ack_errors.get(key, E.none)))
            if err is not None:
                entry.error_code, entry.error_message = int(err.code), err.message or None
            if got is not None:
                entry.records = got.records
                entry.acquired = [(r.first_offset, r.last_offset, r.delivery_count)
                                  for r in got.acquired]
            by_topic.setdefault(key[0], []).append(entry)
        return share_fetch_response(0, None, lock_ms, by_topic.items(), throttle_ms)

    # ---- ShareAcknowledge ------------------------------------------------------------
    async def share_acknowledge(ctx: RequestContext, req: Any
                                ) -> dict[str, Any] | list[bytes | bytearray]:
        group_id, member_id, epoch = req.group_id, req.member_id, req.share_session_epoch
        bad = check_ids(ctx, req)
        if bad is not None:
            return top_error(*bad)
        lock_ms = manager.lock_duration_ms(group_id)
        if epoch == INITIAL_EPOCH:
            return top_error(E.invalid_share_session_epoch,
                             "ShareAcknowledge cannot open a share session", lock_ms)
        try:
            session = sessions.resolve(group_id, member_id, epoch)
        except ShareSessionError as exc:
            return top_error(exc.code, exc.message, lock_ms)
        wanted = requested(req.topics)
        ack_errors = await acknowledge_all(
            group_id, member_id, wanted,
            bool(getattr(req, "is_renew_ack", False)) and renew_enabled(group_id),
            unreadable(ctx, wanted))
        if epoch == FINAL_EPOCH:
            sessions.close(group_id, member_id)
            await manager.release_member(group_id, member_id, list(session.partitions))
        else:
            sessions.advance(session)
        by_topic: dict[uuid.UUID, list[tuple[int, int, int]]] = {}
        for key in wanted:
            by_topic.setdefault(key[0], []).append(
                (key[1], int(ack_errors.get(key, E.none)), broker.node_id))
        return share_acknowledge_response(ctx.api_version, 0, None, lock_ms,
                                          by_topic.items())

    dispatcher.register(78, 1, 2, share_fetch)
    dispatcher.register(79, 1, 2, share_acknowledge)
