"""ShareFetch and ShareAcknowledge without the wire: share sessions, acknowledgements and
acquisition from share-partitions (KIP-932). The handlers (`api/share_fetch.py`) decode,
authorize, call `fetch` / `acknowledge` and encode.

A ShareFetch first applies its acknowledgements, then acquires from the session's
partitions in turn (the starting partition rotates, so one busy partition does not
starve the others) until MaxRecords or MaxBytes (MaxBytes 0: nothing, at once, as
Kafka answers it); with nothing acquired it waits up to MaxWaitMs, woken by an append,
an acknowledgement, a release or a lock expiry on one of them. Each acknowledgement is
answered only after its state write was persisted.

A member that leaves its group (or is fenced) keeps its session for LEAVE_GRACE_S, time
for a closing consumer's final acknowledgements (epoch -1), then the session closes and
its records are released.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode as E

from ..group.group_configs import value as group_value
from .config import AcquireMode
from .manager import PartitionFetch, ShareError
from .outcomes import AcknowledgementBatch
from .sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    ShareSession,
    ShareSessionCache,
    ShareSessionError,
)

RENEW = 4  # KIP-1222's acknowledge type
LEAVE_GRACE_S = 5.0
DEFAULT_MAX_RECORDS = 500
Key = tuple[uuid.UUID, int]  # (topic id, partition)
Acks = Mapping[Key, tuple[AcknowledgementBatch, ...]]
Unreadable = Callable[[Iterable[Key]], set[Key]]
"""The share-partitions among these whose topic the principal may not READ."""


log = logging.getLogger("headwater.share")


class ShareLeaders(Protocol):
    """The share-partition leaders (the manager) as the fetch path uses them."""

    async def fetch(self, key: tuple[str, uuid.UUID, int], member_id: str, max_records: int,
                    max_bytes: int, mode: AcquireMode,
                    batch_size: int | None) -> PartitionFetch: ...

    async def acknowledge(self, key: tuple[str, uuid.UUID, int], member_id: str,
                          batches: Sequence[AcknowledgementBatch]) -> E: ...

    async def release_member(self, group_id: str, member_id: str,
                             keys: Sequence[Key] | None = None) -> None: ...

    async def wait(self, keys: Sequence[Key], timeout_s: float) -> None: ...

    def refresh_idle(self, group_id: str, keys: Sequence[Key]) -> None: ...

    def unknown_topics(self, keys: Iterable[Key]) -> set[Key]:
        """The share-partitions among these whose topic id names no topic."""
        ...

    def lock_duration_ms(self, group_id: str) -> int: ...

    def group_config(self, group_id: str) -> dict[str, str]: ...


class ShareAssignments(Protocol):
    """The group coordinator's answer to "is this a member of the share group?" (on
    another broker in a cluster: share/remote.py). Only members get records: Kafka 4.3
    answers a ShareFetch from anyone else with nothing acquired (and no error)."""

    async def is_share_member(self, group_id: str, member_id: str) -> bool: ...


class GroupAssignments(Protocol):
    def share_assignment(self, group_id: str, member_id: str
                         ) -> dict[uuid.UUID, list[int]] | None: ...


class LocalMembers:
    """`ShareAssignments` of one node: the group coordinator is this broker's."""

    def __init__(self, groups: GroupAssignments) -> None:
        self._groups = groups

    async def is_share_member(self, group_id: str, member_id: str) -> bool:
        return self._groups.share_assignment(group_id, member_id) is not None


@dataclass(slots=True)
class FetchRequest:
    group_id: str
    member_id: str
    epoch: int
    acks: Acks  # every partition named, with its acknowledgements (maybe none)
    forgotten: list[Key] = field(default_factory=list)
    renew: bool = False
    max_bytes: int = 1 << 20
    max_records: int = 0  # 0: the default
    batch_size: int = 0
    mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED
    max_wait_s: float = 0.0


@dataclass(slots=True)
class Outcome:
    """A ShareFetch's or ShareAcknowledge's answer: a top-level error, or per partition
    the acknowledgement errors, the records acquired and the fetch errors."""

    lock_ms: int
    error: tuple[E, str] | None = None
    named: Acks = field(default_factory=dict)
    ack_errors: dict[Key, E] = field(default_factory=dict)
    fetched: dict[Key, PartitionFetch] = field(default_factory=dict)
    errors: dict[Key, ShareError] = field(default_factory=dict)


