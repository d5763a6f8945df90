"""KIP-1071 streams groups: the StreamsGroupHeartbeat operation, timers and describe.

Theory of operation
-------------------
Every change is an operation returning records; `replay` is the only state change
(group.py). A heartbeat, in Kafka's order (GroupMetadataManager.streamsGroupHeartbeat):

1. validate the request (INVALID_REQUEST) - nothing written;
2. leave (epoch -1, -2): tombstones 22, 21, 19 and a new group epoch (record 17);
3. find or create the group (only epoch 0 creates; another kind's id is
   GROUP_ID_NOT_FOUND), refuse a new member of a full group, find or create the member
   (the client makes its id; epoch 0 joins; otherwise the epoch must be the member's,
   or its previous one when the tasks it reports are still its own, else
   FENCED_MEMBER_EPOCH; an unknown member is UNKNOWN_MEMBER_ID);
4. the member's changes (record 19) and the topology: the first member's initialises it
   (record 23), a later member's must be the same (an older epoch is answered
   STALE_TOPOLOGY, a different one at the same epoch is INVALID_REQUEST);
5. configure the topology against the metadata (configured.py): the number of tasks,
   internal topics to create (the broker creates them after answering), statuses;
6. bump the group epoch (record 17, with the metadata hash, the validated topology
   epoch and the assignment configs) when the member is new or changed, the topology
   was validated, the metadata hash moved, or the assignment configs changed;
7. when the group epoch is ahead of the target's, the sticky task assignor
   (assignor.py) gives the target (records 21 of changed members, then 20): nothing
   while the topology is not ready;
8. reconcile the member towards its target (reconciliation.py, record 22), and arm its
   session timer (and its rebalance timer while it must revoke).

A heartbeat that fails raises `HeartbeatError` before anything is returned, so it writes
no records and arms no timers. Session and rebalance timeouts fence the member exactly
like a leave.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as E

from ...coordinator.record_codec import CoordinatorRecord
from ...coordinator.runtime import Result
from ...metadata.image import GROUP_RESOURCE
from .. import records as R
from ..modern.member_epochs import fenceable
from ..modern.operations import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    HeartbeatError,
    check_request_strings,
    describe_error,
    invalid,
    session_key,
)
from . import assignor
from .configured import (
    ASSIGNMENT_DELAYED,
    MISSING_CLIENT_TAGS,
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
    ConfiguredTopology,
    InternalTopic,
    configure,
)
from .group import (
    UNREVOKED_TASKS,
    StreamsGroup,
    StreamsGroupMember,
    current_assignment_record,
    group_epoch_record,
    member_metadata_record,
    member_tombstones,
    target_member_record,
    target_metadata_record,
    topics_hash,
    topology_record,
)
from .reconciliation import KINDS, MustRejoin, holders, reconcile
from .tasks import EMPTY_TASKS, Tasks, TasksTuple
from .topology import Topology

if TYPE_CHECKING:
    from ...metadata.image import MetadataImage
    from ..shard import GroupShard

STATIC_LEAVE_EPOCH = -2
_INITIAL = "Assignment delayed due to the configured initial rebalance delay."
_INTERVAL = "Assignment delayed due to the configured assignment interval."
log = logging.getLogger("headwater.group.streams")


@dataclass(frozen=True, slots=True)
class StreamsHeartbeatRequest:
    """StreamsGroupHeartbeat's fields (None = unchanged) plus the request context."""

    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    # The three task lists as sent (None: not sent, i.e. unchanged).
    sent_tasks: tuple[Tasks | None, Tasks | None, Tasks | None] = (None, None, None)
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""
    #: The request's version: v1 members are told of client tags they lack.
    api_version: int = 1


    @property
    def owned(self) -> TasksTuple | None:
        """The tasks the member reports it owns; None unless all three were sent."""
        active, standby, warmup = self.sent_tasks
        if active is None or standby is None or warmup is None:
            return None
        return TasksTuple(active, standby, warmup)


@dataclass(frozen=True, slots=True)
class StreamsHeartbeatResponse:
    error_code: int = E.none
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    status: tuple[tuple[int, str], ...] = ()
    assignment: TasksTuple | None = None
    endpoint_information_epoch: int = 0
    endpoints: tuple[dict[str, Any], ...] | None = None
    to_create: tuple[InternalTopic, ...] = field(default=())


def rebalance_key(group_id: str, member_id: str) -> str:
    return f"streams-rebalance\0{group_id}\0{member_id}"


