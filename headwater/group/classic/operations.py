"""Classic group operations: JoinGroup, SyncGroup, Heartbeat, LeaveGroup (Kafka's rules),
the timers, and the replay of GroupMetadata records. The group they act on is group.py.

Theory of operation
-------------------
Members join in rounds called generations. A rebalance starts (PreparingRebalance)
when a member joins, leaves, changes its subscription or dies; every member must
rejoin within the rebalance timeout. The join phase ends when all members have
rejoined (or the timeout, or for a new group `group.initial.rebalance.delay.ms`,
expires): members that did not rejoin are dropped, the generation is bumped, a
protocol is chosen and every parked JoinGroup is answered, the leader's with the
members' subscriptions (CompletingRebalance). The leader computes the assignment
and sends it in SyncGroup; the group writes it as a GroupMetadata record and, once
that record is in the log, answers every parked SyncGroup with its member's share
(Stable). Heartbeats keep a member alive for `session.timeout.ms` and tell it when
a new rebalance has started (REBALANCE_IN_PROGRESS).

Durable and soft state. What survives a restart is the GroupMetadata record: the
generation, protocol, leader and members with their assignments, written when a
generation completes (the leader's SyncGroup) and when the group becomes Empty.
Replaying those records is how a shard is loaded (`replay` rebuilds the group;
`on_loaded` re-arms session timers so members that are gone time out). The rest
- parked requests, pending members, timers - is soft state that lives only in
memory, as in Kafka, where these records are not re-applied after a live write:
an operation updates the soft state itself and returns the record; when the
runtime replays that record live, `replay` only runs the callbacks the operation
queued for "after the record is written" (answering SyncGroup, the static-member
JoinGroup), which is Kafka's append future.

Sans-IO: operations take `now_ms` and a responder (see member.py), return a
`Result` of records, and arm timers through `shard.timer`; no sockets, no clock.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as E

from ...coordinator.record_codec import CoordinatorRecord
from ...coordinator.runtime import Result, Timer
from .group import ClassicGroup, join_error, sync_error
from .member import ClassicMember, Responder
from .states import State

if TYPE_CHECKING:
    from ..config import GroupConfig
    from ..shard import GroupShard

log = logging.getLogger("headwater.group.classic")

# Kafka's (fixed) limit on how long a brand-new member may stay parked in JoinGroup.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    api_version: int
    reason: str | None = None

    @property
    def requires_known_member_id(self) -> bool:
        return self.api_version >= 4

    @property
    def supports_skip_assignment(self) -> bool:
        return self.api_version >= 9


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    member_id: str
    instance_id: str | None
    generation: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: dict[str, bytes] = field(default_factory=dict)


def _timer_key(kind: str, group_id: str, member_id: str = "") -> str:
    return f"classic-{kind}\x00{group_id}\x00{member_id}"


# ---- the manager: operations, timers, replay ------------------------------------------
class ClassicGroupManager:
    def __init__(self, shard: GroupShard) -> None:
        self.shard = shard
        self.loaded = False
        self.new_member_id: Callable[[str], str] = lambda prefix: f"{prefix}-{uuid.uuid4()}"

    @property
    def config(self) -> GroupConfig:
        return self.shard.config

    @property
    def timer(self) -> Timer:
        return self.shard.timer

    def group(self, group_id: str) -> ClassicGroup | None:
        group = self.shard.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def create_empty(self, group_id: str, now_ms: int | None = None) -> ClassicGroup:
        group = ClassicGroup(group_id, now_ms)
        self.shard.groups[group_id] = group
        return group

    # ---- replay / load -------------------------------------------------------------
    def replay(self, record: CoordinatorRecord) -> None:
        group_id = record.key["group"]
        value = record.value
        live = self.group(group_id) if self.loaded else None
        if value is None:
            if live is not None:
                self._cancel_timers(live)
            self.shard.remove_group(group_id)
            if self.shard.offsets.has_offsets(group_id):
                self.create_empty(group_id)
            return
        if live is not None:
            # Written by one of our operations: the group already is what the record
            # says. What waited for the record to be durable can go ahead now.
            callbacks, live.after_commit = live.after_commit, []
            for callback in callbacks:
                callback()
            return
        self._rebuild(group_id, value)

    def _rebuild(self, group_id: str, value: dict[str, Any]) -> ClassicGroup:
        group = ClassicGroup(group_id)
        protocol = value["protocol"]
        members = value["members"] or ()
        group.state = State.STABLE if members else State.EMPTY
        group.generation = value["generation"]
        group.proto_type = value["protocol_type"] or None
        group.protocol = protocol
        ts = value["current_state_timestamp"]
        group.state_timestamp = None if ts == -1 else ts
        for m in members:
            rebalance = m["rebalance_timeout"]
            group.add(ClassicMember(
                m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"],
                m["session_timeout"] if rebalance == -1 else rebalance, m["session_timeout"],
                group.proto_type or "", [(protocol or "", m["subscription"] or b"")],
                m["assignment"] or b""))
        group.leader_id = value["leader"] if value["leader"] in group.members \
            else next(iter(group.members), None)
        group.subscribed = group.compute_subscribed_topics()
        self.shard.groups[group_id] = group
        return group

    def on_unloaded(self) -> None:
        """Every parked JoinGroup and SyncGroup answered NOT_COORDINATOR: the client
        finds the new coordinator and rejoins there at once."""
        for group in list(self.shard.groups.values()):
            if not isinstance(group, ClassicGroup):
                continue
            for member in list(group.members.values()):
                group.complete_join(member, join_error(member.member_id, E.not_coordinator))
                group.complete_sync(member, sync_error(E.not_coordinator))

    def on_loaded(self, now_ms: int) -> None:
        self.loaded = True
        for group in list(self.shard.groups.values()):
            if not isinstance(group, ClassicGroup):
                continue
            for member in group.members.values():
                self._reschedule_heartbeat(group, member)
            if len(group.members) > self.config.group_max_size:
                # group.max.size was lowered: make the members rejoin (extra ones are refused).
                self._prepare_rebalance(group, now_ms)

    # ---- JoinGroup -----------------------------------------------------------------
    def join(self, req: JoinRequest, respond: Responder, now_ms: int) -> Result:
        if not req.group_id:
            respond(join_error(req.member_id, E.invalid_group_id))
            return Result([])
        cfg = self.config
        if not cfg.group_min_session_timeout_ms <= req.session_timeout_ms \
                <= cfg.group_max_session_timeout_ms:
            respond(join_error(req.member_id, E.invalid_session_timeout))
            return Result([])
        records: list[CoordinatorRecord] = []
        existing = self.shard.groups.get(req.group_id)
        if existing is not None and not isinstance(existing, ClassicGroup):
            if not existing.is_empty() or existing.group_type != "consumer":
                # A KIP-848 group with members, or a share group: classic members
                # cannot join it here (Kafka answers INCONSISTENT_GROUP_PROTOCOL).
                respond(join_error("", E.inconsistent_group_protocol))
                return Result([])
            # An Empty consumer group becomes a classic group (Kafka does the same).
            records += existing.tombstones()
            self.shard.remove_group(req.group_id)
            existing = None
        unknown = req.member_id == ""
        group = existing
        if group is None:
            if not unknown:
                respond(join_error(req.member_id, E.unknown_member_id))
                return Result(records)
            group = self.create_empty(req.group_id, now_ms)
        if not self._accept_joining_member(group, req.member_id):
            group.remove(req.member_id)
            respond(join_error("", E.group_max_size_reached))
        elif unknown:
            records += self._join_new_member(group, req, respond, now_ms)
        else:
            records += self._join_existing_member(group, req, respond, now_ms)
        self._maybe_forget(group)
        return Result(records)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.config.group_max_size
        if group.state in (State.EMPTY, State.DEAD):
            return True
        if group.state is State.PREPARING_REBALANCE:
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) \
                or group.awaiting_join_count() < limit
        return member_id in group.members or len(group.members) < limit

    def _join_new_member(self, group: ClassicGroup, req: JoinRequest, respond: Responder,
                         now_ms: int) -> list[CoordinatorRecord]:
        if group.state is State.DEAD:
            respond(join_error("", E.coordinator_not_available))
            return []
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            respond(join_error("", E.inconsistent_group_protocol))
            return []
        new_id = self.new_member_id(req.instance_id if req.instance_id is not None
                                    else req.client_id)
        if req.instance_id is not None:
            old_id = group.static_members.get(req.instance_id)
            if old_id is not None:
                return self._replace_static_member(group, req, old_id, new_id, respond, now_ms)
            return self._add_member(group, req, new_id, respond, now_ms)
        if req.requires_known_member_id:
            # The client must come back with this id; until then it is a pending member,
            # dropped if it does not rejoin within its session timeout.
            group.pending_join.add(new_id)
            self._schedule_heartbeat(group, new_id, req.session_timeout_ms)
            respond(join_error(new_id, E.member_id_required))
            return []
        return self._add_member(group, req, new_id, respond, now_ms)

    def _join_existing_member(self, group: ClassicGroup, req: JoinRequest,
                              respond: Responder, now_ms: int) -> list[CoordinatorRecord]:
        member_id = req.member_id
        if group.state is State.DEAD:
            respond(join_error(member_id, E.coordinator_not_available))
            return []
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            respond(join_error(member_id, E.inconsistent_group_protocol))
            return []
        if member_id in group.pending_join:
            if req.instance_id is not None:  # pending ids are only handed to dynamic members
                respond(join_error(member_id, E.unknown_server_error))
                return []
            return self._add_member(group, req, member_id, respond, now_ms)
        error = group.validate_member(member_id, req.instance_id)
        if error:
            respond(join_error(member_id, error))
            return []
        member = group.members[member_id]
        if group.state is State.PREPARING_REBALANCE:
            return self._update_member_then_rebalance(group, member, req, respond, now_ms)
        if group.state is State.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # It missed the JoinGroup response: hand out the current generation again.
                respond(group.join_response(member_id, group.is_leader(member_id)))
                return []
            return self._update_member_then_rebalance(group, member, req, respond, now_ms)
        if group.state is State.STABLE:
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # The leader rejoining asks for a new assignment (e.g. topics changed).
                return self._update_member_then_rebalance(group, member, req, respond, now_ms)
            respond(group.join_response(member_id, False))
            return []
        respond(join_error(member_id, E.unknown_member_id))  # Empty: reset and rejoin
        return []

    def _add_member(self, group: ClassicGroup, req: JoinRequest, member_id: str,
                    respond: Responder, now_ms: int) -> list[CoordinatorRecord]:
        member = ClassicMember(member_id, req.instance_id, req.client_id, req.client_host,
                               req.rebalance_timeout_ms, req.session_timeout_ms,
                               req.protocol_type, list(req.protocols), is_new=True)
        if group.state is State.PREPARING_REBALANCE and group.previous_state is State.EMPTY:
            group.new_member_added = True  # lets the initial rebalance wait a bit longer
        group.add(member, respond)
        # A new member cannot heartbeat while parked; give up on it after this long.
        self._schedule_heartbeat(group, member_id, NEW_MEMBER_JOIN_TIMEOUT_MS)
        return self._maybe_prepare_rebalance_or_complete_join(group, now_ms)

    def _update_member_then_rebalance(self, group: ClassicGroup, member: ClassicMember,
                                      req: JoinRequest, respond: Responder, now_ms: int
                                      ) -> list[CoordinatorRecord]:
        group.update_member(member, req.protocols, req.rebalance_timeout_ms,
                            req.session_timeout_ms, respond)
        return self._maybe_prepare_rebalance_or_complete_join(group, now_ms)

    def _replace_static_member(self, group: ClassicGroup, req: JoinRequest, old_id: str,
                               new_id: str, respond: Responder, now_ms: int
                               ) -> list[CoordinatorRecord]:
        assert req.instance_id is not None
        current_leader = group.leader_id
        self.timer.cancel(_timer_key("heartbeat", group.group_id, old_id))
        member = group.replace_static_member(req.instance_id, old_id, new_id)
        self._reschedule_heartbeat(group, member)
        group.update_member(member, req.protocols, req.rebalance_timeout_ms,
                            req.session_timeout_ms, respond)
        if group.state is State.STABLE:
            if group.protocol != group.select_protocol():
                return self._maybe_prepare_rebalance_or_complete_join(group, now_ms)
            # Same protocol: no rebalance. Persist the new member id, then answer with
            # the current generation. Before v9 the old leader id is returned, so even a
            # rejoining leader just syncs and gets its old assignment back.
            generation = group.generation

            def answer() -> None:
                if member.member_id not in group.members or group.generation != generation:
                    return
                if req.supports_skip_assignment:
                    leader = group.is_leader(new_id)
                    group.complete_join(member, group.join_response(new_id, leader, leader))
                else:
                    group.complete_join(member, group.join_response(
                        new_id, False, leader=current_leader or ""))

            group.after_commit.append(answer)
            return [group.metadata_record()]
        if group.state is State.COMPLETING_REBALANCE:
            # The leader may be assigning to the old id: start over.
            return self._prepare_rebalance(group, now_ms)
        return self._maybe_complete_join_phase(group, now_ms)

    # ---- the join phase ------------------------------------------------------------
    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, now_ms: int
                                                  ) -> list[CoordinatorRecord]:
        if group.can_rebalance():
            return self._prepare_rebalance(group, now_ms)
        return self._maybe_complete_join_phase(group, now_ms)

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> list[CoordinatorRecord]:
        if group.state is State.COMPLETING_REBALANCE:
            # Members parked in SyncGroup must rejoin.
            for member in group.members.values():
                member.assignment = b""
            self._propagate_assignment(group, E.rebalance_in_progress)
        group.pending_sync.clear()
        self.timer.cancel(_timer_key("sync", group.group_id))
        self.shard.rebalances["classic"] = self.shard.rebalances.get("classic", 0) + 1
        initial = group.state is State.EMPTY
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group.group_id, delay, remaining)
        group.transition(State.PREPARING_REBALANCE, now_ms)
        log.info("preparing to rebalance group %s (generation %d, %d members)",
                 group.group_id, group.generation, len(group.members))
        if initial:
            return []
        return self._maybe_complete_join_else_schedule(group, now_ms)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup, now_ms: int
                                           ) -> list[CoordinatorRecord]:
        if group.has_all_members_joined():
            return self._complete_join(group, now_ms)
        self._schedule_join(group.group_id, group.rebalance_timeout_ms())
        return []

    def _maybe_complete_join_phase(self, group: ClassicGroup, now_ms: int
                                   ) -> list[CoordinatorRecord]:
        if group.state is not State.PREPARING_REBALANCE:
            return []
        if group.previous_state is State.EMPTY:
            return []  # the initial rebalance ends on its timer only
        if not group.has_all_members_joined():
            return []
        return self._complete_join(group, now_ms)

    def _complete_join(self, group: ClassicGroup, now_ms: int) -> list[CoordinatorRecord]:
        self.timer.cancel(_timer_key("join", group.group_id))
        for member in [m for m in group.members.values()
                       if not m.awaiting_join and m.instance_id is None]:
            self.timer.cancel(_timer_key("heartbeat", group.group_id, member.member_id))
            group.remove(member.member_id)
        if group.state is State.DEAD:
            return []
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined (only static members remain): wait another round for
            # the session timeouts to remove them.
            self._schedule_join(group.group_id, group.rebalance_timeout_ms())
            return []
        group.init_next_generation(now_ms)
        if group.state is State.EMPTY:
            log.info("group %s is now empty (generation %d)", group.group_id, group.generation)
            return [group.metadata_record()]
        log.info("group %s generation %d: %d members, protocol %s, leader %s", group.group_id,
                 group.generation, len(group.members), group.protocol, group.leader_id)
        for member in group.members.values():
            response = group.join_response(member.member_id, group.is_leader(member.member_id))
            group.complete_join(member, response)
            self._reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        self._schedule_pending_sync(group)
        return []

    # ---- SyncGroup -----------------------------------------------------------------
    def sync(self, req: SyncRequest, respond: Responder, now_ms: int) -> Result:
        if not req.group_id:
            respond(sync_error(E.invalid_group_id))
            return Result([])
        group = self.group(req.group_id)
        if group is None or group.is_empty():
            respond(sync_error(E.unknown_member_id))
            return Result([])
        error = self._validate_sync(group, req)
        if error:
            respond(sync_error(error))
            return Result([])
        member = group.members[req.member_id]
        if group.state is State.PREPARING_REBALANCE:
            respond(sync_error(E.rebalance_in_progress))
        elif group.state is State.COMPLETING_REBALANCE:
            member.sync_responder = respond
            self._remove_pending_sync(group, req.member_id)
            if group.is_leader(req.member_id):
                assignments = {m: req.assignments.get(m, b"") for m in group.members}
                generation = group.generation

                def commit() -> None:
                    # Still the generation the leader assigned (nothing rebalanced since)?
                    if group.state is State.COMPLETING_REBALANCE \
                            and group.generation == generation:
                        for m in group.members.values():
                            m.assignment = assignments.get(m.member_id, b"")
                        self._propagate_assignment(group, E.none)
                        group.transition(State.STABLE, now_ms)

                group.after_commit.append(commit)
                return Result([group.metadata_record(assignments)])
        elif group.state is State.STABLE:
            self._remove_pending_sync(group, req.member_id)
            respond({"error_code": E.none, "protocol_type": group.proto_type,
                     "protocol_name": group.protocol, "assignment": member.assignment})
        return Result([])

    def _validate_sync(self, group: ClassicGroup, req: SyncRequest) -> int:
        if group.state is State.DEAD:
            return E.coordinator_not_available
        error = group.validate_member(req.member_id, req.instance_id)
        if error:
            return error
        if req.generation != group.generation:
            return E.illegal_generation
        if _inconsistent(req.protocol_type, group.proto_type) \
                or _inconsistent(req.protocol_name, group.protocol):
            return E.inconsistent_group_protocol
        return E.none

    def _remove_pending_sync(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if group.state not in (State.COMPLETING_REBALANCE, State.STABLE) \
                or not group.pending_sync:
            self.timer.cancel(_timer_key("sync", group.group_id))

    def _propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        ok = error == E.none
        for member in group.members.values():
            response = {"error_code": error,
                        "protocol_type": group.proto_type if ok else None,
                        "protocol_name": group.protocol if ok else None,
                        "assignment": member.assignment}
            if group.complete_sync(member, response):
                # Its session clock was paused while it waited; restart it.
                self._reschedule_heartbeat(group, member)

    # ---- Heartbeat -----------------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                  generation: int, now_ms: int) -> Result:
        """Response: the error code."""
        if not group_id:
            return Result([], E.invalid_group_id)
        group = self.group(group_id)
        if group is None:
            return Result([], E.unknown_member_id)
        if group.state is State.DEAD:
            return Result([], E.coordinator_not_available)
        error = group.validate_member(member_id, instance_id)
        if error:
            return Result([], error)
        if generation != group.generation:
            return Result([], E.illegal_generation)
        if group.state is State.EMPTY:
            return Result([], E.unknown_member_id)
        self._reschedule_heartbeat(group, group.members[member_id])
        if group.state is State.PREPARING_REBALANCE:
            return Result([], E.rebalance_in_progress)
        return Result([], E.none)

    # ---- LeaveGroup ----------------------------------------------------------------
    def leave(self, group_id: str, members: list[tuple[str, str | None]], now_ms: int
              ) -> Result:
        """Response: (group error, [error per member, in request order])."""
        if not group_id:
            return Result([], (E.invalid_group_id, []))
        group = self.group(group_id)
        if group is None:
            return Result([], (E.unknown_member_id, []))
        if group.state is State.DEAD:
            return Result([], (E.coordinator_not_available, []))
        codes: list[int] = []
        for member_id, instance_id in members:
            if not member_id:
                # Administrative removal by instance id (no member id).
                if instance_id is not None and instance_id in group.static_members:
                    self._remove_current_member(group, group.static_members[instance_id])
                    codes.append(E.none)
                else:
                    codes.append(E.unknown_member_id)
            elif member_id in group.pending_join:
                group.remove(member_id)
                self.timer.cancel(_timer_key("heartbeat", group_id, member_id))
                codes.append(E.none)
            else:
                error = group.validate_member(member_id, instance_id)
                if not error:
                    self._remove_current_member(group, member_id)
                codes.append(error)
        records: list[CoordinatorRecord] = []
        if E.none in codes:
            if group.state in (State.STABLE, State.COMPLETING_REBALANCE):
                records = self._maybe_prepare_rebalance_or_complete_join(group, now_ms)
            elif group.state is State.PREPARING_REBALANCE:
                records = self._maybe_complete_join_phase(group, now_ms)
        return Result(records, (E.none, codes))

    def _remove_current_member(self, group: ClassicGroup, member_id: str) -> None:
        self.timer.cancel(_timer_key("heartbeat", group.group_id, member_id))
        log.info("member %s left group %s", member_id, group.group_id)
        group.remove(member_id)

    # ---- timers --------------------------------------------------------------------
    def _schedule_heartbeat(self, group: ClassicGroup, member_id: str, delay_ms: int) -> None:
        group_id = group.group_id
        self.timer.schedule(_timer_key("heartbeat", group_id, member_id), delay_ms,
                            lambda now: self._expire_heartbeat(group_id, member_id, now))

    def _reschedule_heartbeat(self, group: ClassicGroup, member: ClassicMember) -> None:
        self._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)

    def _expire_heartbeat(self, group_id: str, member_id: str, now_ms: int) -> Result:
        group = self.group(group_id)
        if group is None or group.state is State.DEAD:
            return Result([])
        if member_id in group.pending_join:
            log.info("pending member %s of group %s expired", member_id, group_id)
            group.remove(member_id)
            if group.state is State.PREPARING_REBALANCE and group.has_all_members_joined():
                return Result(self._complete_join(group, now_ms))
            self._maybe_forget(group)
            return Result([])
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return Result([])
        log.info("member %s of group %s failed its session timeout; removing it",
                 member_id, group_id)
        group.complete_join(member, join_error("", E.unknown_member_id))
        group.remove(member_id)
        if group.state in (State.STABLE, State.COMPLETING_REBALANCE):
            return Result(self._maybe_prepare_rebalance_or_complete_join(group, now_ms))
        if group.state is State.PREPARING_REBALANCE and group.has_all_members_joined():
            return Result(self._complete_join(group, now_ms))
        return Result([])

    def _schedule_join(self, group_id: str, delay_ms: int) -> None:
        def fire(now: int) -> Result:
            group = self.group(group_id)
            if group is None or group.state is not State.PREPARING_REBALANCE:
                return Result([])
            return Result(self._complete_join(group, now))

        self.timer.schedule(_timer_key("join", group_id), delay_ms, fire)

    def _schedule_initial_join(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        def fire(now: int) -> Result:
            group = self.group(group_id)
            if group is None or group.state is not State.PREPARING_REBALANCE:
                return Result([])
            if group.new_member_added and remaining_ms != 0:
                # Someone joined during the delay: wait once more, within the rebalance timeout.
                group.new_member_added = False
                next_delay = min(self.config.group_initial_rebalance_delay_ms, remaining_ms)
                self._schedule_initial_join(group_id, next_delay,
                                            max(remaining_ms - delay_ms, 0))
                return Result([])
            return Result(self._complete_join(group, now))

        self.timer.schedule(_timer_key("join", group_id), delay_ms, fire)

    def _schedule_pending_sync(self, group: ClassicGroup) -> None:
        group_id, generation = group.group_id, group.generation

        def fire(now: int) -> Result:
            group = self.group(group_id)
            if group is None or group.generation != generation \
                    or group.state not in (State.COMPLETING_REBALANCE, State.STABLE) \
                    or not group.pending_sync:
                return Result([])
            missing = sorted(group.pending_sync)
            log.info("group %s: members %s did not sync in time; removing them", group_id,
                     missing)
            for member_id in missing:
                self.timer.cancel(_timer_key("heartbeat", group_id, member_id))
                group.remove(member_id)
            return Result(self._prepare_rebalance(group, now))

        self.timer.schedule(_timer_key("sync", group_id), group.rebalance_timeout_ms(), fire)

    def _maybe_forget(self, group: ClassicGroup) -> None:
        """Drop a group that exists only in memory and holds nothing (a refused first
        join, an abandoned MEMBER_ID_REQUIRED id); one ever written, or with offsets, stays."""
        if group.state is State.EMPTY and not group.members and not group.pending_join \
                and group.generation == 0 and not self.shard.offsets.has_offsets(group.group_id) \
                and self.shard.groups.get(group.group_id) is group:
            self.shard.remove_group(group.group_id)

    def _cancel_timers(self, group: ClassicGroup) -> None:
        self.timer.cancel(_timer_key("join", group.group_id))
        self.timer.cancel(_timer_key("sync", group.group_id))
        for member_id in list(group.members) + list(group.pending_join):
            self.timer.cancel(_timer_key("heartbeat", group.group_id, member_id))


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
