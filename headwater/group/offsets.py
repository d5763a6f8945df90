"""Committed offsets (Kafka's inbuilt offset management design): the in-memory offsets table of one shard.

Commits become OffsetCommit records; replaying a record stores the offset and a
tombstone removes it. Validation against the group (generation, member epoch) is
delegated to the group object. Expiry is an operation like any other: it returns
tombstones, written by the shard itself.

Transactional commits (TxnOffsetCommit, seed 5.6) are the same records written under a
producer id and epoch with the transactional bit. Replaying one stores the offset as
*pending* for that producer; the transaction's marker in this partition then makes the
producer's pending offsets *below the marker* committed (COMMIT) or drops them (ABORT).
A marker ends only the records before it in the log: on the shared log the marker of a
transaction may be replayed after the producer's next transaction wrote its offsets
(the owner learns of a marker committed by a coordinator elsewhere after the client
moved on), and those belong to the next marker. The newer of a pending and an already
committed offset wins, by position in the log, as in Kafka. While any are pending,
`require_stable` fetches get UNSTABLE_OFFSET_COMMIT for those partitions and expiry
leaves them alone.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as E

from ..coordinator.record_codec import CoordinatorRecord
from ..coordinator.runtime import Result
from . import records as R
from .base import Group, PartitionCommitValidated

if TYPE_CHECKING:
    from .shard import GroupShard


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    record_offset: int = -1  # where the record is in the log (orders txn vs plain commits)


# group -> topic -> partition -> offset
OffsetTable = dict[str, dict[str, dict[int, CommittedOffset]]]


@dataclass(frozen=True, slots=True)
class PendingOffset:
    """One partition's offset in a TxnOffsetCommit record, until its marker."""

    group: str
    topic: str
    partition: int
    committed: CommittedOffset


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


