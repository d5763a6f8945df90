"""A KIP-1071 streams group as replaying its records builds it.

Theory of operation
-------------------
A streams group is the sum of six record types of `__consumer_offsets` (Kafka 4.4):

====  ========================================  =======================================
type  record (key)                              what replay does
====  ========================================  =======================================
17    StreamsGroupMetadata (group)              group epoch, metadata hash, validated
                                                topology epoch; tombstone deletes it
19    StreamsGroupMemberMetadata (group, m)     member's process, client, endpoint,
                                                tags, topology epoch; tombstone removes
20    StreamsGroupTargetAssignmentMetadata      the target assignment epoch
21    StreamsGroupTargetAssignmentMember (m)    the member's target tasks
22    StreamsGroupCurrentMemberAssignment (m)   member epoch, state, assigned tasks and
                                                tasks pending revocation
23    StreamsGroupTopology (group)              the topology
====  ========================================  =======================================

`StreamsGroup` holds that state and answers questions about it; decisions live in
operations.py. Its `configured` topology (configured.py: tasks per subtopology, missing
internal topics) is derived from the topology and the metadata image, recomputed when
either changes, never stored. States (Kafka's StreamsGroup.StreamsGroupState): Empty (no
members), NotReady (no topology, or one the metadata cannot serve yet), Assigning (the
group epoch is ahead of the target's), Reconciling (a member is not yet at the target),
Stable; a deleted group is Dead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as E

from ...coordinator.record_codec import CoordinatorRecord
from .. import records as R
from ..modern.group import INT32_MIN, metadata_hash
from ..modern.member_epochs import MemberEpochChecks
from .configured import ConfiguredTopology, configure
from .tasks import EMPTY_TASKS, TasksTuple
from .topology import TopicInfo, Topology

if TYPE_CHECKING:
    from ...metadata.image import MetadataImage

# DELETE, DESCRIBE, READ (Kafka's group authorized operations without ACLs).
STREAMS_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)

# MemberState values of record 22 (Kafka's streams MemberState; not the consumer's).
STABLE = 1
UNREVOKED_TASKS = 2
UNRELEASED_TASKS = 3
UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class StreamsGroupMember:
    """Record 19 (who the member is) plus record 22 (where its reconciliation is)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: int = STABLE
    assigned: TasksTuple = field(default_factory=TasksTuple)
    pending_revocation: TasksTuple = field(default_factory=TasksTuple)
    # (subtopology, partition) -> the member epoch its active task was assigned at, for
    # the active tasks assigned or pending revocation: a commit with an older member
    # epoch is still good for a task held since then (Kafka 4.4).
    active_epochs: Mapping[tuple[str, int], int] = field(default_factory=dict)

    def metadata(self) -> dict[str, Any]:
        """Record 19's value; a heartbeat that changes it writes it."""
        endpoint = ([] if self.user_endpoint is None
                    else [{"host": self.user_endpoint[0], "port": self.user_endpoint[1]}])
        return {"instance_id": self.instance_id, "rack_id": self.rack_id,
                "client_id": self.client_id, "client_host": self.client_host,
                "rebalance_timeout_ms": self.rebalance_timeout_ms,
                "topology_epoch": self.topology_epoch, "process_id": self.process_id,
                "user_endpoint": endpoint,
                "client_tags": [{"key": k, "value": v} for k, v in self.client_tags]}

    def current_assignment(self) -> dict[str, Any]:
        """Record 22's value."""
        value = {"member_epoch": self.member_epoch,
                 "previous_member_epoch": self.previous_member_epoch, "state": self.state,
                 **self.assigned.record_fields(),
                 **self.pending_revocation.record_fields("_pending_revocation")}
        for key in ("active_tasks", "active_tasks_pending_revocation"):
            for entry in value[key]:
                entry["assignment_epochs"] = [
                    self.active_epochs.get((entry["subtopology_id"], p), self.member_epoch)
                    for p in entry["partitions"]]
        return value

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state == STABLE and self.member_epoch == epoch


# ---- records -------------------------------------------------------------------------

def _key(group_id: str, member_id: str | None = None) -> dict[str, str]:
    return {"group_id": group_id} if member_id is None else {"group_id": group_id,
                                                             "member_id": member_id}


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int,
                       validated_topology_epoch: int,
                       configs: Mapping[str, str]) -> CoordinatorRecord:
    return R.record(R.STREAMS_GROUP_METADATA, _key(group_id), {
        "epoch": epoch, "metadata_hash": metadata_hash,
        "validated_topology_epoch": validated_topology_epoch,
        "last_assignment_configs": [{"key": k, "value": v} for k, v in sorted(configs.items())]})


