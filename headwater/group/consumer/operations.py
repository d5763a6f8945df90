"""KIP-848 consumer groups: the ConsumerGroupHeartbeat operation and the group's timers.

Theory of operation
-------------------
Every change is an operation returning records (coordinator.runtime); `replay` is the
only place state changes. A heartbeat, in order (Kafka's GroupMetadataManager):

1. validate the request (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR) - nothing written;
2. leave (epoch -1: tombstones 8, 7, 5 + a new group epoch; epoch -2: a static member
   keeps its assignment at epoch -2 and may come back with a new member id);
3. find or create the group (only epoch 0 creates; an Empty classic group - e.g. one
   holding only committed offsets - is converted) and the member (epoch 0 joins or
   re-joins; a static member replaces its departed instance; otherwise the epoch is
   checked: FENCED_MEMBER_EPOCH unless it equals the member's epoch, or its previous
   epoch with owned partitions a subset of the assigned ones - a lost response);
4. apply the member's changes (record 5); resolve a new regex (record 16); bump the
   group epoch (record 3) when the assignor's input changed: new group, subscribed
   names, regex topics, or the metadata hash of the subscribed topics;
5. when the group epoch is ahead of the target epoch, run the assignor: records 7 for
   the members whose target changed, then record 6;
6. reconcile the member (reconciliation.step) and write record 8 if it changed;
7. re-arm the session timer, and the rebalance timer while it must revoke.

Errors raise `HeartbeatError` before anything is returned, so a failed heartbeat
writes no records and arms no timers. Session expiry and rebalance-timeout expiry are
timer operations that fence the member exactly like a leave. Metadata changes bump
the epoch of groups whose subscribed topics (or regex matches) changed. The steps a
share group's heartbeat takes alike (string validation, the member epoch check,
fencing, the group epoch, target records, session timers, describe) are
`modern.operations.ModernGroupManager`'s.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import re2
from kio.schema.errors import ErrorCode as E

from ...coordinator.record_codec import CoordinatorRecord
from ...coordinator.runtime import Result
from .. import records as R
from ..modern.assignment import EMPTY, Assignment, freeze
from ..modern.group import CONSUMER_RECORDS, ModernGroupMember
from ..modern.operations import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    HeartbeatError,
    HeartbeatResponse,
    ModernGroupManager,
    ModernHeartbeatRequest,
    check_request_strings,
    invalid,
)
from ..modern.operations import session_key as modern_session_key
from .assignors import ASSIGNORS, MemberSpec, TopicSpec
from .group import (
    ConsumerGroup,
    ConsumerGroupMember,
    ResolvedRegex,
    current_assignment_record,
    member_metadata_record,
    regex_record,
    regex_tombstone,
    target_member_record,
    target_metadata_record,
)
from .reconciliation import CurrentAssignment, MemberState, MustRejoin, step

if TYPE_CHECKING:
    from ...metadata.image import MetadataImage

STATIC_LEAVE_EPOCH = -2


@dataclass(frozen=True, slots=True)
class HeartbeatRequest(ModernHeartbeatRequest):
    """ConsumerGroupHeartbeat fields (None = unchanged) plus the request context."""

    instance_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    api_version: int = 1


def session_key(group_id: str, member_id: str) -> str:
    return modern_session_key("consumer", group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> str:
    return f"consumer-rebalance\0{group_id}\0{member_id}"


def new_member_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def compile_regex(regex: str) -> Any:
    """Compile a subscription regex with RE2 (linear time, like Kafka's RE2/J, so a
    hostile pattern cannot stall the broker; full match); raise HeartbeatError."""
    try:
        return re2.compile(regex)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode(errors="replace")
        raise HeartbeatError(E.invalid_regular_expression,
                             f"SubscribedTopicRegex `{regex}` is not a valid regular "
                             f"expression: {reason}.") from None


def resolve_regex(pattern: Any, image: MetadataImage) -> frozenset[str]:
    """Topic names the regex fully matches, internal topics included, as Kafka 4.4
    resolves them (franz-go's Test848RegexBrokerResolves subscribes to
    `__consumer_offsets` by regex and is assigned it; the metadata log is no topic of
    the image)."""
    return frozenset(name for name in image.topics_by_name if pattern.fullmatch(name))


class ConsumerGroupManager(ModernGroupManager[ConsumerGroup, HeartbeatRequest]):
    group_class = ConsumerGroup
    config_prefix = "consumer"
    leave_epochs = (LEAVE_EPOCH, STATIC_LEAVE_EPOCH)

    @property
    def default_assignor(self) -> str:
        assignor: str = self.shard.config.consumer_assignors[0]
        return assignor

    # ---- replay --------------------------------------------------------------------
    def replay_into(self, group: ConsumerGroup, record: CoordinatorRecord) -> None:
        if record.type_id == R.CONSUMER_GROUP_METADATA and self._loaded \
                and record.value is not None and record.value["epoch"] > group.group_epoch:
            # A group-epoch bump is a rebalance (metrics only, not state).
            self.shard.rebalances["consumer"] = self.shard.rebalances.get("consumer", 0) + 1
        group.replay(record)

    def on_loaded(self, now_ms: int) -> None:
        """Members keep their epochs across a restart but must heartbeat in time, and
        revoke in time."""
        super().on_loaded(now_ms)
        for group in self.groups():
            for member in group.members.values():
                if member.current.state == MemberState.UNREVOKED_PARTITIONS:
                    self._arm_rebalance(group.group_id, member)

    def on_metadata_update(self, image: MetadataImage, now_ms: int) -> list[CoordinatorRecord]:
        """New/deleted/grown topics: re-resolve regexes, bump epochs whose input changed."""
        records: list[CoordinatorRecord] = []
        for group in sorted(self.groups(), key=lambda g: g.group_id):
            if not group.members:
                continue
            regexes = dict(group.resolved_regexes)
            changed = False
            for regex in sorted(regexes):
                try:
                    pattern = compile_regex(regex)
                except HeartbeatError:
                    continue
                topics = resolve_regex(pattern, image)
                if topics != regexes[regex].topics:
                    regexes[regex] = ResolvedRegex(topics, image.offset, now_ms)
                    records.append(regex_record(group.group_id, regex, regexes[regex]))
                    changed = True
            topics_now: set[str] = set()
            for m in group.members.values():
                topics_now |= group.member_topics(m, regexes)
            self.next_group_epoch(group, changed, topics_now, image, records)
        return records

    # ---- ConsumerGroupHeartbeat ----------------------------------------------------
    def validate(self, req: HeartbeatRequest) -> None:
        if req.api_version >= 1 or req.member_epoch > 0 or req.member_epoch == LEAVE_EPOCH:
            if not req.member_id.strip():
                raise invalid("MemberId can't be empty.")
        check_request_strings(
            req.group_id, (("InstanceId", req.instance_id), ("RackId", req.rack_id)),
            (("GroupId", req.group_id), ("MemberId", req.member_id),
             ("InstanceId", req.instance_id), ("RackId", req.rack_id),
             ("SubscribedTopicRegex", req.subscribed_topic_regex),
             ("ServerAssignor", req.server_assignor), ("ClientId", req.client_id)),
            req.subscribed_topic_names)
        if req.member_epoch == JOIN_EPOCH:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or any(req.owned.values()):
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be "
                              "non-null when (re-)joining.")
        elif req.member_epoch == STATIC_LEAVE_EPOCH:
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif req.member_epoch < STATIC_LEAVE_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None \
                and req.server_assignor not in self.shard.config.consumer_assignors:
            raise HeartbeatError(
                E.unsupported_assignor,
                f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.shard.config.consumer_assignors)}.")

    def existing_group(self, group_id: str, not_found: str | None = None) -> ConsumerGroup:
        return super().existing_group(group_id, not_found
                                      or f"Consumer group {group_id} not found.")

    # ---- leave ---------------------------------------------------------------------
    def leave(self, req: HeartbeatRequest) -> Result:
        group = self.existing_group(req.group_id)
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise self.unknown_member(req.member_id, req.group_id)
        else:
            member = group.static_member(req.instance_id)
            if member is None:
                raise HeartbeatError(E.unknown_member_id,
                                     f"Instance id {req.instance_id} is unknown.")
            if member.member_id != req.member_id:
                raise HeartbeatError(
                    E.fenced_instance_id, f"Static member {req.member_id} with instance id "
                    f"{req.instance_id} was fenced by member {member.member_id}.")
            if req.member_epoch == STATIC_LEAVE_EPOCH:
                leaving = CurrentAssignment(STATIC_LEAVE_EPOCH,
                                            member.current.previous_member_epoch,
                                            member.current.state, member.current.assigned,
                                            EMPTY)
                self.shard.timer.cancel(rebalance_key(group.group_id, member.member_id))
                return Result([current_assignment_record(group.group_id, member.member_id,
                                                         leaving)],
                              HeartbeatResponse(member_id=member.member_id,
                                                member_epoch=STATIC_LEAVE_EPOCH))
        return self.leave_member(group, member, req.member_epoch)

    def departure_records(self, group: ConsumerGroup, member: ModernGroupMember
                          ) -> list[CoordinatorRecord]:
        """The member's regex goes with its last user."""
        assert isinstance(member, ConsumerGroupMember)
        regex = member.subscribed_topic_regex
        if regex and group.regex_users(regex) == {member.member_id}:
            return [regex_tombstone(group.group_id, regex)]
        return []

    # ---- join / heartbeat ----------------------------------------------------------
    def _group_for_heartbeat(self, req: HeartbeatRequest,
                             records: list[CoordinatorRecord]) -> ConsumerGroup:
        existing = self.shard.groups.get(req.group_id)
        if isinstance(existing, ConsumerGroup):
            return existing
        if req.member_epoch != JOIN_EPOCH:
            return self.existing_group(req.group_id)  # raises: not found, or another kind
        if existing is not None:
            if existing.group_type != "classic" or not existing.is_empty():
                raise HeartbeatError(E.group_id_not_found,
                                     f"Group {req.group_id} is not a consumer group.")
            # An Empty classic group (e.g. only committed offsets): convert it.
            records.append(R.group_metadata_tombstone(req.group_id))
        return ConsumerGroup(req.group_id)

    def _member_for_heartbeat(self, group: ConsumerGroup, req: HeartbeatRequest,
                              member_id: str, records: list[CoordinatorRecord]
                              ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """(the member as it is now, the static member it replaces or None)."""
        joining = req.member_epoch == JOIN_EPOCH
        max_size = self.shard.config.consumer_max_size
        if req.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise self.unknown_member(member_id, group.group_id)
                if len(group.members) >= max_size:
                    raise self.full(max_size)
                return ConsumerGroupMember(member_id), None
            if not joining:
                self._check_epoch(member, req)
            return member, None
        static = group.static_member(req.instance_id)
        if joining:
            if static is None:
                member = group.members.get(member_id)
                if member is None and len(group.members) >= max_size:
                    raise self.full(max_size)
                return member or ConsumerGroupMember(member_id), None
            if static.member_id == member_id:
                return static, None  # re-join of the same incarnation
            if static.member_epoch != STATIC_LEAVE_EPOCH:
                raise HeartbeatError(
                    E.unreleased_instance_id, f"Static member {member_id} with instance id "
                    f"{req.instance_id} cannot join the group because the instance id is "
                    f"owned by {static.member_id} member.")
            # The departed instance comes back under a new member id: it inherits the
            # old member's subscription, target and assignment.
            replacement = replace(static, member_id=member_id, current=replace(
                static.current, member_epoch=0, previous_member_epoch=0))
            g = group.group_id
            records += CONSUMER_RECORDS.member_tombstones(g, static.member_id)
            records += [member_metadata_record(g, replacement),
                        target_member_record(g, member_id,
                                             group.target.get(static.member_id, EMPTY)),
                        current_assignment_record(g, member_id, replacement.current)]
            return replacement, static
        if static is None:
            raise HeartbeatError(E.unknown_member_id, f"Instance id {req.instance_id} is "
                                 f"unknown.")
        if static.member_id != member_id:
            raise HeartbeatError(E.fenced_instance_id, f"Static member {member_id} with "
                                 f"instance id {req.instance_id} was fenced by member "
                                 f"{static.member_id}.")
        self._check_epoch(static, req)
        return static, None

    def _check_epoch(self, member: ConsumerGroupMember, req: HeartbeatRequest) -> None:
        """Its previous epoch is allowed with owned partitions a subset of the assigned
        ones (the response was lost)."""
        self.check_member_epoch(member, req.member_epoch,
                                _is_subset(req.owned, member.current.assigned))

    def join_or_heartbeat(self, req: HeartbeatRequest, now_ms: int) -> Result:  # noqa: C901
        image = self.shard.image()
        records: list[CoordinatorRecord] = []
        group = self._group_for_heartbeat(req, records)
        g = group.group_id
        member_id = req.member_id or new_member_id()
        member, replaced = self._member_for_heartbeat(group, req, member_id, records)

        # 1. The member's changes (record 5).
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            server_assignor=(req.server_assignor if req.server_assignor is not None
                             else member.server_assignor),
            subscribed_topic_names=(tuple(sorted(set(req.subscribed_topic_names)))
                                    if req.subscribed_topic_names is not None
                                    else member.subscribed_topic_names),
            subscribed_topic_regex=((req.subscribed_topic_regex or None)
                                    if req.subscribed_topic_regex is not None
                                    else member.subscribed_topic_regex),
            client_id=req.client_id, client_host=req.client_host)
        is_new = member_id not in group.members and replaced is None
        if is_new or updated.metadata() != member.metadata():
            records.append(member_metadata_record(g, updated))
        bump = group.group_epoch == 0
        bump |= updated.subscribed_topic_names != member.subscribed_topic_names
        bump |= updated.server_assignor != member.server_assignor

        # 2. Regular expressions (record 16), resolved here against the image.
        others = [m for mid, m in group.members.items()
                  if mid != member.member_id and (replaced is None or mid != replaced.member_id)]
        regexes = dict(group.resolved_regexes)
        old_regex, new_regex = member.subscribed_topic_regex, updated.subscribed_topic_regex
        if old_regex != new_regex:
            if old_regex and not any(m.subscribed_topic_regex == old_regex for m in others):
                records.append(regex_tombstone(g, old_regex))
                regexes.pop(old_regex, None)
            if new_regex:
                if new_regex in regexes:
                    bump = True
                else:
                    if req.api_version < 1:
                        raise HeartbeatError(E.invalid_request,
                                             "SubscribedTopicRegex needs version 1.")
                    topics = resolve_regex(compile_regex(new_regex), image)
                    regexes[new_regex] = ResolvedRegex(topics, image.offset, now_ms)
                    records.append(regex_record(g, new_regex, regexes[new_regex]))
                    bump |= bool(topics)

        # 3. The group epoch (record 3).
        everyone = others + [updated]
        subscribed: set[str] = set()
        for m in everyone:
            subscribed |= group.member_topics(m, regexes)
        group_epoch = self.next_group_epoch(group, bump, subscribed, image, records)

        # 4. The target assignment (records 7, then 6).
        targets = {mid: a for mid, a in group.target.items()
                   if replaced is None or mid != replaced.member_id}
        if replaced is not None:
            targets[member_id] = group.target.get(replaced.member_id, EMPTY)
        if group_epoch > group.assignment_epoch:
            assignor = group.preferred_assignor(self.default_assignor, everyone)
            specs: dict[str, MemberSpec] = {}
            topic_specs: dict[uuid.UUID, TopicSpec] = {}
            for m in everyone:
                ids = set()
                for name in group.member_topics(m, regexes):
                    topic = image.topic(name)
                    if topic is not None:
                        ids.add(topic.topic_id)
                        topic_specs[topic.topic_id] = TopicSpec(name, len(topic.partitions))
                specs[m.member_id] = MemberSpec(frozenset(ids), targets.get(m.member_id, EMPTY),
                                                m.instance_id, m.rack_id)
            try:
                computed = ASSIGNORS[assignor](specs, topic_specs)
            except Exception as exc:  # an assignor bug must not kill the coordinator
                self.log.exception("group %s: assignor %s failed", g, assignor)
                raise HeartbeatError(E.unknown_server_error, f"Failed to compute a new target "
                                     f"assignment for epoch {group_epoch}: {exc}") from None
            new_targets = {mid: freeze(computed.get(mid, {})) for mid in specs}
            self.target_records(group, targets, new_targets, records)
            targets.update(new_targets)
            records.append(target_metadata_record(g, group_epoch))
            target_epoch = group_epoch
        else:
            target_epoch = group.assignment_epoch

        # 5. Reconcile the member (record 8).
        current = updated.current
        if not current.is_reconciled_to(target_epoch):
            subscribed_ids = frozenset(
                t.topic_id for t in (image.topic(n) for n in group.member_topics(updated, regexes))
                if t is not None)
            try:
                current = step(current, target_epoch, targets.get(member_id, EMPTY),
                               subscribed_ids, req.owned, group.owner_epoch)
            except MustRejoin as exc:
                raise HeartbeatError(E.fenced_member_epoch, str(exc)) from None
        changed = current != updated.current
        if changed or is_new:
            records.append(current_assignment_record(g, member_id, current))

        # 6. Timers (only now: the heartbeat can no longer fail).
        if replaced is not None:
            self.cancel_timers(g, replaced.member_id)
        self.arm_session(g, member_id)
        if changed:
            if current.state == MemberState.UNREVOKED_PARTITIONS:
                self._arm_rebalance(g, replace(updated, current=current))
            else:
                self.shard.timer.cancel(rebalance_key(g, member_id))

        full = req.member_epoch == JOIN_EPOCH or (
            req.rebalance_timeout_ms != -1 and req.owned is not None
            and (req.subscribed_topic_names is not None
                 or req.subscribed_topic_regex is not None))
        assignment_changed = dict(current.assigned) != dict(member.current.assigned)
        return Result(records, HeartbeatResponse(
            member_id=member_id, member_epoch=current.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(g),
            assignment=current.assigned if full or assignment_changed else None))

    # ---- timers --------------------------------------------------------------------
    def _arm_rebalance(self, group_id: str, member: ConsumerGroupMember) -> None:
        epoch, timeout = member.member_epoch, max(member.rebalance_timeout_ms, 0)
        member_id = member.member_id
        self.shard.timer.schedule(
            rebalance_key(group_id, member_id), timeout,
            lambda now: self.fence(group_id, member_id, f"it failed to revoke partitions "
                                   f"within {timeout} ms", expected_epoch=epoch))

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        super().cancel_timers(group_id, member_id)
        self.shard.timer.cancel(rebalance_key(group_id, member_id))

    # ---- ConsumerGroupDescribe -----------------------------------------------------
    def describe_group(self, group: ConsumerGroup, image: MetadataImage,
                       include_operations: bool) -> dict[str, Any]:
        return group.describe_consumer(image, self.default_assignor, include_operations)


def _is_subset(owned: Assignment | None, assigned: Mapping[uuid.UUID, frozenset[int]]) -> bool:
    if owned is None:
        return False
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())
