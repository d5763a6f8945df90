"""What the ConsumerGroupHeartbeat and ShareGroupHeartbeat operations do alike: Kafka's
GroupMetadataManager treats both kinds of modern group the same way in these steps.

Theory of operation
-------------------
A heartbeat of either kind, in order (the details of each kind are in
consumer/operations.py and share/operations.py):

1. validate the request: INVALID_REQUEST for blank or over-long strings
   (`check_request_strings`) and the kind's own rules - nothing written;
2. leave (epoch -1, and -2 for a consumer group's static member): the member's
   tombstones (current assignment, target member, member metadata: Kafka's order)
   and a new group epoch over the topics the others subscribe to (`fence_records`);
3. find the group (`existing_group`: GROUP_ID_NOT_FOUND for an unknown id or another
   kind of group) and the member: UNKNOWN_MEMBER_ID, GROUP_MAX_SIZE_REACHED
   (`full`), and the member epoch check (`check_member_epoch`: FENCED_MEMBER_EPOCH
   unless the epoch is the member's, or its previous one after a lost response);
4. write the member's changed metadata and bump the group epoch when the assignor's
   input changed (`next_group_epoch`: a changed subscription, or a changed metadata
   hash of the subscribed topics);
5. when the group epoch is ahead of the target epoch, assign: the target member
   records of members whose target changed (`target_records`), then the target
   metadata;
6. move the member towards its target; 7. re-arm its session timer (`arm_session`).

Errors raise `HeartbeatError` before anything is returned, so a failed heartbeat
writes no records and arms no timers (`heartbeat` turns it into the answer). The
session timer fences the member exactly like a leave (`fence`). `ModernGroupManager`
also holds what both managers do around the heartbeat: replay into the shard's
groups, re-arming sessions on load, the describe loop and the group configs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kio.schema.errors import ErrorCode as E

from ...coordinator.record_codec import CoordinatorRecord
from ...coordinator.runtime import Result
from ...metadata.image import GROUP_RESOURCE
from .assignment import Assignment
from .group import INT32_MIN, ModernGroup, ModernGroupMember, metadata_hash
from .member_epochs import fenceable

if TYPE_CHECKING:
    from ...metadata.image import MetadataImage

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
MAX_STRING_BYTES = 32767  # record strings are int16-length prefixed


class HeartbeatError(Exception):
    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    """The answer of either heartbeat (ConsumerGroupHeartbeat and ShareGroupHeartbeat
    answer with the same fields)."""

    error_code: int = E.none
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass(frozen=True, slots=True)
class ModernHeartbeatRequest:
    """What every heartbeat request carries (None = unchanged), plus the request
    context; a ShareGroupHeartbeat carries no more, a ConsumerGroupHeartbeat adds its
    own fields."""

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


def invalid(message: str | None) -> HeartbeatError:
    return HeartbeatError(E.invalid_request, message)


def check_request_strings(group_id: str, optional: Sequence[tuple[str, str | None]],
                          sized: Sequence[tuple[str, str | None]],
                          topic_names: Iterable[str] | None) -> None:
    """INVALID_REQUEST for a blank group id, a blank `optional` field that was sent, an
    over-long `sized` field or subscribed topic name (Kafka's messages)."""
    if not group_id.strip():
        raise invalid("GroupId can't be empty.")
    for name, value in optional:
        if value is not None and not value.strip():
            raise invalid(f"{name} can't be empty.")
    for name, value in sized:
        if value is not None and len(value.encode()) > MAX_STRING_BYTES:
            raise invalid(f"{name} is longer than {MAX_STRING_BYTES} bytes.")
    for topic in topic_names or ():
        if len(topic.encode()) > MAX_STRING_BYTES:
            raise invalid(f"SubscribedTopicNames has a name longer than {MAX_STRING_BYTES} "
                          f"bytes.")


def session_key(kind: str, group_id: str, member_id: str) -> str:
    return f"{kind}-session\0{group_id}\0{member_id}"


def describe_error(group_id: str, code: int, message: str | None) -> dict[str, Any]:
    """A ConsumerGroupDescribe / ShareGroupDescribe entry for a group not described."""
    return {"error_code": code, "error_message": message, "group_id": group_id,
            "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
            "members": (), "authorized_operations": INT32_MIN}


G = TypeVar("G", bound=ModernGroup[Any])
Q = TypeVar("Q", bound=ModernHeartbeatRequest)


class ModernGroupManager(Generic[G, Q]):
    """The operations of one kind of modern group on a shard: its groups among the
    shard's, their replay, the heartbeat's shared steps, fencing, session timers,
    describe, and the session timeout and heartbeat interval of a group (its
    `<kind>.session.timeout.ms` / `.heartbeat.interval.ms` override, else the broker's
    `group.<kind>.*` default)."""

    group_class: type[G]
    config_prefix: str  # "consumer" or "share": the configs' prefix, the kind in messages
    leave_epochs: tuple[int, ...] = (LEAVE_EPOCH,)

    def __init__(self, shard: Any) -> None:
        self.shard = shard
        self._loaded = False
        self.log = logging.getLogger(f"headwater.group.{self.config_prefix}")

    def group(self, group_id: str) -> G | None:
        group = self.shard.groups.get(group_id)
        return group if isinstance(group, self.group_class) else None

    def groups(self) -> list[G]:
        return [g for g in self.shard.groups.values() if isinstance(g, self.group_class)]

    def _group_config(self, group_id: str, key: str, default: int) -> int:
        value = self.shard.image().resource_configs(GROUP_RESOURCE, group_id).get(key)
        try:
            return int(value) if value is not None else default
        except ValueError:
            return default

    def session_timeout_ms(self, group_id: str) -> int:
        p = self.config_prefix
        return self._group_config(group_id, f"{p}.session.timeout.ms",
                                  getattr(self.shard.config, f"{p}_session_timeout_ms"))

    def heartbeat_interval_ms(self, group_id: str) -> int:
        p = self.config_prefix
        return self._group_config(group_id, f"{p}.heartbeat.interval.ms",
                                  getattr(self.shard.config, f"{p}_heartbeat_interval_ms"))

    # ---- replay --------------------------------------------------------------------
    def replay(self, record: CoordinatorRecord) -> None:
        """A record of this kind of group: the group is created by its first record and
        removed by its group metadata tombstone (an Empty classic group stays when it
        has committed offsets); the rest is the group's to replay (`replay_into`)."""
        group_id = record.key["group_id"]
        group = self.group(group_id)
        if group is None:
            if record.value is None:
                return
            existing = self.shard.groups.get(group_id)
            if existing is not None and not existing.is_empty():
                self.log.warning("group %s: %s group record %d replaces a non-empty %s group",
                                 group_id, self.config_prefix, record.type_id,
                                 existing.group_type)
            group = self.group_class(group_id)
            self.shard.groups[group_id] = group
        if record.type_id == group.records.group_metadata and record.value is None:
            self.shard.remove_group(group_id)
            if self.shard.offsets.has_offsets(group_id):
                self.shard.create_simple_group(group_id)
            return
        self.replay_into(group, record)

    def replay_into(self, group: G, record: CoordinatorRecord) -> None:
        group.replay(record)

    def on_loaded(self, now_ms: int) -> None:
        """Members keep their epochs across a restart but must heartbeat in time."""
        self._loaded = True
        for group in self.groups():
            for member_id in group.members:
                self.arm_session(group.group_id, member_id)

    # ---- the heartbeat -------------------------------------------------------------
    def heartbeat(self, req: Q, now_ms: int) -> Result:
        try:
            self.validate(req)
            if req.member_epoch in self.leave_epochs:
                return self.leave(req)
            return self.join_or_heartbeat(req, now_ms)
        except HeartbeatError as exc:
            return Result([], HeartbeatResponse(exc.code, exc.message))

    def validate(self, req: Q) -> None:
        raise NotImplementedError

    def leave(self, req: Q) -> Result:
        raise NotImplementedError

    def join_or_heartbeat(self, req: Q, now_ms: int) -> Result:
        raise NotImplementedError

    def existing_group(self, group_id: str, not_found: str | None = None) -> G:
        """The group, or GROUP_ID_NOT_FOUND: `not_found` (default "Group <id> not found.")
        for an unknown id, "not a <kind> group" for another kind's."""
        existing = self.shard.groups.get(group_id)
        if existing is None:
            raise HeartbeatError(E.group_id_not_found, not_found or f"Group {group_id} not found.")
        if not isinstance(existing, self.group_class):
            raise HeartbeatError(E.group_id_not_found,
                                 f"Group {group_id} is not a {self.config_prefix} group.")
        return existing

    def unknown_member(self, member_id: str, group_id: str) -> HeartbeatError:
        return HeartbeatError(E.unknown_member_id,
                              f"Member {member_id} is not a member of group {group_id}.")

    def full(self, max_size: int) -> HeartbeatError:
        return HeartbeatError(E.group_max_size_reached, f"The {self.config_prefix} group has "
                              f"reached its maximum capacity of {max_size} members.")

    def check_member_epoch(self, member: ModernGroupMember, epoch: int,
                           previous_allowed: bool) -> None:
        """FENCED_MEMBER_EPOCH unless `epoch` is the member's, or (`previous_allowed`: the
        kind's condition for it) its previous one: the member missed the response that
        moved it on. Kafka's throwIfMemberEpochIsInvalid."""
        if epoch > member.member_epoch:
            raise self._fenced("greater", epoch, member)
        if epoch < member.member_epoch and (epoch != member.previous_member_epoch
                                            or not previous_allowed):
            raise self._fenced("smaller", epoch, member)

    def _fenced(self, which: str, epoch: int, member: ModernGroupMember) -> HeartbeatError:
        return HeartbeatError(E.fenced_member_epoch, f"The {self.config_prefix} group member "
                              f"has a {which} member epoch ({epoch}) than the one known by "
                              f"the group coordinator ({member.member_epoch}). The member "
                              f"must abandon all its partitions and rejoin.")

    def next_group_epoch(self, group: G, bump: bool, topics: Iterable[str],
                         image: MetadataImage, records: list[CoordinatorRecord]) -> int:
        """The group epoch after this change: one more (and its record, with the new
        metadata hash) when `bump`, or when the metadata hash of `topics` changed."""
        new_hash = metadata_hash(topics, image)
        if not bump and new_hash == group.metadata_hash:
            return group.group_epoch
        epoch = group.group_epoch + 1
        records.append(group.records.group_epoch_record(group.group_id, epoch, new_hash))
        return epoch

    def target_records(self, group: G, previous: Mapping[str, Assignment],
                       targets: Mapping[str, Assignment],
                       records: list[CoordinatorRecord]) -> None:
        """A target member record for each member (in id order) whose target is new or
        differs from `previous`."""
        for member_id in sorted(targets):
            target = targets[member_id]
            if member_id not in previous or dict(target) != dict(previous[member_id]):
                records.append(group.records.target_member_record(group.group_id, member_id,
                                                                  target))

    # ---- leaving and fencing -------------------------------------------------------
    def leave_member(self, group: G, member: ModernGroupMember, epoch: int) -> Result:
        """The member leaves (its heartbeat with a leave epoch): answered with `epoch`."""
        self.log.info("%s group %s: member %s left", self.config_prefix, group.group_id,
                      member.member_id)
        return Result(self.fence_records(group, member),
                      HeartbeatResponse(member_id=member.member_id, member_epoch=epoch))

    def fence(self, group_id: str, member_id: str, reason: str,
              expected_epoch: int | None = None) -> Result:
        """Timer operation: remove a member whose session (or, with `expected_epoch`, its
        rebalance timeout at that epoch) ran out."""
        group = self.group(group_id)
        member = fenceable(None if group is None else group.members, member_id, expected_epoch)
        if group is None or member is None:
            return Result([])
        self.log.info("%s group %s: member %s fenced because %s", self.config_prefix,
                      group_id, member_id, reason)
        return Result(self.fence_records(group, member))

    def fence_records(self, group: G, member: ModernGroupMember) -> list[CoordinatorRecord]:
        """A member's departure: its tombstones, the kind's own (`departure_records`),
        a new group epoch over the others' topics; its timers are cancelled."""
        g, mid = group.group_id, member.member_id
        records = group.records.member_tombstones(g, mid) + self.departure_records(group,
                                                                                   member)
        remaining = [m for m in group.members.values() if m.member_id != mid]
        records.append(group.records.group_epoch_record(
            g, group.group_epoch + 1,
            metadata_hash(group.subscribed_topics(remaining), self.shard.image())))
        self.cancel_timers(g, mid)
        return records

    def departure_records(self, group: G, member: ModernGroupMember
                          ) -> list[CoordinatorRecord]:
        """Records of the kind's own a departure writes (none by default)."""
        return []

    # ---- timers --------------------------------------------------------------------
    def arm_session(self, group_id: str, member_id: str) -> None:
        self.shard.timer.schedule(
            session_key(self.config_prefix, group_id, member_id),
            self.session_timeout_ms(group_id),
            lambda now: self.fence(group_id, member_id, "the member session expired"))

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        self.shard.timer.cancel(session_key(self.config_prefix, group_id, member_id))

    # ---- describe ------------------------------------------------------------------
    def describe(self, group_ids: Iterable[str], include_operations: bool) -> list[dict[str, Any]]:
        """ConsumerGroupDescribe / ShareGroupDescribe entries."""
        out = []
        image = self.shard.image()
        for group_id in group_ids:
            existing = self.shard.groups.get(group_id)
            if not group_id:
                out.append(describe_error(group_id, E.invalid_group_id, "Group id is empty."))
            elif existing is None:
                out.append(describe_error(group_id, E.group_id_not_found,
                                          f"Group {group_id} not found."))
            elif not isinstance(existing, self.group_class):
                out.append(describe_error(group_id, E.group_id_not_found, f"Group {group_id} is "
                                          f"not a {self.config_prefix} group."))
            else:
                out.append(self.describe_group(existing, image, include_operations))
        return out

    def describe_group(self, group: G, image: MetadataImage, include_operations: bool
                       ) -> dict[str, Any]:
        raise NotImplementedError
