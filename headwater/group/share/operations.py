"""KIP-932 share groups: the ShareGroupHeartbeat operation, session timers, describe.

Theory of operation
-------------------
Every change is an operation returning records; `replay` is the only state change
(group.py). A heartbeat, in Kafka's order (GroupMetadataManager.shareGroupHeartbeat):

1. validate the request (INVALID_REQUEST) - nothing written;
2. leave (epoch -1): tombstones 14, 13, 10 and a new group epoch (record 11);
3. find or create the group (only epoch 0 creates; a group id of another type is
   GROUP_ID_NOT_FOUND), refuse a new member of a full group (GROUP_MAX_SIZE_REACHED),
   find or create the member (the client makes the member id; epoch 0 joins; otherwise
   the epoch must be the member's or its previous one, else FENCED_MEMBER_EPOCH;
   an unknown member is UNKNOWN_MEMBER_ID);
4. apply the member's changes (record 10) and bump the group epoch (record 11) when
   the assignor's input changed: a new subscription, or the metadata hash of the
   subscribed topics;
5. when the group epoch is ahead of the target epoch, run the simple assignor
   (assignor.py): records 13 for members whose target changed, record 15 for
   share-partitions handed out for the first time, then record 12. Except for the
   first assignment of an empty group: members that join an empty group within
   `share.assignment.interval.ms` (1 s) get an empty target first, and a timer one
   interval after the first join bumps the group epoch and assigns them all at once,
   so consumers started together share the partitions (Kafka 4.4 likewise answers a
   join with an empty assignment and assigns about a second later). Meanwhile their
   heartbeat interval is cut to the time left, so they come back for it;
6. bring the member to the target (record 14): no revocation, partitions are shared;
7. re-arm the session timer. The response carries the assignment when the member
   (re)joined or its assignment changed, as Kafka does.

A heartbeat that fails raises `HeartbeatError` before anything is returned, so it writes
no records and arms no timers. Session expiry is a timer operation that fences the
member exactly like a leave; the coordinator tells its listeners (the share-partition
leaders release the member's records) when the member's record 10 tombstone is replayed.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ...coordinator.record_codec import CoordinatorRecord
from ...coordinator.runtime import Result
from .. import records as R
from ..base import GroupsOfType
from ..consumer.operations import MAX_STRING_BYTES, HeartbeatError
from ..errors import (
    FENCED_MEMBER_EPOCH,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    INVALID_GROUP_ID,
    INVALID_REQUEST,
    NONE,
    UNKNOWN_MEMBER_ID,
)
from ..modern.assignment import EMPTY, Assignment
from ..modern.group import SHARE_RECORDS, metadata_hash
from . import assignor as share_assignor
from .group import (
    ShareGroup,
    ShareGroupMember,
    current_assignment_record,
    group_epoch_record,
    member_metadata_record,
    state_partitions_record,
    target_member_record,
    target_metadata_record,
)

if TYPE_CHECKING:
    from ...metadata.image import MetadataImage
    from ..shard import GroupShard

log = logging.getLogger("headwater.group.share")

JOIN_EPOCH = 0
LEAVE_EPOCH = -1


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    """ShareGroupHeartbeat v1 fields (None = unchanged) plus the request context."""

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResponse:
    error_code: int = NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def session_key(group_id: str, member_id: str) -> str:
    return f"share-session\0{group_id}\0{member_id}"


class ShareGroupManager(GroupsOfType[ShareGroup]):
    group_class = ShareGroup
    config_prefix = "share"

    def __init__(self, shard: GroupShard) -> None:
        super().__init__(shard)
        # Told (group id, member id) when a member leaves or is fenced (after load).
        self.member_removed: Callable[[str, str], None] | None = None
        # Groups whose first assignment waits for its timer: group id -> when (ms).
        self._initial_due: dict[str, int] = {}

    def assignment_interval_ms(self, group_id: str) -> int:
        return self._group_config(group_id, "share.assignment.interval.ms",
                                  self.shard.config.share_assignment_interval_ms)

    def assignment(self, group_id: str, member_id: str) -> Assignment | None:
        group = self.group(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is None or member.member_epoch < 0:
            return None
        return member.assigned

    def state_partitions(self, group_id: str) -> dict[uuid.UUID, frozenset[int]]:
        """Share-partitions whose state the share coordinator may hold (record 15)."""
        group = self.group(group_id)
        return dict(group.initialized) if group is not None else {}

    # ---- replay --------------------------------------------------------------------
    def replay(self, record: CoordinatorRecord) -> None:
        group_id = record.key["group_id"]
        group = self.group(group_id)
        if group is None:
            if record.value is None:
                return
            existing = self.shard.groups.get(group_id)
            if existing is not None:
                log.warning("group %s: share record %d replaces a %s group", group_id,
                            record.type_id, existing.group_type)
            group = ShareGroup(group_id)
            self.shard.groups[group_id] = group
        if record.type_id == R.SHARE_GROUP_METADATA and record.value is None:
            self.shard.remove_group(group_id)
            return
        gone = (record.type_id == R.SHARE_GROUP_MEMBER_METADATA and record.value is None
                and record.key["member_id"] in group.members)
        group.replay(record)
        if gone and self._loaded and self.member_removed is not None:
            try:
                self.member_removed(group_id, record.key["member_id"])
            except Exception:
                log.exception("share member listener failed")

    def on_loaded(self, now_ms: int) -> None:
        """Members keep their epochs across a restart but must heartbeat in time; a
        group whose first assignment was still pending gets it now."""
        self._loaded = True
        for group in self.groups():
            for member_id in group.members:
                self._arm_session(group.group_id, member_id)
            if group.members and not any(group.target.get(m) for m in group.members) \
                    and any(m.subscribed_topic_names for m in group.members.values()):
                self._schedule_initial(group.group_id, now_ms, 0)

    def on_metadata_update(self, image: MetadataImage, now_ms: int) -> list[CoordinatorRecord]:
        """Topics created, deleted or grown: bump the epoch of groups whose subscribed
        topics changed; forget share-partitions of deleted topics (record 15)."""
        records: list[CoordinatorRecord] = []
        for group in sorted(self.groups(), key=lambda g: g.group_id):
            if group.members:
                new_hash = metadata_hash(group.subscribed_topics(), image)
                if new_hash != group.metadata_hash:
                    records.append(group_epoch_record(group.group_id, group.group_epoch + 1,
                                                      new_hash))
            live = {t: ps for t, ps in group.initialized.items()
                    if image.topic_by_id(t) is not None}
            deleting = {t: n for t, n in group.deleting.items()
                        if image.topic_by_id(t) is not None}
            if live != group.initialized or deleting != group.deleting:
                records.append(state_partitions_record(group.group_id, live,
                                                       group.topic_names, deleting))
        return records

    # ---- ShareGroupHeartbeat -------------------------------------------------------
    def heartbeat(self, req: ShareHeartbeatRequest, now_ms: int) -> Result:
        try:
            _validate(req)
            if req.member_epoch == LEAVE_EPOCH:
                return self._leave(req)
            return self._heartbeat(req, now_ms)
        except HeartbeatError as exc:
            return Result([], ShareHeartbeatResponse(exc.code, exc.message))

    def _existing_group(self, group_id: str) -> ShareGroup:
        existing = self.shard.groups.get(group_id)
        if existing is None:
            raise HeartbeatError(GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if not isinstance(existing, ShareGroup):
            raise HeartbeatError(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        return existing

    def _leave(self, req: ShareHeartbeatRequest) -> Result:
        group = self._existing_group(req.group_id)
        member = group.members.get(req.member_id)
        if member is None:
            raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member "
                                 f"of group {req.group_id}.")
        log.info("share group %s: member %s left", group.group_id, member.member_id)
        return Result(self._fence_records(group, member),
                      ShareHeartbeatResponse(member_id=req.member_id,
                                             member_epoch=LEAVE_EPOCH))

    def _fence_records(self, group: ShareGroup, member: ShareGroupMember
                       ) -> list[CoordinatorRecord]:
        g, mid = group.group_id, member.member_id
        remaining = [m for m in group.members.values() if m.member_id != mid]
        records = SHARE_RECORDS.member_tombstones(g, mid)
        records.append(group_epoch_record(
            g, group.group_epoch + 1,
            metadata_hash(group.subscribed_topics(remaining), self.shard.image())))
        self.shard.timer.cancel(session_key(g, mid))
        return records

    def fence(self, group_id: str, member_id: str, reason: str) -> Result:
        """Timer operation: remove a member whose session timed out."""
        group = self.group(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return Result([])
        log.info("share group %s: member %s fenced because %s", group_id, member_id, reason)
        return Result(self._fence_records(group, member))

    def _group_for_heartbeat(self, req: ShareHeartbeatRequest) -> ShareGroup:
        existing = self.shard.groups.get(req.group_id)
        if isinstance(existing, ShareGroup):
            return existing
        if existing is not None:
            raise HeartbeatError(GROUP_ID_NOT_FOUND,
                                 f"Group {req.group_id} is not a share group.")
        if req.member_epoch != JOIN_EPOCH:
            raise HeartbeatError(GROUP_ID_NOT_FOUND, f"Share group {req.group_id} not found.")
        return ShareGroup(req.group_id)

    def _member_for_heartbeat(self, group: ShareGroup, req: ShareHeartbeatRequest
                              ) -> ShareGroupMember:
        member = group.members.get(req.member_id)
        if member is None:
            max_size = self.shard.config.share_max_size
            if len(group.members) >= max_size:
                raise HeartbeatError(GROUP_MAX_SIZE_REACHED, f"The share group has reached "
                                     f"its maximum capacity of {max_size} members.")
            if req.member_epoch != JOIN_EPOCH:
                raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a "
                                     f"member of group {group.group_id}.")
            log.info("share group %s: member %s joins", group.group_id, req.member_id)
            return ShareGroupMember(req.member_id)
        epoch = req.member_epoch
        if epoch > member.member_epoch:
            raise HeartbeatError(FENCED_MEMBER_EPOCH, f"The share group member has a greater "
                                 f"member epoch ({epoch}) than the one known by the group "
                                 f"coordinator ({member.member_epoch}). The member must "
                                 f"abandon all its partitions and rejoin.")
        if JOIN_EPOCH < epoch < member.member_epoch \
                and epoch != member.previous_member_epoch:
            raise HeartbeatError(FENCED_MEMBER_EPOCH, f"The share group member has a smaller "
                                 f"member epoch ({epoch}) than the one known by the group "
                                 f"coordinator ({member.member_epoch}). The member must "
                                 f"abandon all its partitions and rejoin.")
        return member

    def _heartbeat(self, req: ShareHeartbeatRequest, now_ms: int) -> Result:
        image = self.shard.image()
        records: list[CoordinatorRecord] = []
        group = self._group_for_heartbeat(req)
        g = group.group_id
        member = self._member_for_heartbeat(group, req)
        is_new = member.member_id not in group.members
        if is_new and not group.members and g not in self._initial_due:
            interval = self.assignment_interval_ms(g)
            if interval > 0:  # the first member of an empty group: wait for the others
                self._schedule_initial(g, now_ms, interval)

        # 1. The member's changes (record 10) and the group epoch (record 11).
        names = (tuple(sorted(set(req.subscribed_topic_names)))
                 if req.subscribed_topic_names is not None else member.subscribed_topic_names)
        updated = replace(member, rack_id=req.rack_id if req.rack_id is not None
                          else member.rack_id, subscribed_topic_names=names,
                          client_id=req.client_id, client_host=req.client_host)
        if is_new or updated.metadata() != member.metadata():
            records.append(member_metadata_record(g, updated))
        everyone = [m for mid, m in group.members.items() if mid != member.member_id]
        everyone.append(updated)
        new_hash = metadata_hash(group.subscribed_topics(everyone), image)
        bump = group.group_epoch == 0 or names != member.subscribed_topic_names \
            or new_hash != group.metadata_hash
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append(group_epoch_record(g, group_epoch, new_hash))

        # 2. The target assignment (records 13, 15, then 12).
        targets = dict(group.target)
        if group_epoch > group.assignment_epoch:
            targets = self._assign(group, everyone, image, records, group_epoch,
                                   empty=g in self._initial_due)
            target_epoch = group_epoch
        else:
            target_epoch = group.assignment_epoch

        # 3. The member takes its target at the target epoch (record 14).
        target = targets.get(member.member_id, EMPTY)
        current = updated
        if updated.member_epoch != target_epoch or dict(updated.assigned) != dict(target):
            current = replace(updated, member_epoch=target_epoch,
                              previous_member_epoch=updated.member_epoch, assigned=target)
        if is_new or current.member_epoch != updated.member_epoch \
                or dict(current.assigned) != dict(updated.assigned):
            records.append(current_assignment_record(g, current))

        # 4. The session timer (only now: the heartbeat can no longer fail).
        self._arm_session(g, member.member_id)
        changed = dict(current.assigned) != dict(member.assigned)
        interval = self.heartbeat_interval_ms(g)
        due = self._initial_due.get(g)
        if due is not None:  # come back for the first assignment when it is made
            interval = max(100, min(interval, due - now_ms + 50))  # 100: a late timer
        return Result(records, ShareHeartbeatResponse(
            member_id=member.member_id, member_epoch=current.member_epoch,
            heartbeat_interval_ms=interval,
            assignment=current.assigned if req.member_epoch == JOIN_EPOCH or changed
            else None))

    def _schedule_initial(self, group_id: str, now_ms: int, delay_ms: int) -> None:
        self._initial_due[group_id] = now_ms + delay_ms
        self.shard.timer.schedule(f"share-initial-assignment\0{group_id}", delay_ms,
                                  lambda now: self._initial_assignment(group_id))

    def _initial_assignment(self, group_id: str) -> Result:
        """Timer operation: the first assignment of the members that joined an empty
        group meanwhile (a new group epoch, so they take it at their next heartbeat)."""
        self._initial_due.pop(group_id, None)
        group = self.group(group_id)
        if group is None or not group.members:
            return Result([])
        image = self.shard.image()
        records: list[CoordinatorRecord] = []
        epoch = group.group_epoch + 1
        members = list(group.members.values())
        records.append(group_epoch_record(
            group_id, epoch, metadata_hash(group.subscribed_topics(members), image)))
        self._assign(group, members, image, records, epoch)
        log.info("share group %s: first assignment of %d members", group_id, len(members))
        return Result(records)

    def _assign(self, group: ShareGroup, members: Iterable[ShareGroupMember],
                image: MetadataImage, records: list[CoordinatorRecord],
                epoch: int, empty: bool = False) -> dict[str, Assignment]:
        """The target assignment at `epoch` (records 13, 15, 12); with `empty`, every
        member's target is empty (the first assignment of an empty group is pending)."""
        g = group.group_id
        if empty:
            targets: dict[str, Assignment] = {m.member_id: EMPTY for m in members}
            for mid in sorted(targets):
                if mid not in group.target or dict(group.target[mid]):
                    records.append(target_member_record(g, mid, EMPTY))
            records.append(target_metadata_record(g, epoch))
            return targets
        subscriptions: dict[str, frozenset[uuid.UUID]] = {}
        counts: dict[uuid.UUID, int] = {}
        names: dict[uuid.UUID, str] = dict(group.topic_names)
        for m in members:
            ids = set()
            for name in m.subscribed_topic_names:
                topic = image.topic(name)
                # A topic whose share state is still being deleted (a deletion a crash
                # interrupted) is assigned once the deletion completes, so no member
                # reads the old state first (completion bumps the group epoch).
                if topic is not None and topic.topic_id not in group.deleting:
                    ids.add(topic.topic_id)
                    counts[topic.topic_id] = len(topic.partitions)
                    names[topic.topic_id] = name
            subscriptions[m.member_id] = frozenset(ids)
        computed = share_assignor.assign(subscriptions, counts, group.target)
        targets = {}
        for mid in sorted(computed):
            new_target = computed[mid]
            if mid not in group.target or dict(new_target) != dict(group.target[mid]):
                records.append(target_member_record(g, mid, new_target))
            targets[mid] = new_target
        handed: dict[uuid.UUID, frozenset[int]] = dict(group.initialized)
        for target in targets.values():
            for t, ps in target.items():
                handed[t] = handed.get(t, frozenset()) | ps
        if handed != group.initialized:
            records.append(state_partitions_record(g, handed, names, group.deleting))
        records.append(target_metadata_record(g, epoch))
        return targets

    # ---- timers --------------------------------------------------------------------
    def _arm_session(self, group_id: str, member_id: str) -> None:
        self.shard.timer.schedule(
            session_key(group_id, member_id), self.session_timeout_ms(group_id),
            lambda now: self.fence(group_id, member_id, "the member session expired"))

    # ---- ShareGroupDescribe --------------------------------------------------------
    def describe(self, group_ids: Iterable[str], include_operations: bool) -> list[dict[str, Any]]:
        out = []
        image = self.shard.image()
        for group_id in group_ids:
            existing = self.shard.groups.get(group_id)
            if not group_id:
                out.append(describe_error(group_id, INVALID_GROUP_ID, "Group id is empty."))
            elif existing is None:
                out.append(describe_error(group_id, GROUP_ID_NOT_FOUND,
                                          f"Group {group_id} not found."))
            elif not isinstance(existing, ShareGroup):
                out.append(describe_error(group_id, GROUP_ID_NOT_FOUND,
                                          f"Group {group_id} is not a share group."))
            else:
                out.append(existing.describe_share(image, include_operations))
        return out


