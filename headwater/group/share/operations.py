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
The steps a consumer group's heartbeat takes alike (string validation, the member epoch
check, fencing, the group epoch, target records, session timers, describe) are
`modern.operations.ModernGroupManager`'s.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ...coordinator.record_codec import CoordinatorRecord
from ...coordinator.runtime import Result
from .. import records as R
from ..modern.assignment import EMPTY, Assignment
from ..modern.operations import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    HeartbeatResponse,
    ModernGroupManager,
    ModernHeartbeatRequest,
    check_request_strings,
    invalid,
)
from . import assignor as share_assignor
from .group import (
    ShareGroup,
    ShareGroupMember,
    current_assignment_record,
    member_metadata_record,
    state_partitions_record,
    target_metadata_record,
)

if TYPE_CHECKING:
    from ...metadata.image import MetadataImage
    from ..shard import GroupShard


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest(ModernHeartbeatRequest):
    """ShareGroupHeartbeat v1 fields (None = unchanged) plus the request context: the
    fields every modern heartbeat has, no more."""


class ShareGroupManager(ModernGroupManager[ShareGroup, ShareHeartbeatRequest]):
    group_class = ShareGroup
    config_prefix = "share"

    def __init__(self, shard: GroupShard,
                 member_removed: Callable[[str, str], None] | None = None) -> None:
        super().__init__(shard)
        # Told (group id, member id) when a member leaves or is fenced (after load).
        self.member_removed = member_removed
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
    def replay_into(self, group: ShareGroup, record: CoordinatorRecord) -> None:
        """After load, a member's record 10 tombstone tells the listeners it is gone."""
        gone = (record.type_id == R.SHARE_GROUP_MEMBER_METADATA and record.value is None
                and record.key["member_id"] in group.members)
        group.replay(record)
        if gone and self._loaded and self.member_removed is not None:
            try:
                self.member_removed(group.group_id, record.key["member_id"])
            except Exception:
                self.log.exception("share member listener failed")

    def on_loaded(self, now_ms: int) -> None:
        """Members keep their epochs across a restart but must heartbeat in time; a
        group whose first assignment was still pending gets it now."""
        super().on_loaded(now_ms)
        for group in self.groups():
            if group.members and not any(group.target.get(m) for m in group.members) \
                    and any(m.subscribed_topic_names for m in group.members.values()):
                self._schedule_initial(group.group_id, now_ms, 0)

    def on_metadata_update(self, image: MetadataImage, now_ms: int) -> list[CoordinatorRecord]:
        """Topics created, deleted or grown: bump the epoch of groups whose subscribed
        topics changed; forget share-partitions of deleted topics (record 15)."""
        records: list[CoordinatorRecord] = []
        for group in sorted(self.groups(), key=lambda g: g.group_id):
            if group.members:
                self.next_group_epoch(group, False, group.subscribed_topics(), image, records)
            live = {t: ps for t, ps in group.initialized.items()
                    if image.topic_by_id(t) is not None}
            deleting = {t: n for t, n in group.deleting.items()
                        if image.topic_by_id(t) is not None}
            if live != group.initialized or deleting != group.deleting:
                records.append(state_partitions_record(group.group_id, live,
                                                       group.topic_names, deleting))
        return records

    # ---- ShareGroupHeartbeat -------------------------------------------------------
    def validate(self, req: ShareHeartbeatRequest) -> None:
        if not req.member_id.strip():
            raise invalid(None)  # Kafka 4.3 answers an empty member id with no message
        check_request_strings(
            req.group_id, (("RackId", req.rack_id),),
            (("GroupId", req.group_id), ("MemberId", req.member_id), ("RackId", req.rack_id),
             ("ClientId", req.client_id)),
            req.subscribed_topic_names)
        if req.member_epoch == JOIN_EPOCH:
            if not req.subscribed_topic_names:
                raise invalid("SubscribedTopicNames must be set in first request.")
        elif req.member_epoch < LEAVE_EPOCH:
            raise invalid("MemberEpoch is invalid.")

    def leave(self, req: ShareHeartbeatRequest) -> Result:
        group = self.existing_group(req.group_id)
        member = group.members.get(req.member_id)
        if member is None:
            raise self.unknown_member(req.member_id, req.group_id)
        return self.leave_member(group, member, LEAVE_EPOCH)

    def _group_for_heartbeat(self, req: ShareHeartbeatRequest) -> ShareGroup:
        existing = self.shard.groups.get(req.group_id)
        if isinstance(existing, ShareGroup):
            return existing
        if existing is not None or req.member_epoch != JOIN_EPOCH:
            # Raises: not a share group, or not found.
            return self.existing_group(req.group_id, f"Share group {req.group_id} not found.")
        return ShareGroup(req.group_id)

    def _member_for_heartbeat(self, group: ShareGroup, req: ShareHeartbeatRequest
                              ) -> ShareGroupMember:
        member = group.members.get(req.member_id)
        if member is None:
            max_size = self.shard.config.share_max_size
            if len(group.members) >= max_size:
                raise self.full(max_size)
            if req.member_epoch != JOIN_EPOCH:
                raise self.unknown_member(req.member_id, group.group_id)
            self.log.info("share group %s: member %s joins", group.group_id, req.member_id)
            return ShareGroupMember(req.member_id)
        if req.member_epoch != JOIN_EPOCH:
            # Its previous epoch is allowed (a lost response): nothing to revoke.
            self.check_member_epoch(member, req.member_epoch, previous_allowed=True)
        return member

    def join_or_heartbeat(self, req: ShareHeartbeatRequest, now_ms: int) -> Result:
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
        group_epoch = self.next_group_epoch(
            group, group.group_epoch == 0 or names != member.subscribed_topic_names,
            group.subscribed_topics(everyone), image, records)

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
        self.arm_session(g, member.member_id)
        changed = dict(current.assigned) != dict(member.assigned)
        interval = self.heartbeat_interval_ms(g)
        due = self._initial_due.get(g)
        if due is not None:  # come back for the first assignment when it is made
            interval = max(100, min(interval, due - now_ms + 50))  # 100: a late timer
        return Result(records, HeartbeatResponse(
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
        members = list(group.members.values())
        epoch = self.next_group_epoch(group, True, group.subscribed_topics(members), image,
                                      records)
        self._assign(group, members, image, records, epoch)
        self.log.info("share group %s: first assignment of %d members", group_id,
                      len(members))
        return Result(records)

    def _assign(self, group: ShareGroup, members: Iterable[ShareGroupMember],
                image: MetadataImage, records: list[CoordinatorRecord],
                epoch: int, empty: bool = False) -> dict[str, Assignment]:
        """The target assignment at `epoch` (records 13, 15, 12); with `empty`, every
        member's target is empty (the first assignment of an empty group is pending)."""
        g = group.group_id
        if empty:
            targets: dict[str, Assignment] = {m.member_id: EMPTY for m in members}
            self.target_records(group, group.target, targets, records)
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
        targets = share_assignor.assign(subscriptions, counts, group.target)
        self.target_records(group, group.target, targets, records)
        handed: dict[uuid.UUID, frozenset[int]] = dict(group.initialized)
        for target in targets.values():
            for t, ps in target.items():
                handed[t] = handed.get(t, frozenset()) | ps
        if handed != group.initialized:
            records.append(state_partitions_record(g, handed, names, group.deleting))
        records.append(target_metadata_record(g, epoch))
        return targets

    # ---- ShareGroupDescribe --------------------------------------------------------
    def describe_group(self, group: ShareGroup, image: MetadataImage,
                       include_operations: bool) -> dict[str, Any]:
        return group.describe_share(image, include_operations)
