"""A classic group as its operations and the replay of its GroupMetadata records leave it.

`ClassicGroup` holds the members (with their parked JoinGroup/SyncGroup responders),
the generation, the chosen protocol and leader, and the state (states.py); it answers
questions about them and changes them only through small steps (`add`, `remove`,
`transition`, `init_next_generation`, ...) that the operations in operations.py call.
`metadata_record` is its durable view, the GroupMetadata record a replay rebuilds it
from; everything else (parked requests, pending members) is soft state. It implements
`base.Group`, so offsets and the admin APIs treat it like any other group.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode as E

from ...coordinator.record_codec import CoordinatorRecord
from .. import records as R
from .member import CONSUMER_PROTOCOL_TYPE, ClassicMember, Responder, subscribed_topics
from .states import CAN_REBALANCE, State, check_transition

log = logging.getLogger("headwater.group.classic")

def join_error(member_id: str, code: int) -> dict[str, Any]:
    return {"error_code": code, "generation_id": -1, "protocol_type": None,
            "protocol_name": None, "leader": "", "skip_assignment": False,
            "member_id": member_id, "members": ()}


def sync_error(code: int) -> dict[str, Any]:
    return {"error_code": code, "protocol_type": None, "protocol_name": None,
            "assignment": b""}


class ClassicGroup:
    """One classic group: members, generation, state; implements `base.Group`."""

    group_type = "classic"

    def __init__(self, group_id: str, now_ms: int | None = None) -> None:
        self.group_id = group_id
        self.state = State.EMPTY
        self.previous_state = State.DEAD
        self.state_timestamp: int | None = now_ms
        self.generation = 0
        self.proto_type: str | None = None
        self.protocol: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.pending_join: set[str] = set()  # ids handed out with MEMBER_ID_REQUIRED
        self.pending_sync: set[str] = set()
        self.protocol_votes: Counter[str] = Counter()  # protocol -> members supporting it
        self.subscribed: frozenset[str] | None = None
        self.new_member_added = False
        # Callbacks to run once the GroupMetadata record this operation wrote is replayed.
        self.after_commit: list[Callable[[], None]] = []

    # ---- state ---------------------------------------------------------------------
    def transition(self, target: State, now_ms: int) -> None:
        check_transition(self.group_id, self.state, target)
        self.previous_state = self.state
        self.state = target
        self.state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in CAN_REBALANCE

    # ---- membership ----------------------------------------------------------------
    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def add(self, member: ClassicMember, responder: Responder | None = None) -> None:
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        if not self.members:
            self.proto_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.protocol_votes.update(member.protocol_names())
        member.join_responder = responder
        self.pending_join.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.protocol_votes.subtract(member.protocol_names())
            if member.instance_id is not None \
                    and self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
            # Never leave a request parked for a member that is gone: its connection
            # would stall behind it (responses are ordered per connection).
            self.complete_join(member, join_error("", E.unknown_member_id))
            self.complete_sync(member, sync_error(E.unknown_member_id))
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join.discard(member_id)
        self.pending_sync.discard(member_id)

    def update_member(self, member: ClassicMember, protocols: list[tuple[str, bytes]],
                      rebalance_timeout_ms: int, session_timeout_ms: int,
                      responder: Responder | None) -> None:
        self.protocol_votes.subtract(member.protocol_names())
        member.protocols = list(protocols)
        self.protocol_votes.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.join_responder = responder

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str
                              ) -> ClassicMember:
        """A static member rejoined with a new member id: same member, new id."""
        old = self.members.pop(old_id)
        self.complete_join(old, join_error(old_id, E.fenced_instance_id))
        self.complete_sync(old, sync_error(E.fenced_instance_id))
        new = ClassicMember(new_id, old.instance_id, old.client_id, old.client_host,
                            old.rebalance_timeout_ms, old.session_timeout_ms,
                            old.protocol_type, list(old.protocols), old.assignment)
        self.members[new_id] = new
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        return new

    def validate_member(self, member_id: str, instance_id: str | None) -> int:
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return E.unknown_member_id
            if existing != member_id:
                return E.fenced_instance_id
        return E.none if member_id in self.members else E.unknown_member_id

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.awaiting_join_count() == len(self.members) and not self.pending_join

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick one that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # ---- protocols -----------------------------------------------------------------
    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.state is State.EMPTY:
            return bool(protocol_type) and bool(names)
        size = len(self.members)
        return self.proto_type == protocol_type \
            and any(self.protocol_votes.get(n, 0) == size for n in names)

    def select_protocol(self) -> str:
        size = len(self.members)
        candidates = {n for n, count in self.protocol_votes.items() if count == size}
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        # Ties go to the first member's preference order (deterministic).
        first = next(iter(self.members.values()))
        return next(n for n in first.protocol_names() if votes.get(n) == best)

    def uses_consumer_protocol(self) -> bool:
        return self.proto_type == CONSUMER_PROTOCOL_TYPE

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        if not self.uses_consumer_protocol():
            return None
        if not self.members:
            return frozenset()
        if self.protocol is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            found = subscribed_topics(member.metadata(self.protocol))
            if found is None:
                log.warning("group %s: unreadable consumer subscription of %s", self.group_id,
                            member.member_id)
                return None
            topics |= found
        return frozenset(topics)

    def init_next_generation(self, now_ms: int) -> None:
        self.generation += 1
        if self.members:
            self.protocol = self.select_protocol()
            self.subscribed = self.compute_subscribed_topics()
            self.transition(State.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol = None
            self.subscribed = self.compute_subscribed_topics()
            self.transition(State.EMPTY, now_ms)
        self.pending_sync.clear()

    # ---- parked requests -----------------------------------------------------------
    def complete_join(self, member: ClassicMember, response: dict[str, Any]) -> bool:
        responder = member.join_responder
        if responder is None:
            return False
        member.join_responder = None
        responder(response)
        return True

    def complete_sync(self, member: ClassicMember, response: dict[str, Any]) -> bool:
        responder = member.sync_responder
        if responder is None:
            return False
        member.sync_responder = None
        responder(response)
        return True

    def join_response(self, member_id: str, with_members: bool,
                      skip_assignment: bool = False, leader: str | None = None
                      ) -> dict[str, Any]:
        members = [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                    "metadata": m.metadata(self.protocol)}
                   for m in self.members.values()] if with_members else []
        return {"error_code": E.none, "generation_id": self.generation,
                "protocol_type": self.proto_type, "protocol_name": self.protocol,
                "leader": (leader if leader is not None else self.leader_id) or "",
                "skip_assignment": skip_assignment, "member_id": member_id,
                "members": members}

    # ---- the durable view ----------------------------------------------------------
    def metadata_record(self, assignments: dict[str, bytes] | None = None
                        ) -> CoordinatorRecord:
        """The GroupMetadata record for the group as it stands (assignments overridable)."""
        members = [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                    "client_id": m.client_id, "client_host": m.client_host,
                    "rebalance_timeout": m.rebalance_timeout_ms,
                    "session_timeout": m.session_timeout_ms,
                    "subscription": m.metadata(self.protocol),
                    "assignment": (assignments.get(m.member_id, b"") if assignments is not None
                                   else m.assignment)}
                   for m in self.members.values()]
        return R.record(R.GROUP_METADATA, {"group": self.group_id}, {
            "protocol_type": self.proto_type or "", "generation": self.generation,
            "protocol": self.protocol, "leader": self.leader_id,
            "current_state_timestamp": -1 if self.state_timestamp is None
            else self.state_timestamp,
            "members": members})

    def snapshot(self) -> dict[str, Any]:
        """What a replay of the log must reproduce (tests compare live vs replayed)."""
        return {"state": self.state, "generation": self.generation,
                "protocol_type": self.proto_type, "protocol": self.protocol,
                "leader": self.leader_id, "static_members": dict(self.static_members),
                "subscribed": self.subscribed,
                "members": {m.member_id: (m.instance_id, m.client_id, m.client_host,
                                          m.rebalance_timeout_ms, m.session_timeout_ms,
                                          m.metadata(self.protocol), m.assignment)
                            for m in self.members.values()}}

    # ---- base.Group ----------------------------------------------------------------
    def state_name(self) -> str:
        return self.state.value

    def protocol_type(self) -> str:
        return self.proto_type or ""

    def is_empty(self) -> bool:
        return self.state is State.EMPTY

    def empty_since_ms(self) -> int | None:
        return self.state_timestamp if self.state is State.EMPTY else None

    def validate_offset_commit(self, member_id: str, instance_id: str | None,
                               generation_or_epoch: int, api_version: int,
                               transactional: bool = False) -> int:
        if self.state is State.DEAD:
            return E.coordinator_not_available
        if generation_or_epoch < 0 and self.state is State.EMPTY:
            return E.none  # admin client or a consumer without group management
        if generation_or_epoch >= 0 or member_id or instance_id is not None:
            error = self.validate_member(member_id, instance_id)
            if error:
                return error
            if generation_or_epoch != self.generation:
                return E.illegal_generation
        elif self.state is not State.EMPTY and not transactional:
            # No member and no generation: only while Empty. Transactional commits are
            # exempt (TxnOffsetCommit before v3 carries neither), as in Kafka.
            return E.unknown_member_id
        if self.state is State.COMPLETING_REBALANCE and not transactional:
            return E.rebalance_in_progress
        return E.none

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        return E.group_id_not_found if self.state is State.DEAD else E.none

    def validate_offset_delete(self) -> int:
        if self.state is State.DEAD:
            return E.group_id_not_found
        if self.state is not State.EMPTY and not self.uses_consumer_protocol():
            return E.non_empty_group
        return E.none

    def validate_delete(self) -> int:
        if self.state is State.DEAD:
            return E.group_id_not_found
        return E.none if self.state is State.EMPTY else E.non_empty_group

    def is_subscribed_to(self, topic: str) -> bool:
        if self.subscribed is not None:
            return topic in self.subscribed
        return self.uses_consumer_protocol()  # unknown subscription: assume subscribed

    def tombstones(self) -> list[CoordinatorRecord]:
        return [R.group_metadata_tombstone(self.group_id)]

    def describe(self) -> dict[str, Any]:
        stable = self.state is State.STABLE
        members = [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                    "client_id": m.client_id, "client_host": m.client_host,
                    "member_metadata": m.metadata(self.protocol) if stable else b"",
                    "member_assignment": m.assignment}
                   for m in self.members.values()]
        return {"error_code": E.none, "group_id": self.group_id, "group_state": self.state_name(),
                "protocol_type": self.protocol_type(),
                "protocol_data": (self.protocol or "") if stable else "",
                "members": members, "authorized_operations": -2147483648}

    def __repr__(self) -> str:
        return (f"ClassicGroup({self.group_id!r}, {self.state.value}, gen={self.generation}, "
                f"members={list(self.members)})")