class StreamsGroupManager:
    """The streams groups of one shard: replay, the heartbeat, timers, describe."""

    config_prefix = "streams"

    def __init__(self, shard: GroupShard) -> None:
        self.shard = shard
        # Per group, bumped whenever a member with an endpoint changes tasks (not
        # persisted, as in Kafka): clients re-read the endpoints when theirs differs.
        self.endpoint_epochs: dict[str, int] = {}
        # Groups whose first assignment waits for the initial rebalance delay -> due (ms).
        self._initial_due: dict[str, int] = {}

    # ---- configs -------------------------------------------------------------------
    def _group_config(self, group_id: str, key: str, default: int) -> int:
        value = self.shard.image().resource_configs(GROUP_RESOURCE, group_id).get(key)
        try:
            return int(value) if value is not None else default
        except ValueError:
            return default

    def session_timeout_ms(self, group_id: str) -> int:
        return self._group_config(group_id, "streams.session.timeout.ms",
                                  self.shard.config.streams_session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_config(group_id, "streams.heartbeat.interval.ms",
                                  self.shard.config.streams_heartbeat_interval_ms)

    def num_standby_replicas(self, group_id: str) -> int:
        return self._group_config(group_id, "streams.num.standby.replicas",
                                  self.shard.config.streams_num_standby_replicas)

    def rack_tags(self, group_id: str) -> list[str]:
        """The client tags every member must send (`streams.rack.aware.assignment.tags`,
        the group's, else the broker's), as Kafka splits them."""
        value = self.shard.image().resource_configs(GROUP_RESOURCE, group_id).get(
            "streams.rack.aware.assignment.tags")
        if value is None:
            return list(self.shard.config.streams_rack_aware_assignment_tags)
        value = value.strip()
        return re.split(r"\s*,\s*", value) if value else []

    def assignment_configs(self, group_id: str) -> dict[str, str]:
        configs = {"num.standby.replicas": str(self.num_standby_replicas(group_id))}
        if tags := self.rack_tags(group_id):
            configs["rack.aware.assignment.tags"] = ",".join(tags)
        return configs

    # ---- groups and replay ---------------------------------------------------------
    def group(self, group_id: str) -> StreamsGroup | None:
        group = self.shard.groups.get(group_id)
        return group if isinstance(group, StreamsGroup) else None

    def groups(self) -> list[StreamsGroup]:
        return [g for g in self.shard.groups.values() if isinstance(g, StreamsGroup)]

    def replay(self, record: CoordinatorRecord) -> None:
        group_id = record.key["group_id"]
        group = self.group(group_id)
        if group is None:
            if record.value is None:
                return
            existing = self.shard.groups.get(group_id)
            if existing is not None and not existing.is_empty():
                log.warning("group %s: streams group record %d replaces a non-empty %s group",
                            group_id, record.type_id, existing.group_type)
            group = StreamsGroup(group_id)
            self.shard.groups[group_id] = group
        if record.type_id == R.STREAMS_GROUP_METADATA and record.value is None:
            self.shard.remove_group(group_id)
            self.endpoint_epochs.pop(group_id, None)
            if self.shard.offsets.has_offsets(group_id):
                self.shard.create_simple_group(group_id)
            return
        group.replay(record)

    def on_loaded(self, now_ms: int) -> None:
        """Members keep their epochs across a restart but must heartbeat in time."""
        for group in self.groups():
            for member_id, member in group.members.items():
                self.arm_session(group.group_id, member_id)
                if member.state == UNREVOKED_TASKS:
                    self._arm_rebalance(group.group_id, member)

    # ---- StreamsGroupHeartbeat -----------------------------------------------------
    def heartbeat(self, req: StreamsHeartbeatRequest, now_ms: int) -> Result:
        try:
            self.validate(req)
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self.leave(req)
            return self.join_or_heartbeat(req, now_ms)
        except HeartbeatError as exc:
            return Result([], StreamsHeartbeatResponse(exc.code, exc.message))

    def validate(self, req: StreamsHeartbeatRequest) -> None:
        """Kafka 4.4's checks in its order (GroupCoordinatorService): INVALID_REQUEST,
        or STREAMS_INVALID_TOPOLOGY for a changelog with a partition count."""
        if req.topology is not None and any(s.source_topic_regex
                                            for s in req.topology.subtopologies):
            raise invalid("Regular expressions for source topics are not supported yet.")
        check_request_strings(
            req.group_id, (("MemberId", req.member_id), ("InstanceId", req.instance_id),
                           ("RackId", req.rack_id)),
            (("GroupId", req.group_id), ("MemberId", req.member_id),
             ("InstanceId", req.instance_id), ("RackId", req.rack_id),
             ("ProcessId", req.process_id), ("ClientId", req.client_id)), ())
        sent = req.sent_tasks
        if req.member_epoch == JOIN_EPOCH:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            for kind, tasks in zip(("ActiveTasks", "StandbyTasks", "WarmupTasks"), sent, strict=True):
                if tasks is None or tasks:
                    raise invalid(f"{kind} must be empty when (re-)joining.")
            if req.topology is None:
                raise invalid("Topology must be non-null when (re-)joining.")
            for sub in req.topology.subtopologies:
                for changelog in sub.state_changelog_topics:
                    if changelog.partitions != 0:
                        raise HeartbeatError(
                            E.streams_invalid_topology,
                            f"Changelog topic {changelog.name} must have an undefined "
                            f"partition count, but it is set to {changelog.partitions}.")
        elif req.member_epoch == STATIC_LEAVE_EPOCH:
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif req.member_epoch < STATIC_LEAVE_EPOCH:
            raise invalid(f"MemberEpoch is {req.member_epoch}, but must be greater than "
                          f"or equal to -2.")
        if any(t is not None for t in sent) and any(t is None for t in sent):
            raise invalid("If one task-type is non-null, all must be non-null.")
        if req.member_epoch != JOIN_EPOCH and req.topology is not None:
            raise invalid("Topology can only be provided when (re-)joining.")

    def leave(self, req: StreamsHeartbeatRequest) -> Result:
        """Epoch -1 leaves for good; -2 (a static member) leaves for a while: its tasks
        stay its own until its session runs out or an instance with its instance id
        takes its place (Kafka's streamsGroupLeave)."""
        existing = self.shard.groups.get(req.group_id)
        if not isinstance(existing, StreamsGroup):
            raise HeartbeatError(E.group_id_not_found, f"Group {req.group_id} not found."
                                 if existing is None
                                 else f"Group {req.group_id} is not a streams group.")
        group = existing
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise HeartbeatError(E.unknown_member_id, f"Member {req.member_id} is not a "
                                     f"member of group {req.group_id}.")
        else:
            member = self._static_member(group, req)
        if req.shutdown_application and group.shutdown_requested_by is None:
            group.shutdown_requested_by = member.member_id
        answer = StreamsHeartbeatResponse(member_id=req.member_id, member_epoch=req.member_epoch)
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            log.info("streams group %s: static member %s left for now", group.group_id,
                     member.member_id)
            away = replace(member, member_epoch=STATIC_LEAVE_EPOCH,
                           pending_revocation=EMPTY_TASKS,
                           active_epochs=dict.fromkeys(member.active_epochs, 0))
            return Result([current_assignment_record(group.group_id, away)], answer)
        log.info("streams group %s: member %s left", group.group_id, member.member_id)
        return Result(self.fence_records(group, member), answer)

    def _static_member(self, group: StreamsGroup, req: StreamsHeartbeatRequest
                       ) -> StreamsGroupMember:
        """The static member a heartbeat of an instance id names (not joining)."""
        member = group.static_member(req.instance_id)
        if member is None:
            raise HeartbeatError(E.unknown_member_id, f"Instance id {req.instance_id} is "
                                 f"unknown.")
        if member.member_id != req.member_id:
            raise HeartbeatError(E.fenced_instance_id, f"Static member {req.member_id} with "
                                 f"instance id {req.instance_id} was fenced by member "
                                 f"{member.member_id}.")
        return member

    def _existing(self, group_id: str) -> StreamsGroup:
        existing = self.shard.groups.get(group_id)
        if existing is None:
            raise HeartbeatError(E.group_id_not_found, f"Streams group {group_id} not found.")
        if not isinstance(existing, StreamsGroup):
            raise HeartbeatError(E.group_id_not_found,
                                 f"Group {group_id} is not a streams group.")
        return existing

    def _group_for(self, req: StreamsHeartbeatRequest, records: list[CoordinatorRecord]
                   ) -> StreamsGroup:
        """The group (only a join creates one). An empty classic group (offsets only, e.g.
        the application's before it moved to this protocol) becomes a streams group: its
        records are deleted, its offsets stay (Kafka's getOrCreateStreamsGroup)."""
        existing = self.shard.groups.get(req.group_id)
        if isinstance(existing, StreamsGroup):
            return existing
        if req.member_epoch != JOIN_EPOCH or (existing is not None and (
                not existing.is_empty() or existing.group_type != "classic")):
            return self._existing(req.group_id)  # raises
        if existing is not None:
            log.info("streams group %s: converted the empty classic group to a streams group",
                     req.group_id)
            records += existing.tombstones()
        return StreamsGroup(req.group_id)

    def _member_for(self, group: StreamsGroup, req: StreamsHeartbeatRequest,
                    records: list[CoordinatorRecord]) -> StreamsGroupMember:
        """The member the heartbeat is from, created when it joins. A static member
        joining with a new member id takes the place (and tasks) of the one that left
        with epoch -2 (records replacing it)."""
        joining = req.member_epoch == JOIN_EPOCH
        static = group.static_member(req.instance_id) if req.instance_id is not None \
            else None
        member = group.members.get(req.member_id)
        if joining and req.instance_id is not None:
            if static is None:
                return self._new_member(group, req)
            if static.member_id == req.member_id:
                return static
            if static.member_epoch != STATIC_LEAVE_EPOCH:
                raise HeartbeatError(
                    E.unreleased_instance_id, f"Static member {req.member_id} with instance "
                    f"id {req.instance_id} cannot join the group because the instance id is "
                    f"owned by {static.member_id} member.")
            return self._replace_static(group, static, req.member_id, records)
        if req.instance_id is not None and not joining:
            member = self._static_member(group, req)
        if member is None:
            if not joining:
                raise HeartbeatError(E.unknown_member_id, f"Member {req.member_id} is not a "
                                     f"member of group {group.group_id}.")
            return self._new_member(group, req)
        if joining:
            return member
        epoch = req.member_epoch
        if epoch > member.member_epoch or (epoch < member.member_epoch and (
                epoch != member.previous_member_epoch
                or not _subset(req.owned, member.assigned))):
            which = "greater" if epoch > member.member_epoch else "smaller"
            raise HeartbeatError(E.fenced_member_epoch, f"The streams group member has a "
                                 f"{which} member epoch ({epoch}) than the one known by the "
                                 f"group coordinator ({member.member_epoch}). The member "
                                 f"must abandon all its partitions and rejoin.")
        return member

    def _new_member(self, group: StreamsGroup, req: StreamsHeartbeatRequest
                    ) -> StreamsGroupMember:
        max_size = self.shard.config.streams_max_size
        if len(group.members) >= max_size:
            raise HeartbeatError(E.group_max_size_reached, f"The streams group has reached "
                                 f"its maximum capacity of {max_size} members.")
        log.info("streams group %s: member %s joins", group.group_id, req.member_id)
        return StreamsGroupMember(req.member_id, instance_id=req.instance_id,
                                  previous_member_epoch=0)

    def _replace_static(self, group: StreamsGroup, old: StreamsGroupMember, member_id: str,
                        records: list[CoordinatorRecord]) -> StreamsGroupMember:
        """The old static member's records go, the new one's come with its tasks and
        target (Kafka's replaceStreamsMember); the caller writes its metadata."""
        g = group.group_id
        log.info("streams group %s: static member %s replaces %s (instance id %s)", g,
                 member_id, old.member_id, old.instance_id)
        new = replace(old, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        records += member_tombstones(g, old.member_id)
        records.append(member_metadata_record(g, new))
        records.append(target_member_record(g, member_id,
                                            group.target.get(old.member_id, EMPTY_TASKS)))
        records.append(current_assignment_record(g, new))
        self.cancel_timers(g, old.member_id)
        return new

    def join_or_heartbeat(self, req: StreamsHeartbeatRequest, now_ms: int) -> Result:
        image = self.shard.image()
        records: list[CoordinatorRecord] = []
        group = self._group_for(req, records)
        g = group.group_id
        before = len(records)
        member = self._member_for(group, req, records)
        # A static member taking an old one's place (its records are written already).
        replaced = group.static_member(req.instance_id) if len(records) > before else None
        is_new = member.member_id not in group.members and replaced is None

        # 1. The member's changes (record 19) and the topology (record 23).
        updated = _updated(member, req)
        changed = updated.metadata() != member.metadata()
        if is_new or changed:
            records.append(member_metadata_record(g, updated))
        # A static member's new client, host, endpoint or timeout is no rebalance.
        bump = is_new or (changed and (updated.instance_id is None or _assignor_input(
            updated) != _assignor_input(member)))
        topology = self._topology(group, req, records)

        # 2. Configured against the metadata; the group epoch (record 17).
        configured = _configure(group, topology, image)
        if configured.ready:
            assert configured.tasks is not None
            _check_tasks(configured.tasks, req.owned)
        group_epoch = self._group_epoch(group, topology, configured, image, bump, records)

        # 3. The target assignment (records 21, then 20), unless it waits.
        everyone = dict(group.members)
        if replaced is not None:
            everyone.pop(replaced.member_id, None)
        everyone[updated.member_id] = updated
        if not group.members:
            self._delay_initial(g, now_ms)
        targets = dict(group.target)
        if replaced is not None:  # its target is the new member's (written above)
            targets[updated.member_id] = targets.pop(replaced.member_id, EMPTY_TASKS)
        target_epoch = group.assignment_epoch
        delayed = self._delayed(group, group_epoch, now_ms)
        if delayed is not None and delayed.startswith(_INITIAL):
            targets = {}
        elif delayed is None and group_epoch > group.assignment_epoch:
            targets = self._assign(group, everyone.values(), configured, records, group_epoch,
                                   now_ms, targets)
            target_epoch = group_epoch

        # 4. Reconcile (record 22), then the timers (the heartbeat can no longer fail).
        current = _reconciled(updated, everyone, target_epoch,
                              targets.get(updated.member_id, EMPTY_TASKS),
                              req.owned if req.member_epoch != JOIN_EPOCH else EMPTY_TASKS)
        if is_new or current.current_assignment() != updated.current_assignment():
            records.append(current_assignment_record(g, current))
        self.arm_session(g, updated.member_id)
        if current.state != UNREVOKED_TASKS:
            self.shard.timer.cancel(rebalance_key(g, updated.member_id))
        elif member.state != UNREVOKED_TASKS or member.member_epoch != current.member_epoch:
            self._arm_rebalance(g, current)
        if req.shutdown_application:
            group.shutdown_requested_by = updated.member_id

        changed = current.assigned != member.assigned
        joining = req.member_epoch == JOIN_EPOCH
        endpoint_epoch = self.endpoint_epochs.get(g, 0)
        if (joining or changed) and current.user_endpoint is not None:
            endpoint_epoch += 1
            self.endpoint_epochs[g] = endpoint_epoch
        return Result(records, StreamsHeartbeatResponse(
            member_id=updated.member_id, member_epoch=current.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(g),
            status=_status(group, current, topology, configured, delayed,
                           self.rack_tags(g) if req.api_version >= 1 else []),
            assignment=current.assigned if joining or changed else None,
            endpoint_information_epoch=endpoint_epoch,
            endpoints=(_endpoints(everyone.values(), current, topology, image)
                       if endpoint_epoch != req.endpoint_information_epoch else None),
            to_create=configured.to_create))

    def _group_epoch(self, group: StreamsGroup, topology: Topology,
                     configured: ConfiguredTopology, image: MetadataImage, bump: bool,
                     records: list[CoordinatorRecord]) -> int:
        """The group epoch after this heartbeat: one more (record 17) when `bump` (a new
        or changed member), or the topology's topics changed (the metadata hash), or it
        was validated, or the assignment configs changed."""
        g = group.group_id
        metadata_hash = topics_hash(topology, image)
        validated = topology.epoch if configured.ready else -1
        configs = self.assignment_configs(g)
        if not (bump or metadata_hash != group.metadata_hash
                or validated != group.validated_topology_epoch
                or configs != group.last_assignment_configs):
            return group.group_epoch
        records.append(group_epoch_record(g, group.group_epoch + 1, metadata_hash, validated,
                                          configs))
        return group.group_epoch + 1
    def _delay_initial(self, group_id: str, now_ms: int) -> None:
        """A heartbeat to an empty group: its first assignment waits
        `streams.initial.rebalance.delay.ms` for the application's other instances."""
        delay = self._group_config(group_id, "streams.initial.rebalance.delay.ms",
                                   self.shard.config.streams_initial_rebalance_delay_ms)
        if delay <= 0 or group_id in self._initial_due:
            return
        self._initial_due[group_id] = now_ms + delay
        self.shard.timer.schedule(f"initial-rebalance-timeout-{group_id}", delay,
                                  lambda now: self._delayed_assignment(group_id, now))

    def _delayed(self, group: StreamsGroup, group_epoch: int, now_ms: int) -> str | None:
        """Why the target assignment waits (ASSIGNMENT_DELAYED's detail), or None: the
        initial delay (nobody gets tasks yet), or the assignment interval since the
        assignor last ran (the current target stands)."""
        if group.group_id in self._initial_due:
            return _INITIAL
        interval = self._group_config(group.group_id, "streams.assignment.interval.ms",
                                      self.shard.config.streams_assignment_interval_ms)
        if (group_epoch > group.assignment_epoch and group.assignment_timestamp
                and interval and now_ms < group.assignment_timestamp + interval):
            return _INTERVAL
        return None

    def _delayed_assignment(self, group_id: str, now_ms: int) -> Result:
        """Timer operation: the first target assignment, once the initial delay is over
        (members take it at their next heartbeat)."""
        self._initial_due.pop(group_id, None)
        group = self.group(group_id)
        if group is None or not group.members or group.group_epoch <= group.assignment_epoch \
                or group.topology is None:
            return Result([])
        configured = group.configured(self.shard.image())
        assert configured is not None
        records: list[CoordinatorRecord] = []
        self._assign(group, group.members.values(), configured, records, group.group_epoch,
                     now_ms)
        return Result(records)

    def _topology(self, group: StreamsGroup, req: StreamsHeartbeatRequest,
                  records: list[CoordinatorRecord]) -> Topology:
        """The group's topology after this heartbeat (Kafka's maybeUpdateTopology)."""
        given, current = req.topology, group.topology
        if given is None:
            if current is None:  # a member past joining cannot get here without one
                raise HeartbeatError(E.invalid_request, "The topology is not initialized.")
            return current
        if current is None:
            log.info("streams group %s: member %s initialised the topology with epoch %d",
                     group.group_id, req.member_id, given.epoch)
            records.append(topology_record(group.group_id, given))
            return given
        if current.epoch > given.epoch:
            return current
        if current != given:
            raise invalid("Topology updates are not supported yet.")
        return current

    def _assign(self, group: StreamsGroup, members: Iterable[StreamsGroupMember],
                configured: ConfiguredTopology, records: list[CoordinatorRecord],
                epoch: int, now_ms: int, previous: Mapping[str, TasksTuple] | None = None
                ) -> dict[str, TasksTuple]:
        """The target assignment at `epoch` (records 21 of members whose target changed,
        then 20): the sticky assignor's when the topology is ready, else nothing.
        `previous`: the targets before (default the group's)."""
        g = group.group_id
        members = list(members)
        before = group.target if previous is None else previous
        if configured.ready and configured.tasks is not None:
            specs = [assignor.MemberSpec(
                member_id=m.member_id, process_id=m.process_id,
                active=dict(before.get(m.member_id, EMPTY_TASKS).active),
                standby=dict(before.get(m.member_id, EMPTY_TASKS).standby),
                warmup=dict(before.get(m.member_id, EMPTY_TASKS).warmup),
                client_tags=dict(m.client_tags)) for m in members]
            subs = [assignor.SubtopologySpec(sid, n, sid in configured.stateful)
                    for sid, n in sorted(configured.tasks.items())]
            result = assignor.assign(specs, subs, self.num_standby_replicas(g))
            targets = {mid: TasksTuple.of(t.active, t.standby, t.warmup)
                       for mid, t in result.items()}
        else:
            targets = {m.member_id: EMPTY_TASKS for m in members}
        for member_id in sorted(targets):
            if before.get(member_id) != targets[member_id] or member_id not in before:
                records.append(target_member_record(g, member_id, targets[member_id]))
        records.append(target_metadata_record(g, epoch, now_ms))
        return targets

    # ---- leaving and fencing -------------------------------------------------------
    def fence(self, group_id: str, member_id: str, reason: str,
              expected_epoch: int | None = None) -> Result:
        """Timer operation: remove a member whose session (or, with `expected_epoch`, its
        rebalance timeout at that epoch) ran out."""
        group = self.group(group_id)
        member = fenceable(None if group is None else group.members, member_id, expected_epoch)
        if group is None or member is None:
            return Result([])
        log.info("streams group %s: member %s fenced because %s", group_id, member_id, reason)
        return Result(self.fence_records(group, member))

    def fence_records(self, group: StreamsGroup, member: StreamsGroupMember
                      ) -> list[CoordinatorRecord]:
        """A member's departure: its tombstones and a new group epoch; its timers are
        cancelled."""
        g, mid = group.group_id, member.member_id
        records = member_tombstones(g, mid)
        records.append(group_epoch_record(g, group.group_epoch + 1, group.metadata_hash,
                                          group.validated_topology_epoch,
                                          group.last_assignment_configs))
        if group.members.keys() == {mid}:  # the empty group's target is current
            records.append(target_metadata_record(g, group.group_epoch + 1, 0))
        if group.shutdown_requested_by == mid:
            group.shutdown_requested_by = None
        self.cancel_timers(g, mid)
        return records

    # ---- timers --------------------------------------------------------------------
    def arm_session(self, group_id: str, member_id: str) -> None:
        self.shard.timer.schedule(
            session_key("streams", group_id, member_id), self.session_timeout_ms(group_id),
            lambda now: self.fence(group_id, member_id, "the member session expired"))

    def _arm_rebalance(self, group_id: str, member: StreamsGroupMember) -> None:
        epoch, timeout = member.member_epoch, max(member.rebalance_timeout_ms, 0)
        member_id = member.member_id
        self.shard.timer.schedule(
            rebalance_key(group_id, member_id), timeout,
            lambda now: self.fence(group_id, member_id, f"it failed to revoke tasks within "
                                   f"{timeout} ms", expected_epoch=epoch))

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        self.shard.timer.cancel(session_key("streams", group_id, member_id))
        self.shard.timer.cancel(rebalance_key(group_id, member_id))

    # ---- StreamsGroupDescribe ------------------------------------------------------
    def describe(self, group_ids: Iterable[str], include_operations: bool
                 ) -> list[dict[str, Any]]:
        out = []
        image = self.shard.image()
        for group_id in group_ids:
            existing = self.shard.groups.get(group_id)
            if not group_id:
                out.append(streams_describe_error(group_id, E.invalid_group_id, "Group id is empty."))
            elif existing is None:
                out.append(streams_describe_error(group_id, E.group_id_not_found,
                                           f"Group {group_id} not found."))
            elif not isinstance(existing, StreamsGroup):
                out.append(streams_describe_error(group_id, E.group_id_not_found,
                                           f"Group {group_id} is not a streams group."))
            else:
                out.append(existing.describe_streams(image, include_operations))
        return out


def streams_describe_error(group_id: str, code: int, message: str | None) -> dict[str, Any]:
    entry = describe_error(group_id, code, message)
    entry.pop("assignor_name", None)
    entry["topology"] = None
    return entry


def _updated(member: StreamsGroupMember, req: StreamsHeartbeatRequest) -> StreamsGroupMember:
    """The member with the heartbeat's changes (a field not sent is unchanged)."""
    def pick(sent: Any, kept: Any) -> Any:
        return kept if sent is None else sent

    return replace(
        member, rack_id=pick(req.rack_id, member.rack_id),
        rebalance_timeout_ms=(req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
                              else member.rebalance_timeout_ms),
        topology_epoch=req.topology.epoch if req.topology is not None else member.topology_epoch,
        client_id=req.client_id, client_host=req.client_host,
        process_id=pick(req.process_id, member.process_id),
        client_tags=pick(req.client_tags, member.client_tags),
        # Joining sets the endpoint even to none (a restarted instance may have dropped it).
        user_endpoint=(req.user_endpoint if req.member_epoch == JOIN_EPOCH
                       else pick(req.user_endpoint, member.user_endpoint)))


def _assignor_input(member: StreamsGroupMember) -> tuple[Any, ...]:
    """What of a static member's metadata changes the assignment when it changes."""
    return (member.topology_epoch, member.rack_id, member.client_tags, member.process_id)


def _reconciled(member: StreamsGroupMember, everyone: Mapping[str, StreamsGroupMember],
                target_epoch: int, target: TasksTuple, owned: TasksTuple | None
                ) -> StreamsGroupMember:
    """The member reconciled towards its target: a task another member still holds waits
    (an active task held as active anywhere; a standby or warm-up task held in any role
    by another member of the same process)."""
    held = holders(m for mid, m in everyone.items() if mid != member.member_id)
    process_of = {mid: m.process_id for mid, m in everyone.items()}

    def on_process(kind: str, sid: str, p: int) -> bool:
        return any(process_of.get(mid) == member.process_id
                   for mid in held.get((kind, sid, p), ()))

    def blocked(kind: str, sid: str, p: int) -> bool:
        """Kafka 4.4's unreleased tasks: an active task while any member holds it as
        active, or another member of this process as standby or warm-up; a standby or
        warm-up task while another member of this process holds it in any role."""
        if kind == "active":
            return bool(held.get(("active", sid, p))) or on_process("standby", sid, p) \
                or on_process("warmup", sid, p)
        return any(on_process(k, sid, p) for k in KINDS)

    try:
        return reconcile(member, target_epoch, target, owned, blocked)
    except MustRejoin as exc:
        raise HeartbeatError(E.fenced_member_epoch, str(exc)) from None


def _status(group: StreamsGroup, member: StreamsGroupMember, topology: Topology,
            configured: ConfiguredTopology, delayed: str | None, rack_tags: list[str]
            ) -> tuple[tuple[int, str], ...]:
    """The heartbeat's statuses, in Kafka's order. `rack_tags`: the client tags the
    member must have sent (none asked of a v0 member, as Kafka 4.4)."""
    status: list[tuple[int, str]] = []
    if member.topology_epoch < topology.epoch:
        status.append((STALE_TOPOLOGY, f"The member's topology epoch {member.topology_epoch} "
                       f"is behind the group's topology epoch {topology.epoch}."))
    if delayed is not None:
        status.append((ASSIGNMENT_DELAYED, delayed))
    if configured.status is not None:
        status.append(configured.status)
    if group.shutdown_requested_by is not None:
        status.append((SHUTDOWN_APPLICATION, f"Streams group member "
                       f"{group.shutdown_requested_by} encountered a fatal error and "
                       f"requested a shutdown for the entire application."))
    sent = {k for k, _v in member.client_tags}
    if missing := [t for t in rack_tags if t not in sent]:
        status.append((MISSING_CLIENT_TAGS, "Missing required client tags for rack-aware "
                       f"standby assignment: [{', '.join(missing)}]. Configure them via "
                       "'client.tag.<tagKey>' in your Streams config."))
    return tuple(status)


def _configure(group: StreamsGroup, topology: Topology, image: MetadataImage
               ) -> ConfiguredTopology:
    if group.topology is None or group.topology != topology:
        return configure(topology, image)
    configured = group.configured(image)
    assert configured is not None
    return configured


def _subset(owned: TasksTuple | None, assigned: TasksTuple) -> bool:
    """A member a heartbeat behind keeps its epoch only if it sent all three task lists
    and they are within what it was assigned (not sent: fenced, as Kafka 4.4)."""
    if owned is None:
        return False
    return all(ps <= getattr(assigned, k).get(s, frozenset())
               for k in KINDS for s, ps in getattr(owned, k).items())


def _check_tasks(tasks: Mapping[str, int], owned: TasksTuple | None) -> None:
    """INVALID_REQUEST for a reported task the configured topology does not have."""
    if owned is None:
        return
    for kind in KINDS:
        reported: Tasks = getattr(owned, kind)
        for sid, parts in sorted(reported.items()):
            if sid not in tasks:
                raise invalid(f"Subtopology {sid} does not exist in the topology.")
            for p in sorted(parts):
                if p < 0 or p >= tasks[sid]:
                    raise invalid(f"Task {p} for subtopology {sid} is invalid. Number of "
                                  f"tasks for this subtopology: {tasks[sid]}")


def _endpoints(members: Iterable[StreamsGroupMember], me: StreamsGroupMember,
               topology: Topology, image: MetadataImage) -> tuple[dict[str, Any], ...]:
    """PartitionsByUserEndpoint: each member with an endpoint, the partitions of its
    active and standby tasks (Kafka's EndpointToPartitionsManager)."""
    out = []
    everyone = {m.member_id: m for m in members}
    everyone[me.member_id] = me
    for m in sorted(everyone.values(), key=lambda m: m.member_id):
        if m.user_endpoint is None:
            continue
        out.append({"user_endpoint": {"host": m.user_endpoint[0], "port": m.user_endpoint[1]},
                    "active_partitions": _task_partitions(m.assigned.active, topology, image),
                    "standby_partitions": _task_partitions(m.assigned.standby, topology,
                                                           image)})
    return tuple(out)


def _task_partitions(tasks: Tasks, topology: Topology, image: MetadataImage
                     ) -> list[dict[str, Any]]:
    by_topic: dict[str, set[int]] = {}
    for sid, parts in tasks.items():
        sub = topology.subtopology(sid)
        if sub is None:
            continue
        for name in list(sub.source_topics) + [t.name for t in sub.repartition_source_topics]:
            topic = image.topic(name)
            count = len(topic.partitions) if topic is not None else 0
            by_topic.setdefault(name, set()).update(p for p in parts if p < count)
    return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items()) if ps]

