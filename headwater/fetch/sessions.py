"""Incremental fetch sessions (KIP-227), sans-IO.

A session remembers a client's partition set and what it last told the client
about each partition, so an incremental fetch names only what changed and the
response carries only partitions with news (records, or a moved watermark).
"""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode as E

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

PartitionKey = tuple[str, int]  # (topic name, partition)


@dataclass(slots=True)
class CachedPartition:
    fetch_offset: int
    max_bytes: int
    topic_id: object = None
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1
    #: The leader epoch the client last saw (-1: none given): checked at every read.
    current_leader_epoch: int = -1


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next request must carry
    partitions: OrderedDict[PartitionKey, CachedPartition] = field(default_factory=OrderedDict)
    last_used_ms: int = 0


class FetchSessionError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class FetchSessionCache:
    """Bounded cache (`max.incremental.fetch.session.cache.slots`), least recently used out."""

    def __init__(self, max_slots: int = 1000) -> None:
        self.max_slots = max_slots
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(random.randint(1, 1 << 20))

    def __len__(self) -> int:
        return len(self._sessions)

    def resolve(self, session_id: int, epoch: int, now_ms: int
                ) -> tuple[FetchSession | None, bool]:
        """Return (session, full) for a request; raises FetchSessionError.

        full=True means the request carries the complete partition set.
        """
        if epoch == FINAL_EPOCH:
            if session_id:
                self._sessions.pop(session_id, None)
            return None, True
        session: FetchSession | None
        if epoch == INITIAL_EPOCH:
            if session_id:
                self._sessions.pop(session_id, None)
            if self.max_slots <= 0:
                return None, True
            if len(self._sessions) >= self.max_slots:
                self._sessions.popitem(last=False)
            sid = next(self._ids) & 0x7FFFFFFF or next(self._ids)
            session = FetchSession(sid, 1, last_used_ms=now_ms)
            self._sessions[sid] = session
            return session, True
        session = self._sessions.get(session_id)
        if session is None:
            raise FetchSessionError(E.fetch_session_id_not_found)
        if session.epoch != epoch:
            raise FetchSessionError(E.invalid_fetch_session_epoch)
        self._sessions.move_to_end(session_id)
        session.last_used_ms = now_ms
        return session, False

    @staticmethod
    def advance(session: FetchSession) -> None:
        session.epoch = 1 if session.epoch >= 0x7FFFFFFF else session.epoch + 1