def describe_error(group_id: str, code: int, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "group_id": group_id,
            "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
            "members": (), "authorized_operations": -2147483648}


def _validate(req: ShareHeartbeatRequest) -> None:
    def invalid(message: str | None) -> HeartbeatError:
        return HeartbeatError(INVALID_REQUEST, message)  # type: ignore[arg-type]

    if not req.member_id.strip():
        raise invalid(None)  # Kafka 4.3 answers an empty member id with no message
    if not req.group_id.strip():
        raise invalid("GroupId can't be empty.")
    if req.rack_id is not None and not req.rack_id.strip():
        raise invalid("RackId can't be empty.")
    for name, value in (("GroupId", req.group_id), ("MemberId", req.member_id),
                        ("RackId", req.rack_id), ("ClientId", req.client_id)):
        if value is not None and len(value.encode()) > MAX_STRING_BYTES:
            raise invalid(f"{name} is longer than {MAX_STRING_BYTES} bytes.")
    for topic in req.subscribed_topic_names or ():
        if len(topic.encode()) > MAX_STRING_BYTES:
            raise invalid(f"SubscribedTopicNames has a name longer than {MAX_STRING_BYTES} "
                          f"bytes.")
    if req.member_epoch == JOIN_EPOCH:
        if not req.subscribed_topic_names:
            raise invalid("SubscribedTopicNames must be set in first request.")
    elif req.member_epoch < LEAVE_EPOCH:
        raise invalid("MemberEpoch is invalid.")