def member_metadata_record(group_id: str, member: StreamsGroupMember) -> CoordinatorRecord:
    return R.record(R.STREAMS_GROUP_MEMBER_METADATA, _key(group_id, member.member_id),
                    member.metadata())


def target_metadata_record(group_id: str, epoch: int, timestamp_ms: int) -> CoordinatorRecord:
    """Record 20: the target's epoch and when the assignor ran (0: it did not)."""
    return R.record(R.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, _key(group_id),
                    {"assignment_epoch": epoch, "assignment_timestamp": timestamp_ms})


def target_member_record(group_id: str, member_id: str, target: TasksTuple
                         ) -> CoordinatorRecord:
    return R.record(R.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, _key(group_id, member_id),
                    target.record_fields())


def current_assignment_record(group_id: str, member: StreamsGroupMember) -> CoordinatorRecord:
    return R.record(R.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                    _key(group_id, member.member_id), member.current_assignment())


def topology_record(group_id: str, topology: Topology) -> CoordinatorRecord:
    return R.record(R.STREAMS_GROUP_TOPOLOGY, _key(group_id), topology.record_value())


def tombstone(type_id: int, group_id: str, member_id: str | None = None) -> CoordinatorRecord:
    return R.record(type_id, _key(group_id, member_id), None)


def member_tombstones(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    """A member's records, deleted in Kafka's order: current assignment, target
    member, member metadata."""
    return [tombstone(R.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member_id),
            tombstone(R.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
            tombstone(R.STREAMS_GROUP_MEMBER_METADATA, group_id, member_id)]


# ---- the group -----------------------------------------------------------------------

class StreamsGroup(MemberEpochChecks):
    """Implements `base.Group`."""

    group_type = "streams"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # A new group is at epoch 1 with a target at epoch 1 (Kafka 4.4's initial target
        # metadata): its first member, answered before any assignment, gets epoch 1.
        self.group_epoch = 1
        self.metadata_hash = 0
        self.validated_topology_epoch = -1
        self.last_assignment_configs: dict[str, str] = {}
        self.assignment_epoch = 1
        self.assignment_timestamp = 0
        self.members: dict[str, StreamsGroupMember] = {}
        self.target: dict[str, TasksTuple] = {}
        self.topology: Topology | None = None
        # Derived (configured.py), never replayed: (topology epoch, hash) it was made for.
        self._configured: tuple[tuple[int, int], ConfiguredTopology] | None = None
        # Not persisted (as in Kafka): a member asked the whole application to stop.
        self.shutdown_requested_by: str | None = None

    # ---- replay --------------------------------------------------------------------
    def replay(self, record: CoordinatorRecord) -> None:
        """One of the group's records (not the group metadata tombstone, which removes
        the group: the manager's)."""
        t, value, key = record.type_id, record.value, record.key
        if t == R.STREAMS_GROUP_METADATA and value is not None:
            self.group_epoch = value["epoch"]
            self.metadata_hash = value["metadata_hash"]
            self.validated_topology_epoch = value["validated_topology_epoch"]
            self.last_assignment_configs = {c["key"]: c["value"]
                                            for c in value["last_assignment_configs"]}
        elif t == R.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = -1 if value is None else value["assignment_epoch"]
            self.assignment_timestamp = 0 if value is None else value["assignment_timestamp"]
        elif t == R.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.target.pop(key["member_id"], None)
            else:
                self.target[key["member_id"]] = TasksTuple.from_record(value)
        elif t == R.STREAMS_GROUP_MEMBER_METADATA:
            self._replay_member(key["member_id"], value)
        elif t == R.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT:
            self._replay_assignment(key["member_id"], value)
        elif t == R.STREAMS_GROUP_TOPOLOGY:
            self.topology = None if value is None else Topology.from_record(value)
            self._configured = None

    def _replay_member(self, member_id: str, value: dict[str, Any] | None) -> None:
        if value is None:
            self.members.pop(member_id, None)
            return
        endpoint = value.get("user_endpoint") or []
        base = self.members.get(member_id) or StreamsGroupMember(member_id)
        self.members[member_id] = replace(
            base, instance_id=value["instance_id"], rack_id=value["rack_id"],
            client_id=value["client_id"], client_host=value["client_host"],
            rebalance_timeout_ms=value["rebalance_timeout_ms"],
            topology_epoch=value["topology_epoch"], process_id=value["process_id"],
            user_endpoint=(endpoint[0]["host"], endpoint[0]["port"]) if endpoint else None,
            client_tags=tuple((c["key"], c["value"]) for c in value["client_tags"]))

    def _replay_assignment(self, member_id: str, value: dict[str, Any] | None) -> None:
        if value is None:
            if member_id in self.members:
                self.members[member_id] = replace(
                    self.members[member_id], member_epoch=-1, previous_member_epoch=-1,
                    assigned=EMPTY_TASKS, pending_revocation=EMPTY_TASKS, active_epochs={})
            return
        base = self.members.get(member_id) or StreamsGroupMember(member_id)
        epoch = value["member_epoch"]
        epochs: dict[tuple[str, int], int] = {}
        for key in ("active_tasks", "active_tasks_pending_revocation"):
            for entry in value[key]:
                parts, given = entry["partitions"], entry.get("assignment_epochs") or []
                for i, p in enumerate(parts):
                    # Kafka: no (or a short) epochs list means the member epoch for all.
                    epochs[(entry["subtopology_id"], p)] = (
                        given[i] if len(given) == len(parts) else epoch)
        state = value["state"]
        self.members[member_id] = replace(
            base, member_epoch=epoch,
            previous_member_epoch=value["previous_member_epoch"],
            state=state if state in (STABLE, UNREVOKED_TASKS, UNRELEASED_TASKS) else UNKNOWN,
            assigned=TasksTuple.from_record(value),
            pending_revocation=TasksTuple.from_record(value, "_pending_revocation"),
            active_epochs=epochs)

    # ---- derived -------------------------------------------------------------------
    def configured(self, image: MetadataImage) -> ConfiguredTopology | None:
        """The topology configured against `image` (cached per topology epoch and
        metadata hash); None without a topology."""
        if self.topology is None:
            return None
        key = (self.topology.epoch, topics_hash(self.topology, image))
        if self._configured is None or self._configured[0] != key:
            self._configured = (key, configure(self.topology, image))
        return self._configured[1]

    def state_name(self) -> str:
        """From persisted state alone: NotReady until a heartbeat found the topology's
        topics ready and stored its epoch as validated (record 17)."""
        if not self.members:
            return "Empty"
        if self.topology is None or self.validated_topology_epoch != self.topology.epoch:
            return "NotReady"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def static_member(self, instance_id: str | None) -> StreamsGroupMember | None:
        if instance_id is None:
            return None
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    # ---- the Group protocol (offsets, admin APIs) ----------------------------------
    def protocol_type(self) -> str:
        return "streams"

    def is_empty(self) -> bool:
        return not self.members

    def empty_since_ms(self) -> int | None:
        return None

    def validate_offset_commit(self, member_id: str, instance_id: str | None,
                               generation_or_epoch: int, api_version: int,
                               transactional: bool = False) -> int:
        """Kafka 4.4's StreamsGroup.validateOffsetCommit; an older member epoch passes
        here and is judged per partition (`partition_commit_error`)."""
        if generation_or_epoch < 0 and not self.members:
            return E.none  # an admin / simple commit (e.g. the reset tool)
        if transactional and generation_or_epoch == -1 and not member_id \
                and instance_id is None:
            return E.none
        member = self.members.get(member_id)
        if member is None:
            return E.unknown_member_id
        if not transactional and api_version < 9:
            return E.unsupported_version  # member epochs need OffsetCommit v9+
        if generation_or_epoch > member.member_epoch:
            return E.stale_member_epoch
        return E.none

    def partition_commit_error(self, member_id: str, epoch: int, topic: str,
                               partition: int) -> int:
        """One partition of a commit whose group-level checks passed: with an epoch
        older than the member's, the partition's task must be the member's active task
        (assigned or being revoked) since that epoch or before (Kafka 4.4's per-task
        assignment epochs), else STALE_MEMBER_EPOCH."""
        member = self.members.get(member_id)
        if member is None or epoch >= member.member_epoch or epoch < 0:
            return E.none
        if self.topology is None:
            return E.stale_member_epoch
        for sub in self.topology.subtopologies:
            if topic in sub.source_topics or topic in {t.name for t in
                                                      sub.repartition_source_topics}:
                assigned_at = member.active_epochs.get((sub.subtopology_id, partition))
                if assigned_at is not None and epoch >= assigned_at:
                    return E.none
                return E.stale_member_epoch
        return E.stale_member_epoch

    def is_subscribed_to(self, topic: str) -> bool:
        if self.topology is None or not self.members:
            return False
        return topic in self.topology.source_topic_names() | self.topology.internal_topic_names()

    def tombstones(self) -> list[CoordinatorRecord]:
        """Records deleting the group, in Kafka's order: current assignments, target
        members, target metadata, member metadata, group metadata, topology last (replay
        removes the group at the group metadata tombstone; the topology's is then a no-op
        kept for compaction)."""
        g = self.group_id
        ids = sorted(self.members)
        return ([tombstone(R.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, g, m) for m in ids]
                + [tombstone(R.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, g, m)
                   for m in sorted(set(self.target) | set(ids))]
                + [tombstone(R.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, g)]
                + [tombstone(R.STREAMS_GROUP_MEMBER_METADATA, g, m) for m in ids]
                + [tombstone(R.STREAMS_GROUP_METADATA, g)]
                + [tombstone(R.STREAMS_GROUP_TOPOLOGY, g)])

    def describe(self) -> dict[str, Any]:
        """DescribeGroups (15) entry: Kafka answers a streams group as "not a classic
        group" (v6+; the handler turns it into Dead for older versions)."""
        return {"error_code": E.group_id_not_found,
                "error_message": f"Group {self.group_id} is not a classic group.",
                "group_id": self.group_id, "group_state": "Dead", "protocol_type": "",
                "protocol_data": "", "members": (), "authorized_operations": INT32_MIN}

    def describe_streams(self, image: MetadataImage, include_operations: bool
                         ) -> dict[str, Any]:
        """StreamsGroupDescribe (89) entry."""
        topology = None
        if self.topology is not None:
            # A ready topology is described as configured (Kafka 4.4): topics sorted, the
            # internal topics with their decided partition counts; else as declared.
            configured = self.configured(image)
            decided = configured.partitions if configured is not None and configured.ready \
                else None

            def infos(topics: tuple[TopicInfo, ...]) -> list[dict[str, Any]]:
                out = [t.to_dict() for t in topics]
                if decided is None:
                    return out
                for info in out:
                    info["partitions"] = decided.get(info["name"], info["partitions"])
                return sorted(out, key=lambda i: i["name"])

            def names(topics: tuple[str, ...]) -> list[str]:
                return list(topics) if decided is None else sorted(topics)

            topology = {"epoch": self.topology.epoch, "subtopologies": [
                {"subtopology_id": s.subtopology_id, "source_topics": names(s.source_topics),
                 "repartition_sink_topics": names(s.repartition_sink_topics),
                 "state_changelog_topics": infos(s.state_changelog_topics),
                 "repartition_source_topics": infos(s.repartition_source_topics)}
                for s in self.topology.subtopologies]}
        members = []
        for m in sorted(self.members.values(), key=lambda m: m.member_id):
            endpoint = (None if m.user_endpoint is None
                        else {"host": m.user_endpoint[0], "port": m.user_endpoint[1]})
            members.append({
                "member_id": m.member_id, "member_epoch": m.member_epoch,
                "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
                "client_host": m.client_host, "topology_epoch": m.topology_epoch,
                "process_id": m.process_id, "user_endpoint": endpoint,
                "client_tags": [{"key": k, "value": v} for k, v in m.client_tags],
                "task_offsets": [], "task_end_offsets": [],
                "assignment": m.assigned.describe(),
                "target_assignment": self.target.get(m.member_id, EMPTY_TASKS).describe(),
                "is_classic": False})
        return {"error_code": 0, "error_message": None, "group_id": self.group_id,
                "group_state": self.state_name(), "group_epoch": self.group_epoch,
                "assignment_epoch": self.assignment_epoch, "topology": topology,
                "members": members,
                "authorized_operations": STREAMS_GROUP_OPERATIONS if include_operations
                else INT32_MIN}

    def snapshot(self) -> tuple[Any, ...]:
        """Everything replay builds, for comparing a live group with a replayed one."""
        return (self.group_id, self.group_epoch, self.metadata_hash,
                self.validated_topology_epoch, dict(sorted(self.last_assignment_configs.items())),
                self.assignment_epoch, self.assignment_timestamp,
                dict(sorted(self.members.items())),
                dict(sorted(self.target.items())), self.topology)


def topics_hash(topology: Topology, image: MetadataImage) -> int:
    """The metadata hash of a streams group: the topology's source and internal topics
    that exist (name, id, partitions), as consumer groups hash their subscriptions."""
    return metadata_hash(topology.source_topic_names() | topology.internal_topic_names(), image)