class OffsetManager:
    def __init__(self, shard: GroupShard) -> None:
        self.shard = shard
        self.offsets: OffsetTable = {}
        # producer id -> its transactional offsets not yet ended by a marker, in log order
        self.pending: dict[int, list[PendingOffset]] = {}

    # ---- replay --------------------------------------------------------------------
    def replay(self, record: CoordinatorRecord, offset: int = -1,
               producer_id: int = -1) -> None:
        key = record.key
        group, topic, partition = key["group"], key["topic"], key["partition"]
        if record.value is not None and producer_id >= 0:
            v = record.value
            self.pending.setdefault(producer_id, []).append(PendingOffset(
                group, topic, partition, CommittedOffset(
                    v["offset"], v["leader_epoch"], v["metadata"], v["commit_timestamp"],
                    offset)))
            if group not in self.shard.groups:
                self.shard.create_simple_group(group)
            return
        if record.value is None:
            topics = self.offsets.get(group)
            if topics is not None:
                parts = topics.get(topic)
                if parts is not None:
                    parts.pop(partition, None)
                    if not parts:
                        del topics[topic]
                if not topics:
                    del self.offsets[group]
            return
        v = record.value
        self.offsets.setdefault(group, {}).setdefault(topic, {})[partition] = CommittedOffset(
            v["offset"], v["leader_epoch"], v["metadata"], v["commit_timestamp"], offset)
        if group not in self.shard.groups:
            self.shard.create_simple_group(group)

    def replay_end_transaction(self, producer_id: int, commit: bool,
                               marker_offset: int) -> None:
        """The producer's marker at `marker_offset`: its pending offsets before it become
        committed (COMMIT) or are dropped (ABORT); later ones wait for their own. A
        marker replayed twice ends nothing the second time."""
        pending = self.pending.pop(producer_id, None)
        if pending is None:
            return
        ended = [p for p in pending if p.committed.record_offset < marker_offset]
        later = [p for p in pending if p.committed.record_offset > marker_offset]
        if later:
            self.pending[producer_id] = later
        if not commit:
            return
        for p in ended:
            stored = self.offsets.setdefault(p.group, {}).setdefault(p.topic, {})
            current = stored.get(p.partition)
            if current is None or p.committed.record_offset > current.record_offset:
                stored[p.partition] = p.committed

    # ---- queries -------------------------------------------------------------------
    def group_offsets(self, group: str) -> dict[str, dict[int, CommittedOffset]]:
        return self.offsets.get(group, {})

    def has_offsets(self, group: str) -> bool:
        return bool(self.offsets.get(group))

    def has_pending(self, group: str, topic: str | None = None,
                    partition: int | None = None) -> bool:
        """Whether an open transaction holds offsets of the group (or of one partition)."""
        return any(p.group == group and (topic is None or p.topic == topic)
                   and (partition is None or p.partition == partition)
                   for entries in self.pending.values() for p in entries)

    # ---- operations ----------------------------------------------------------------
    def commit(self, group_id: str, member_id: str, instance_id: str | None,
               generation_or_epoch: int, topics: list[tuple[str, list[PartitionCommit]]],
               api_version: int, now_ms: int) -> Result:
        """Response: {topic: {partition: error_code}}."""
        if not group_id:
            return Result([], _all(topics, E.invalid_group_id))
        group = self.shard.groups.get(group_id)
        if group is None:
            if generation_or_epoch >= 0 or member_id:
                return Result([], _all(topics, E.illegal_generation if generation_or_epoch >= 0
                                       else E.unknown_member_id))
        else:
            error = group.validate_offset_commit(member_id, instance_id, generation_or_epoch,
                                                 api_version)
            if error:
                return Result([], _all(topics, error))
            return self._commit_records(group_id, topics, now_ms,
                                        _partition_check(group, member_id, generation_or_epoch))
        return self._commit_records(group_id, topics, now_ms)

    def commit_transactional(self, group_id: str, member_id: str, instance_id: str | None,
                             generation: int, topics: list[tuple[str, list[PartitionCommit]]],
                             now_ms: int) -> Result:
        """TxnOffsetCommit: Kafka's group checks for transactional commits (a member id
        and generation are checked when given; no OffsetCommit-version rule; a stale
        member epoch is ILLEGAL_GENERATION). The caller writes the records under the
        producer's id and epoch. Response: {topic: {partition: error_code}}."""
        if not group_id:
            return Result([], _all(topics, E.invalid_group_id))
        group = self.shard.groups.get(group_id)
        if group is None:
            if generation >= 0:
                return Result([], _all(topics, E.illegal_generation))
        else:
            error = group.validate_offset_commit(member_id, instance_id, generation, -1,
                                                 transactional=True)
            if error:
                return Result([], _all(topics, E.illegal_generation
                                       if error == E.stale_member_epoch else error))
            check = _partition_check(group, member_id, generation)
            if check is not None:
                def as_txn(topic: str, partition: int) -> int:
                    code = check(topic, partition)
                    return E.illegal_generation if code == E.stale_member_epoch else code
                return self._commit_records(group_id, topics, now_ms, as_txn)
        return self._commit_records(group_id, topics, now_ms)

    def _commit_records(self, group_id: str, topics: list[tuple[str, list[PartitionCommit]]],
                        now_ms: int, check: Callable[[str, int], int] | None = None) -> Result:
        limit = self.shard.config.offset_metadata_max_bytes
        records = []
        response: dict[str, dict[int, int]] = {}
        for topic, parts in topics:
            codes = response.setdefault(topic, {})
            for p in parts:
                refused = check(topic, p.partition) if check is not None else E.none
                if refused:
                    codes[p.partition] = refused
                    continue
                metadata = p.metadata or ""
                if len(metadata.encode()) > limit:
                    codes[p.partition] = E.offset_metadata_too_large
                    continue
                codes[p.partition] = E.none
                records.append(R.offset_commit(group_id, topic, p.partition, p.offset,
                                               p.leader_epoch, metadata, now_ms))
        return Result(records, response)

    def fetch(self, group_id: str, member_id: str | None, member_epoch: int,
              topics: list[tuple[str, list[int]]] | None, require_stable: bool = False
              ) -> tuple[int, dict[str, dict[int, CommittedOffset | int | None]]]:
        """(group error, {topic: {partition: CommittedOffset | None}}); with
        `require_stable`, a partition with a pending transactional offset maps to the
        error UNSTABLE_OFFSET_COMMIT (an int) instead."""
        group = self.shard.groups.get(group_id)
        if group is not None and (member_id is not None or member_epoch >= 0):
            error = group.validate_offset_fetch(member_id, member_epoch)
            if error:
                return error, {}
        stored = self.offsets.get(group_id, {})
        if topics is None:
            out: dict[str, dict[int, CommittedOffset | None | int]] = {
                t: dict(parts) for t, parts in stored.items()}
        else:
            out = {}
            for topic, partitions in topics:
                have = stored.get(topic, {})
                out[topic] = {p: have.get(p) for p in partitions}
        if require_stable and self.has_pending(group_id):
            for topic, parts in out.items():
                for p in parts:
                    if self.has_pending(group_id, topic, p):
                        parts[p] = E.unstable_offset_commit
        return E.none, out

    def delete(self, group_id: str, topics: list[tuple[str, list[int]]]
               ) -> Result:
        """OffsetDelete; response (group error, {topic: {partition: error}})."""
        group = self.shard.groups.get(group_id)
        if group is None:
            return Result([], (E.group_id_not_found, {}))
        error = group.validate_offset_delete()
        if error:
            return Result([], (error, {}))
        stored = self.offsets.get(group_id, {})
        records = []
        response: dict[str, dict[int, int]] = {}
        for topic, partitions in topics:
            subscribed = group.is_subscribed_to(topic)
            codes = response.setdefault(topic, {})
            for p in partitions:
                if subscribed:
                    codes[p] = E.group_subscribed_to_topic
                    continue
                codes[p] = E.none
                if p in stored.get(topic, {}):
                    records.append(R.offset_commit_tombstone(group_id, topic, p))
        return Result(records, (E.none, response))

    def tombstones_for_group(self, group_id: str) -> list[CoordinatorRecord]:
        return [R.offset_commit_tombstone(group_id, topic, p)
                for topic, parts in self.offsets.get(group_id, {}).items() for p in parts]

    def tombstones_for_topic(self, topic: str) -> list[CoordinatorRecord]:
        return [R.offset_commit_tombstone(group, topic, p)
                for group, topics in self.offsets.items()
                for p in topics.get(topic, {})]

    def expire(self, now_ms: int) -> list[CoordinatorRecord]:
        """Tombstones for offsets past `offsets.retention.minutes` (Kafka's rules)."""
        retention = self.shard.config.offsets_retention_ms
        records: list[CoordinatorRecord] = []
        for group_id, topics in self.offsets.items():
            group = self.shard.groups.get(group_id)
            empty = group is None or group.is_empty()
            since = group.empty_since_ms() if group is not None else None
            for topic, parts in topics.items():
                if not empty and (group is None or group.is_subscribed_to(topic)):
                    continue
                for p, committed in parts.items():
                    if self.pending and self.has_pending(group_id, topic, p):
                        continue  # an open transaction is about to replace it
                    base = committed.commit_timestamp
                    if empty and since is not None and group is not None \
                            and group.group_type == "classic":
                        base = max(base, since)
                    if now_ms - base >= retention:
                        records.append(R.offset_commit_tombstone(group_id, topic, p))
        return records


def _partition_check(group: Group, member_id: str, epoch: int
                     ) -> Callable[[str, int], int] | None:
    """The group's per-partition judgement of this commit, if it has one."""
    if not isinstance(group, PartitionCommitValidated):
        return None
    return functools.partial(group.partition_commit_error, member_id, epoch)


def _all(topics: list[tuple[str, list[PartitionCommit]]], code: int) -> dict[str, dict[int, int]]:
    return {topic: {p.partition: code for p in parts} for topic, parts in topics}


def as_fetch_entry(partition: int, committed: CommittedOffset | None | int, error: int = 0
                   ) -> dict[str, Any]:
    """An OffsetFetch partition entry; `committed` may be an error code (see `fetch`)."""
    if isinstance(committed, int):
        error = committed
        committed = None
    if committed is None:
        return {"partition_index": partition, "committed_offset": -1,
                "committed_leader_epoch": -1, "metadata": "", "error_code": error}
    return {"partition_index": partition, "committed_offset": committed.offset,
            "committed_leader_epoch": committed.leader_epoch,
            "metadata": committed.metadata, "error_code": error}
