"""Share-group administration on the group shard (sans-IO): the `__consumer_offsets`
side of KIP-932's table of administration operations.

Each admin operation is split at the share coordinator call, which the API layer
(`api/share_admin.py`) makes between two shard operations:

=======================  ===========================================================
operation                records, in order
=======================  ===========================================================
AlterShareGroupOffsets   record 15 naming the partitions as initialized (so the
                         group owns their state even if the broker dies next), then
                         InitializeShareGroupState with the state epoch + 1
DeleteShareGroupOffsets  record 15 moving the topics to `deleting_topics` (pending
                         deletion), DeleteShareGroupState tombstones, record 15
                         without them (completion)
DeleteGroups (share)     record 15 moving everything to deleting, tombstones, then
                         the group's tombstones (record 15, finally record 11)
=======================  ===========================================================

A crash after the pending-deletion record leaves `ShareGroup.deleting` non-empty on
load; `pending_deletions` names it and the API layer finishes the deletion (state
tombstones, then the completing record). A crash before it changed nothing. Only empty
share groups may be altered or deleted (NON_EMPTY_GROUP), as in Kafka.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as E

from ...coordinator.runtime import Result
from .group import ShareGroup, group_epoch_record, state_partitions_record

if TYPE_CHECKING:
    from ..shard import GroupShard

ZERO_UUID = uuid.UUID(int=0)


class AdminError(Exception):
    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(slots=True)
class TopicRow:
    """One topic of an alter/delete answer; `partitions`: index -> (code, message)."""

    name: str
    topic_id: uuid.UUID = ZERO_UUID
    error_code: int = E.none
    error_message: str | None = None
    partitions: dict[int, tuple[int, str | None]] = field(default_factory=dict)


@dataclass(slots=True)
class Plan:
    """What the API layer does next at the share coordinator."""

    rows: list[TopicRow] = field(default_factory=list)
    # (topic id, partition, start offset) to initialize (alter).
    initialize: list[tuple[uuid.UUID, int, int]] = field(default_factory=list)
    # topic id -> partitions whose state to delete (delete offsets / group).
    delete: dict[uuid.UUID, list[int]] = field(default_factory=dict)


def empty_share_group(shard: GroupShard, group_id: str, create: bool = False) -> ShareGroup:
    """The group, or AdminError with Kafka's code: alter and delete need an empty one.
    With `create`, an unknown id is a new share group (Kafka's
    `getOrMaybeCreateShareGroup(groupId, true)`); it exists once a record names it."""
    if not group_id:
        raise AdminError(E.invalid_group_id, None)
    group = shard.groups.get(group_id)
    if group is None and create:
        return ShareGroup(group_id)
    if group is None:
        raise AdminError(E.group_id_not_found, f"Group {group_id} not found.")
    if not isinstance(group, ShareGroup):
        raise AdminError(E.group_id_not_found, f"Group {group_id} is not a share group.")
    if group.members:
        raise AdminError(E.non_empty_group, "The group is not empty.")  # as Kafka answers
    return group


def _record(group: ShareGroup, initialized: dict[uuid.UUID, frozenset[int]],
            names: dict[uuid.UUID, str], deleting: dict[uuid.UUID, str]) -> list[Any]:
    if initialized == group.initialized and deleting == group.deleting:
        return []
    return [state_partitions_record(group.group_id, initialized, names, deleting)]


def alter_offsets(shard: GroupShard, group_id: str,
                  topics: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> Result:
    """AlterShareGroupOffsets, step 1: validate and record the partitions as the
    group's (record 15). Response: `Plan` (or AdminError raised, nothing written).
    A group id nobody used becomes an empty share group when some partition is
    initialized (record 15 creates it on replay, as a first heartbeat's records do);
    with every partition refused nothing is written and no group appears, as in Kafka."""
    group = empty_share_group(shard, group_id, create=True)
    image = shard.image()
    plan = Plan()
    initialized = dict(group.initialized)
    names = dict(group.topic_names)
    deleting = dict(group.deleting)
    for name, partitions in topics:
        topic = image.topic(name)
        row = TopicRow(name, topic.topic_id if topic is not None else ZERO_UUID)
        plan.rows.append(row)
        for index, offset in partitions:
            if topic is None or not 0 <= index < len(topic.partitions):
                row.partitions[index] = (E.unknown_topic_or_partition,
                                         "This server does not host this topic-partition.")
            elif offset < 0:
                row.partitions[index] = (E.invalid_request, f"Invalid start offset {offset}.")
            else:
                row.partitions[index] = (E.none, None)
                plan.initialize.append((topic.topic_id, index, offset))
                initialized[topic.topic_id] = \
                    initialized.get(topic.topic_id, frozenset()) | {index}
                names[topic.topic_id] = name
                deleting.pop(topic.topic_id, None)
    return Result(_record(group, initialized, names, deleting), plan)


def delete_offsets(shard: GroupShard, group_id: str, topic_names: Iterable[str]) -> Result:
    """DeleteShareGroupOffsets, step 1: the pending-deletion record 15 (Kafka's
    `sharePartitionsEligibleForOffsetDeletion`): a topic with state moves from
    initialized to deleting; one already deleting is deleted again, every partition."""
    group = empty_share_group(shard, group_id)
    image = shard.image()
    plan = Plan()
    initialized = dict(group.initialized)
    deleting = dict(group.deleting)
    for name in topic_names:
        topic = image.topic(name)
        if topic is None:
            plan.rows.append(TopicRow(name, ZERO_UUID, E.unknown_topic_or_partition,
                                      "This server does not host this topic-partition."))
            continue
        plan.rows.append(TopicRow(name, topic.topic_id))
        t = topic.topic_id
        if t in initialized:
            plan.delete[t] = sorted(initialized.pop(t))
            deleting[t] = name
        elif t in deleting:
            plan.delete[t] = list(range(len(topic.partitions)))
    return Result(_record(group, initialized, dict(group.topic_names), deleting), plan)


def delete_group_state(shard: GroupShard, group_id: str) -> Result:
    """DeleteGroups of a share group, step 1: everything moves to deleting (record 15).
    Response: `Plan`, or None when the group is not a share group (the caller goes on
    with the generic delete)."""
    group = shard.groups.get(group_id)
    if not isinstance(group, ShareGroup):
        return Result([], None)
    empty_share_group(shard, group_id)
    image = shard.image()
    plan = Plan()
    deleting: dict[uuid.UUID, str] = {}
    for t, ps in group.initialized.items():
        plan.delete[t] = sorted(ps)
        deleting[t] = group.topic_names.get(t, "")
    for t, name in group.deleting.items():
        topic = image.topic_by_id(t)
        if topic is not None:  # a deleted topic's state went with it
            plan.delete[t] = list(range(len(topic.partitions)))
            deleting[t] = name
    return Result(_record(group, {}, dict(group.topic_names), deleting), plan)


def complete_deletion(shard: GroupShard, group_id: str, done: Iterable[uuid.UUID]) -> Result:
    """The completing record 15: topics whose state tombstones are written leave the
    deleting set (Kafka's `completeDeleteShareGroupOffsets`)."""
    group = shard.groups.get(group_id)
    if not isinstance(group, ShareGroup):
        return Result([], None)
    deleting = {t: n for t, n in group.deleting.items() if t not in set(done)}
    records = _record(group, dict(group.initialized), dict(group.topic_names), deleting)
    if group.members and deleting != group.deleting:
        # Members joined meanwhile without these topics: a new epoch assigns them.
        records.append(group_epoch_record(group_id, group.group_epoch + 1,
                                          group.metadata_hash))
    return Result(records)


def pending_deletions(shard: GroupShard) -> dict[str, dict[uuid.UUID, list[int]]]:
    """Group -> topic -> partitions of deletions begun and not completed (a crash
    between the steps): every partition of each deleting topic still in the image."""
    image = shard.image()
    out: dict[str, dict[uuid.UUID, list[int]]] = {}
    for group in shard.groups.values():
        if isinstance(group, ShareGroup) and group.deleting:
            topics = {}
            for t in group.deleting:
                topic = image.topic_by_id(t)
                topics[t] = list(range(len(topic.partitions))) if topic is not None else []
            out[group.group_id] = topics
    return out


def initialized_partitions(shard: GroupShard, group_id: str) -> dict[uuid.UUID, list[int]]:
    """Kafka's `initializedShareGroupPartitions`: empty for an unknown group."""
    group = shard.groups.get(group_id)
    if not isinstance(group, ShareGroup):
        return {}
    return {t: sorted(ps) for t, ps in group.initialized.items()}
