"""Offset commits, fetches, deletes and expiry on a group shard (Kafka's inbuilt offset management design)."""

from __future__ import annotations

from headwater.group import records as R
from headwater.group.offsets import PartitionCommit
from tests.unit.group.context import GroupContext

DAY = 24 * 3600 * 1000


def commit(ctx: GroupContext, group: str, parts, member="", gen=-1, version=9):
    return ctx.write(lambda s, now: s.offsets.commit(group, member, None, gen,
                                                     [("t", parts)], version, now))


def test_simple_commit_creates_empty_group_and_fetch_returns_it():
    ctx = GroupContext({"t": 2})
    codes = commit(ctx, "g", [PartitionCommit(0, 42, 3, "meta"), PartitionCommit(1, 7)])
    assert codes == {"t": {0: 0, 1: 0}}
    assert [r.type_id for r in ctx.last_records] == [R.OFFSET_COMMIT, R.OFFSET_COMMIT]
    assert ctx.last_records[0].value["commit_timestamp"] == ctx.now
    assert ctx.shard.groups["g"].state_name() == "Empty"
    err, found = ctx.shard.offsets.fetch("g", None, -1, [("t", [0, 1, 2])])
    assert err == 0
    assert found["t"][0].offset == 42 and found["t"][0].metadata == "meta"
    assert found["t"][0].leader_epoch == 3
    assert found["t"][2] is None
    # A replay of the log rebuilds the same offsets table.
    assert ctx.replayed().offsets.offsets == ctx.shard.offsets.offsets


def test_metadata_too_large_fails_only_that_partition():
    ctx = GroupContext({"t": 2}, **{"offset.metadata.max.bytes": "5"})
    codes = commit(ctx, "g", [PartitionCommit(0, 1, -1, "toolarge"),
                              PartitionCommit(1, 2, -1, "small")])
    assert codes == {"t": {0: 12, 1: 0}}
    assert len(ctx.last_records) == 1


def test_commit_with_generation_to_unknown_group_is_rejected():
    ctx = GroupContext({"t": 1})
    codes = commit(ctx, "nobody", [PartitionCommit(0, 1)], member="m-1", gen=3)
    assert codes == {"t": {0: 22}}  # ILLEGAL_GENERATION
    assert ctx.last_records == [] and "nobody" not in ctx.shard.groups


def test_delete_offsets_and_group_tombstones():
    ctx = GroupContext({"t": 2})
    commit(ctx, "g", [PartitionCommit(0, 1), PartitionCommit(1, 2)])
    error, codes = ctx.write(lambda s, now: s.offsets.delete("g", [("t", [0, 5])]))
    assert (error, codes) == (0, {"t": {0: 0, 5: 0}})
    assert [r.value for r in ctx.last_records] == [None]  # one tombstone, none for 5
    assert ctx.write(lambda s, now: s.delete_group("g")) == 0
    assert "g" not in ctx.shard.groups and not ctx.shard.offsets.has_offsets("g")
    assert ctx.write(lambda s, now: s.delete_group("g")) == 69  # GROUP_ID_NOT_FOUND
    assert "g" not in ctx.replayed().groups


def test_retention_expires_offsets_of_empty_group_then_the_group():
    ctx = GroupContext({"t": 1}, **{"offsets.retention.minutes": "1440",
                                    "offsets.retention.check.interval.ms": "600000"})
    commit(ctx, "g", [PartitionCommit(0, 5)])
    assert ctx.advance(DAY - 700_000) == []  # checks ran, nothing old enough
    expired = ctx.advance(700_000)
    assert [(r.type_id, r.value) for r in expired] == [(R.OFFSET_COMMIT, None),
                                                       (R.GROUP_METADATA, None)]
    assert "g" not in ctx.shard.groups
    assert ctx.shard.offsets.fetch("g", None, -1, [("t", [0])])[1]["t"][0] is None


def test_offsets_of_deleted_topic_are_removed():
    ctx = GroupContext({"t": 1, "u": 1})
    commit(ctx, "g", [PartitionCommit(0, 5)])
    ctx.set_topics({"u": 1})
    assert [(r.key["topic"], r.value) for r in ctx.last_records] == [("t", None)]
    assert not ctx.shard.offsets.has_offsets("g")
