"""KRaft snapshots of the metadata image: the file format, falling back past a damaged
one, never inside a transaction, trimming the log, and snapshot + tail == full replay."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from headwater import faults
from headwater.config import BrokerConfig, LogConfig
from headwater.log.partition_log import PartitionLog
from headwater.metadata import records as R
from headwater.metadata import snapshot
from headwater.metadata.controller import Controller, NewTopic
from headwater.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage
from headwater.metadata.replay import Replay, read_batches
from headwater.records.batch import decode_records, iter_batches, parse_header

pytestmark = pytest.mark.timeout(60)
CLOCK = [1_000]
NO_SNAPSHOTS = {"metadata.log.max.record.bytes.between.snapshots": str(1 << 62),
                "metadata.log.max.snapshot.interval.ms": "0"}


def open_controller(path: Path, segment_bytes: int = 1 << 30, **config: str) -> Controller:
    plog = PartitionLog.open(path, LogConfig(segment_bytes=segment_bytes),
                             "__cluster_metadata", 0, CLOCK[0])
    controller = Controller(plog, BrokerConfig(config), lambda: CLOCK[0])
    controller.load()
    return controller


def reopen(c: Controller, **config: str) -> Controller:
    c.log.close()
    return open_controller(c.log.path, c.log.config.segment_bytes, **config)


def history(c: Controller, rounds: int = 6) -> None:
    """Creates, deletes, config changes, quotas, producer ids and a transaction."""
    for i in range(rounds):
        c.create_topics([NewTopic(f"t{i}", 3, configs={"retention.ms": str(1000 + i)}),
                         NewTopic(f"gone{i}", 2)])
        c.delete_topics([c.image.topic(f"gone{i}")])
        c.commit(c.config_records(BROKER_RESOURCE, "", {"log.retention.ms": str(i)}))
        c.allocate_producer_id()
        c._pid_next = c._pid_end  # the next allocation commits a new block
    c.create_topics([NewTopic("wide", 1200)])  # a metadata transaction
    c.commit([R.ClientQuotaRecord((("user", "alice"),), "producer_byte_rate", 1024.0)])
    c.commit(c.config_records(TOPIC_RESOURCE, "t0", {"retention.ms": None}))


def test_file_format_round_trip(tmp_path):
    c = open_controller(tmp_path / "meta", **NO_SNAPSHOTS)
    history(c)
    records = snapshot.image_records(c.image)
    sid = snapshot.SnapshotId(c.log.log_end_offset, snapshot.EPOCH)
    data = snapshot.encode(records, sid, 123, 456)
    batches = [(pos, h) for pos, h in iter_batches(data)]
    first, last = batches[0][1], batches[-1][1]
    assert first.is_control and first.base_offset == 0 and last.is_control
    header = decode_records(data[:first.size])[0]
    assert header.key == b"\x00\x00\x00\x03"  # version 0, SNAPSHOT_HEADER
    assert header.value == b"\x00\x00" + (123).to_bytes(8, "big") + b"\x00"
    footer = decode_records(data[batches[-1][0]:])[0]
    assert footer.key == b"\x00\x00\x00\x04" and footer.value == b"\x00\x00\x00"
    assert last.next_offset == len(records) + 2  # header + records + footer
    assert snapshot.decode(data) == records
    assert snapshot.image_of(records, sid) == c.image
    assert isinstance(records[0], R.FeatureLevelRecord)
    assert records[0].name == "metadata.version"
    assert sid.name == f"{sid.offset:020d}-0000000000.checkpoint"
    assert snapshot.SnapshotId.parse(sid.name) == sid


def test_start_from_snapshot_and_tail_equals_a_full_replay(tmp_path):
    c = open_controller(tmp_path / "meta", **NO_SNAPSHOTS)
    history(c, 3)
    c.write_snapshot()
    for i in range(3):  # the tail: more of everything after the snapshot
        c.create_topics([NewTopic(f"late{i}", 2)])
        c.delete_topics([c.image.topic(f"t{i}")])
    c.commit(c.config_records(TOPIC_RESOURCE, "late0", {"cleanup.policy": "compact"}))
    expected = c.image
    c.log.close()
    full = tmp_path / "full"
    shutil.copytree(tmp_path / "meta", full)
    for f in full.glob("*.checkpoint"):
        f.unlink()
    replayed = open_controller(full, **NO_SNAPSHOTS).image
    from_snapshot = open_controller(tmp_path / "meta", **NO_SNAPSHOTS).image
    assert replayed == expected
    assert from_snapshot == replayed
    assert from_snapshot.features == {"metadata.version": R.METADATA_VERSION}


def test_a_torn_or_corrupt_snapshot_is_skipped_for_the_previous_one(tmp_path):
    meta = tmp_path / "meta"
    c = open_controller(meta, **NO_SNAPSHOTS)
    c.create_topics([NewTopic("a", 2)])
    first = c.write_snapshot()
    c.create_topics([NewTopic("b", 2)])
    second = c.write_snapshot()
    c.create_topics([NewTopic("c", 2)])
    expected = c.image
    c.log.close()
    data = second.read_bytes()
    second.write_bytes(data[:-10])  # torn: the footer is cut off
    assert open_controller(meta, **NO_SNAPSHOTS).image == expected
    c = open_controller(meta, **NO_SNAPSHOTS)
    c.log.close()
    corrupt = bytearray(data)
    corrupt[len(corrupt) // 2] ^= 0xFF  # a flipped bit: the batch CRC catches it
    second.write_bytes(bytes(corrupt))
    assert snapshot.load_latest(meta)[0].offset == snapshot.SnapshotId.parse(first.name).offset
    assert open_controller(meta, **NO_SNAPSHOTS).image == expected


def test_the_only_snapshot_damaged_means_a_full_replay(tmp_path):
    meta = tmp_path / "meta"
    c = open_controller(meta, **NO_SNAPSHOTS)
    c.create_topics([NewTopic("a", 2)])
    only = c.write_snapshot()
    c.create_topics([NewTopic("b", 2)])
    expected = c.image
    c.log.close()
    assert c.log.log_start_offset == 0  # one snapshot: the whole log is its fallback
    only.write_bytes(b"\x00" * 100)
    assert snapshot.load_latest(meta) is None
    assert open_controller(meta, **NO_SNAPSHOTS).image == expected


def test_a_partial_snapshot_is_removed_at_start(tmp_path):
    meta = tmp_path / "meta"
    c = open_controller(meta, **NO_SNAPSHOTS)
    c.create_topics([NewTopic("a", 1)])
    c.log.close()
    partial = meta / ("00000000000000000002-0000000000" + snapshot.PARTIAL_SUFFIX)
    partial.write_bytes(b"half a snapshot")
    assert set(open_controller(meta).image.topics_by_name) == {"a"}
    assert not partial.exists()


def prefix_state(meta: Path, below: int) -> Replay:
    state = Replay()
    for seg in sorted(meta.glob("*.log")):
        for offset, item in read_batches(seg.read_bytes()):
            if offset < below:
                state.add(offset, item)
    return state


def test_a_snapshot_is_never_written_inside_a_transaction(tmp_path, monkeypatch):
    meta = tmp_path / "meta"
    c = open_controller(meta, **{"metadata.log.max.record.bytes.between.snapshots": "1"})
    seen = []

    def between_batches(name: str, detail: str = "") -> None:  # after Begin, before the rest
        assert name == faults.METADATA_AFTER_BEGIN
        seen.append(c.maybe_snapshot())
    monkeypatch.setattr(c.faults, "hit", between_batches)
    for i in range(3):
        c.create_topics([NewTopic(f"wide{i}", 1200), NewTopic(f"small{i}", 1)])
    assert seen and all(s is None for s in seen)  # due (1 byte), but a transaction is open
    ids = snapshot.list_ids(meta)
    assert ids, "a snapshot after each commit"
    for sid in ids:
        state = prefix_state(meta, sid.offset)
        assert state.pending is None and state.last_offset == sid.offset - 1
    assert ids[-1].offset == c.log.log_end_offset


def test_log_segments_before_the_snapshots_are_deleted(tmp_path):
    meta = tmp_path / "meta"
    c = open_controller(meta, segment_bytes=4096,
                        **{"metadata.log.max.record.bytes.between.snapshots": "20000"})
    for i in range(60):
        c.create_topics([NewTopic(f"t{i}", 20)])
        if i % 3:
            c.delete_topics([c.image.topic(f"t{i}")])
    expected = c.image
    ids = snapshot.list_ids(meta)
    assert len(ids) == snapshot.KEEP  # older snapshots are deleted too
    assert c.log.log_start_offset == ids[0].offset
    bases = sorted(int(p.stem) for p in meta.glob("*.log"))
    assert bases[0] > 0 and bases[0] <= ids[0].offset  # only wholly-older segments went
    c = reopen(c, **NO_SNAPSHOTS)
    assert c.image == expected and c.log.log_start_offset == ids[0].offset
    # The newest snapshot damaged: the older one plus the (kept) log after it.
    (meta / ids[-1].name).write_bytes(b"garbage")
    c = reopen(c, **NO_SNAPSHOTS)
    assert c.image == expected


def test_no_snapshot_covering_a_trimmed_log_refuses_to_start(tmp_path):
    meta = tmp_path / "meta"
    c = open_controller(meta, segment_bytes=4096,
                        **{"metadata.log.max.record.bytes.between.snapshots": "20000"})
    for i in range(40):
        c.create_topics([NewTopic(f"t{i}", 20)])
    c.log.close()
    for f in meta.glob("*.checkpoint"):
        f.write_bytes(b"garbage")
    with pytest.raises(RuntimeError, match="no readable snapshot"):
        open_controller(meta)


def test_time_based_snapshot(tmp_path):
    meta = tmp_path / "meta"
    c = open_controller(meta, **{"metadata.log.max.snapshot.interval.ms": "60000"})
    c.create_topics([NewTopic("a", 1)])
    assert snapshot.list_ids(meta) == []
    CLOCK[0] += 60_000
    c.create_topics([NewTopic("b", 1)])
    (sid,) = snapshot.list_ids(meta)
    assert sid.offset == c.log.log_end_offset
    assert c.maybe_snapshot() is None  # nothing new since
    header = parse_header((meta / sid.name).read_bytes())
    assert header.is_control


def test_empty_image_round_trip():
    records = snapshot.image_records(MetadataImage())
    sid = snapshot.SnapshotId(0, 0)
    assert snapshot.decode(snapshot.encode(records, sid, 0, 0)) == records


def test_a_failed_snapshot_write_leaves_nothing_and_changes_go_on(tmp_path, monkeypatch):
    meta = tmp_path / "meta"
    c = open_controller(meta, **{"metadata.log.max.record.bytes.between.snapshots": "1"})

    def full_disk(path, data: bytes) -> None:  # the snapshot's write fails, the log's not
        path.write_bytes(data[:100])
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(snapshot, "write_synced", full_disk)
    before = snapshot.list_ids(meta)  # the one at start, after metadata.version
    c.create_topics([NewTopic("a", 1)])  # committed; only the snapshot failed
    assert snapshot.list_ids(meta) == before and not list(meta.glob("*.part"))
    monkeypatch.undo()
    c.create_topics([NewTopic("b", 1)])
    assert snapshot.list_ids(meta)[-1].offset == c.log.log_end_offset
    assert set(reopen(c).image.topics_by_name) == {"a", "b"}


def test_a_long_log_without_snapshot_gets_one_at_start(tmp_path):
    meta = tmp_path / "meta"
    c = open_controller(meta, **NO_SNAPSHOTS)
    history(c, 2)
    expected = c.image
    c = reopen(c, **{"metadata.log.max.record.bytes.between.snapshots": "4096"})
    (sid,) = snapshot.list_ids(meta)
    assert sid.offset == c.log.log_end_offset and c.image == expected


def test_a_snapshot_written_off_thread_is_one_at_a_time(tmp_path):
    """With a runner (the broker's executor) the write happens elsewhere; meanwhile more
    commits start no second one, and they count toward the next."""
    meta = tmp_path / "meta"
    c = open_controller(meta, segment_bytes=4096,
                        **{"metadata.log.max.record.bytes.between.snapshots": "2000"})
    queued: list[tuple] = []
    c.snapshot_runner = lambda job, done: queued.append((job, done))
    c.create_topics([NewTopic("a", 40)])
    image_a, end_a = c.image, c.log.log_end_offset
    c.create_topics([NewTopic("b", 40)])  # due again, but one is in flight
    assert len(queued) == 1 and snapshot.list_ids(meta) == []
    job, done = queued.pop()
    path = job()
    done(None)
    (sid,) = snapshot.list_ids(meta)
    assert sid.offset == end_a and path.name == sid.name  # the image when it was due
    assert snapshot.image_of(snapshot.read(meta, sid), sid) == image_a
    c.create_topics([NewTopic("c", 1)])  # b's bytes still count: due at once
    job, done = queued.pop()
    done(OSError(5, "I/O error"))  # failed: the bytes are owed again
    c.create_topics([NewTopic("d", 1)])
    job, done = queued.pop()
    job()
    done(None)
    assert snapshot.list_ids(meta)[-1].offset == c.log.log_end_offset
    assert len(snapshot.list_ids(meta)) == 2 and c.log.log_start_offset == sid.offset
    expected = c.image
    assert reopen(c, **NO_SNAPSHOTS).image == expected


def test_any_damage_is_refused_whole_or_harmless():
    """Every truncation and every flipped byte of a snapshot: SnapshotError, or (a byte
    the CRC does not cover, e.g. the leader epoch) the same records; never another error."""
    image = MetadataImage().apply([
        R.FeatureLevelRecord("metadata.version", R.METADATA_VERSION),
        R.TopicRecord("t", "7d0cba5e-4e0e-4a8e-9a3b-0c1d2e3f4a5b"),
        R.PartitionRecord("7d0cba5e-4e0e-4a8e-9a3b-0c1d2e3f4a5b", 0, (1,), (1,), 1),
        R.ConfigRecord(TOPIC_RESOURCE, "t", "retention.ms", "1")], 3)
    records = snapshot.image_records(image)
    data = snapshot.encode(records, snapshot.SnapshotId(4, 0), 1, 2)
    for cut in range(len(data)):
        with pytest.raises(snapshot.SnapshotError):
            snapshot.decode(data[:cut])
    for i in range(len(data)):
        damaged = bytearray(data)
        damaged[i] ^= 0x41
        try:
            assert snapshot.decode(bytes(damaged)) == records
        except snapshot.SnapshotError:
            pass


def test_every_part_of_the_image_survives_a_snapshot():
    """A field added to MetadataImage must be written by snapshot.image_records, or a
    snapshot would silently drop it: this image sets every one of them."""
    tid = "7d0cba5e-4e0e-4a8e-9a3b-0c1d2e3f4a5b"
    records = [
        R.FeatureLevelRecord("metadata.version", R.METADATA_VERSION),
        R.FeatureLevelRecord("share.version", 1),
        R.TopicRecord("t", tid),
        R.PartitionRecord(tid, 0, (1,), (1,), 1, 3, 4),
        R.PartitionRecord(tid, 1, (1,), (1,), 1),
        R.ConfigRecord(TOPIC_RESOURCE, "t", "retention.ms", "1"),
        R.ConfigRecord(BROKER_RESOURCE, "", "log.retention.ms", "2"),
        R.ProducerIdsRecord(1, 0, 2000),
        R.ClientQuotaRecord((("client-id", None), ("user", "alice")), "producer_byte_rate",
                            5.0),
        R.UserScramCredentialRecord("alice", 1, b"salt", b"stored", b"server", 4096),
        R.AccessControlEntryRecord("0b6c3c1e-9d4e-4f3a-8b2a-1c2d3e4f5a6b", 2, "t", 3, "User:alice", "*", 3, 3),
    ]
    image = MetadataImage().apply(records, len(records) - 1)
    empty = MetadataImage()
    for f in dataclasses.fields(MetadataImage):
        if f.name != "offset":
            assert getattr(image, f.name) != getattr(empty, f.name), (
                f"the test image leaves MetadataImage.{f.name} empty: set it above")
    sid = snapshot.SnapshotId(len(records), 0)
    written = snapshot.decode(snapshot.encode(snapshot.image_records(image), sid, 0, 0))
    assert snapshot.image_of(written, sid) == image
