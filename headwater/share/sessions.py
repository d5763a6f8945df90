"""Share sessions: which share-partitions a member fetches, and the epoch that orders its
requests (KIP-932's rules, Kafka's `ShareSessionCache`).

A session is keyed by (group, member) on this broker.

| request, epoch        | meaning                                                          |
|-----------------------|------------------------------------------------------------------|
| ShareFetch 0          | opens a session with the listed partitions; an existing one is  |
|                       | replaced (its records are released); acknowledgements refused    |
| ShareFetch n > 0      | must equal the session's epoch; adds listed / drops forgotten    |
|                       | partitions, applies acknowledgements, fetches; epoch + 1         |
| ShareFetch -1         | final: acknowledgements only, no partition changes; releases the |
|                       | member's records and ends the session                           |
| ShareAcknowledge 0    | refused (INVALID_SHARE_SESSION_EPOCH)                            |
| ShareAcknowledge n>0  | acknowledgements only; epoch + 1                                 |
| ShareAcknowledge -1   | final acknowledgements, then as ShareFetch -1                   |

No session: SHARE_SESSION_NOT_FOUND; wrong epoch: INVALID_SHARE_SESSION_EPOCH; more than
`group.share.max.share.sessions` sessions: SHARE_SESSION_LIMIT_REACHED. Sans-IO: the
cache only answers; releasing records is the caller's work.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

SharePartitionKey = tuple[uuid.UUID, int]  # (topic id, partition) within a group

FINAL_EPOCH = -1
INITIAL_EPOCH = 0


class ShareSessionError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch the next request must carry
    partitions: dict[SharePartitionKey, None] = field(default_factory=dict)  # ordered set


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def open(self, group_id: str, member_id: str) -> tuple[ShareSession, ShareSession | None]:
        """Epoch 0: a new session (next epoch 1) and the one it replaces, if any."""
        key = (group_id, member_id)
        old = self._sessions.pop(key, None)
        if old is None and len(self._sessions) >= self.max_sessions:
            raise ShareSessionError(ErrorCode.share_session_limit_reached,
                                    f"The share session cache is full ({self.max_sessions})")
        session = self._sessions[key] = ShareSession(group_id, member_id)
        return session, old

    def resolve(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a request with `epoch` (> 0 or -1) continues."""
        session = self._sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(ErrorCode.share_session_not_found,
                                    f"Share session for member {member_id} not found")
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            raise ShareSessionError(
                ErrorCode.invalid_share_session_epoch,
                f"Share session epoch {epoch} does not match the expected {session.epoch}")
        return session

    def advance(self, session: ShareSession) -> None:
        session.epoch = session.epoch + 1 if session.epoch < 0x7FFFFFFF else 1

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)
