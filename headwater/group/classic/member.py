"""A classic group member, and reading the consumer protocol's subscription bytes.

A member carries what it sent in JoinGroup (protocols with their metadata, timeouts),
the assignment the leader gave it, and two *responders*: plain callables
`respond(dict)` standing for a parked JoinGroup or SyncGroup request. The asyncio
handler makes them from a future; tests make them from a list. The group logic
calls them when the join or sync phase completes and never knows which it is.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.consumer_protocol_subscription import v0, v1, v2, v3
from kio.serial import entity_reader

Responder = Callable[[dict[str, Any]], None]

CONSUMER_PROTOCOL_TYPE = "consumer"

_SUBSCRIPTION_READERS = [entity_reader(m.ConsumerProtocolSubscription) for m in (v0, v1, v2, v3)]


@dataclass(slots=True, eq=False)
class ClassicMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # in the member's order of preference
    assignment: bytes = b""
    join_responder: Responder | None = field(default=None, repr=False)
    sync_responder: Responder | None = field(default=None, repr=False)
    # A member added by this join phase: its session clock is the new-member join
    # timeout, and being parked in JoinGroup does not count as a heartbeat.
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_responder is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_responder is not None

    def protocol_names(self) -> list[str]:
        """Each name once, in preference order: a JoinGroup may repeat a protocol, and the
        group's vote count must see one vote per member (else no protocol gets them all)."""
        return list(dict.fromkeys(name for name, _ in self.protocols))

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among `candidates`."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """Parked in JoinGroup/SyncGroup counts as alive, except for brand-new members."""
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription (int16 version + struct), None if unreadable.

    Versions 0-3 are read with their own schema; a newer version is read with v3's,
    since every version extends the previous one (Kafka reads the v0 prefix likewise).
    """
    if len(metadata) < 2:
        return None
    (version,) = struct.unpack_from(">h", metadata, 0)
    if version < 0:
        return None
    for reader in (_SUBSCRIPTION_READERS[min(version, 3)], _SUBSCRIPTION_READERS[0]):
        try:
            subscription, _ = reader(bytes(metadata), 2)
        except Exception:  # kio raises assorted errors on short or garbled input
            continue
        return set(subscription.topics)
    return None