class ShareFetchService:
    def __init__(self, leaders: ShareLeaders, sessions: ShareSessionCache,
                 assignments: ShareAssignments) -> None:
        self.leaders = leaders
        self.sessions = sessions
        self.assignments = assignments
        self._rotation = itertools.count()

    # ---- membership ------------------------------------------------------------------
    def member_left(self, group_id: str, member_id: str) -> None:
        """Subscribed to the group coordinator: a share-group member left or was fenced."""
        session = self.sessions.get(group_id, member_id)
        if session is None:
            asyncio.ensure_future(self.leaders.release_member(group_id, member_id))
            return

        def expire() -> None:
            if self.sessions.get(group_id, member_id) is session:  # no final request came
                self.sessions.close(group_id, member_id)
                asyncio.ensure_future(self.leaders.release_member(group_id, member_id))

        asyncio.get_running_loop().call_later(LEAVE_GRACE_S, expire)

    # ---- ShareFetch --------------------------------------------------------------------
    async def fetch(self, req: FetchRequest, unreadable: Unreadable) -> Outcome:
        group_id, member_id, epoch = req.group_id, req.member_id, req.epoch
        lock_ms = self.leaders.lock_duration_ms(group_id)
        wanted = req.acks
        try:
            if epoch == INITIAL_EPOCH:
                if any(wanted.values()):
                    return Outcome(lock_ms, (E.invalid_request, "Acknowledgements are not "
                                             "allowed when opening a share session"))
                session, old = self.sessions.open(group_id, member_id)
                if old is not None:
                    await self.leaders.release_member(group_id, member_id,
                                                      list(old.partitions))
                # A new session reads its partitions' state afresh where nobody holds
                # records: an offset reset (by the group coordinator, maybe on another
                # broker) is seen at once, not after a fenced write.
                self.leaders.refresh_idle(group_id, list(wanted))
            else:
                session = self.sessions.resolve(group_id, member_id, epoch)
        except ShareSessionError as exc:
            return Outcome(lock_ms, (exc.code, exc.message))
        if epoch == FINAL_EPOCH:
            if req.forgotten or any(k not in session.partitions for k in wanted):
                return Outcome(lock_ms, (E.invalid_request, "A final share fetch cannot "
                                         "change the session's partitions"))
            ack_errors = await self._acknowledge_all(session, wanted, False,
                                                     unreadable(wanted))
            await self._close(session)
            return Outcome(lock_ms, named=wanted, ack_errors=ack_errors)
        for key in wanted:
            session.partitions[key] = None
        for key in req.forgotten:
            session.partitions.pop(key, None)
        denied = unreadable(session.partitions)
        ack_errors = await self._acknowledge_all(
            session, wanted, req.renew and self.renew_enabled(group_id), denied)
        if epoch != INITIAL_EPOCH:
            self.sessions.advance(session)
        if req.renew:  # KIP-1222: a renewal is not a fetch
            return Outcome(lock_ms, named=wanted, ack_errors=ack_errors)
        fetched, errors = await self._acquire(session, req, denied)
        return Outcome(lock_ms, named=wanted, ack_errors=ack_errors, fetched=fetched,
                       errors=errors)

    async def _acquire(self, session: ShareSession, req: FetchRequest, denied: set[Key]
                       ) -> tuple[dict[Key, PartitionFetch], dict[Key, ShareError]]:
        fetched: dict[Key, PartitionFetch] = {}
        errors: dict[Key, ShareError] = {
            key: ShareError(E.topic_authorization_failed, "Topic authorization failed.")
            for key in denied}
        # As Kafka's handler: an unknown topic id is UNKNOWN_TOPIC_ID whoever asks,
        # before anything is fetched (and before "is this a member?", which in a cluster
        # may not know a member that joined a moment ago).
        for key in self.leaders.unknown_topics(k for k in session.partitions
                                               if k not in denied):
            errors[key] = ShareError(E.unknown_topic_id)
        keys = [key for key in session.partitions if key not in errors]
        if not keys or not await self.assignments.is_share_member(session.group_id,
                                                                  session.member_id):
            return fetched, errors
        if req.max_bytes <= 0:
            # Kafka 4.4 answers MaxBytes 0 at once with no records (its byte budget per
            # partition is 0); so do we, rather than read it as "no limit".
            return fetched, errors
        turn = next(self._rotation) % len(keys)
        keys = keys[turn:] + keys[:turn]
        max_records = req.max_records if req.max_records > 0 else DEFAULT_MAX_RECORDS
        batch_size = req.batch_size if req.batch_size > 0 else None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, req.max_wait_s)
        while True:
            budget, left = req.max_bytes, max_records
            for key in keys:
                if left <= 0 or budget <= 0:
                    break
                if key in errors or key in fetched:
                    continue
                try:
                    got = await self.leaders.fetch((session.group_id, *key),
                                                   session.member_id, left, budget,
                                                   req.mode, batch_size)
                except ShareError as exc:
                    errors[key] = exc
                    continue
                except Exception as exc:
                    # The partition's storage failed it (PostgreSQL or the object store
                    # away while its share-partition loads): this partition answers a
                    # retriable error, as Kafka's KafkaStorageException does, and the
                    # rest of the fetch is served (the whole request failing closed the
                    # client's connection).
                    first = str(exc).split("\n")[0]
                    log.warning("share fetch of %s-%d: %s: %s", key[0], key[1],
                                type(exc).__name__, first)
                    errors[key] = ShareError(E.kafka_storage_error, first)
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
            await self.leaders.wait(keys, remaining)

    # ---- ShareAcknowledge --------------------------------------------------------------
    async def acknowledge(self, group_id: str, member_id: str, epoch: int, acks: Acks,
                          renew: bool, unreadable: Unreadable) -> Outcome:
        lock_ms = self.leaders.lock_duration_ms(group_id)
        if epoch == INITIAL_EPOCH:
            return Outcome(lock_ms, (E.invalid_share_session_epoch,
                                     "ShareAcknowledge cannot open a share session"))
        try:
            session = self.sessions.resolve(group_id, member_id, epoch)
        except ShareSessionError as exc:
            return Outcome(lock_ms, (exc.code, exc.message))
        ack_errors = await self._acknowledge_all(
            session, acks, renew and self.renew_enabled(group_id), unreadable(acks))
        if epoch == FINAL_EPOCH:
            await self._close(session)
        else:
            self.sessions.advance(session)
        return Outcome(lock_ms, named=acks, ack_errors=ack_errors)

    # ---- helpers -----------------------------------------------------------------------
    def renew_enabled(self, group_id: str) -> bool:
        """KIP-1222's group switch; RENEW acknowledgements are INVALID_REQUEST when off."""
        config = self.leaders.group_config(group_id)
        return group_value(config, "share.renew.acknowledge.enable").lower() == "true"

    async def _acknowledge_all(self, session: ShareSession, acks: Acks, renew_allowed: bool,
                               denied: set[Key]) -> dict[Key, E]:
        results: dict[Key, E] = {}
        asked: list[Key] = []
        for key, batches in acks.items():
            if key in denied:
                results[key] = E.topic_authorization_failed
            elif batches and not renew_allowed and any(
                    RENEW in b.acknowledge_types for b in batches):
                results[key] = E.invalid_request
            elif batches:
                results[key] = E.none  # its place in the answer; set below
                asked.append(key)
        # Every share-partition at once: each persists its state at its own share
        # coordinator (in a cluster, mostly another broker), so one after another made
        # a request wait for the sum of those round trips.
        answers = await asyncio.gather(
            *(self.leaders.acknowledge((session.group_id, *key), session.member_id,
                                       acks[key]) for key in asked),
            return_exceptions=True)
        for key, answer in zip(asked, answers, strict=True):
            if isinstance(answer, BaseException):
                raise answer
            results[key] = answer
        return results

    async def _close(self, session: ShareSession) -> None:
        self.sessions.close(session.group_id, session.member_id)
        await self.leaders.release_member(session.group_id, session.member_id,
                                          list(session.partitions))
