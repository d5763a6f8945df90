"""Log compaction: survivors, offsets, tombstones, codecs, crash-safe swaps, producers."""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
from pathlib import Path

import pytest
from kafka.record import MemoryRecords
from kio.schema.errors import ErrorCode as E

from headwater.config import ConfigError, LogConfig, validate_topic_config
from headwater.log import swap
from headwater.log.cleaner import CHECKPOINT, CleanStats, LogCleaner
from headwater.log.manager import LogManager
from headwater.log.partition_log import PartitionLog
from headwater.log.segment import LogSegment
from headwater.records import compression
from headwater.records.batch import build_batch, decode_records, iter_batches
from headwater.storage.errors import LogError
from tests.unit.log.crash import clean_until_crash

COMPACT = LogConfig(segment_bytes=1024, index_interval_bytes=128, retention_ms=-1,
                    cleanup_policy="compact", delete_retention_ms=60_000)
T0 = 1_700_000_000_000  # segment mtimes (ms) pinned by `age_segments`
PID = 4242

Row = tuple[int, int, bytes | None, bytes | None]  # offset, timestamp, key, value


def put(plog: PartitionLog, items: list[tuple[bytes, bytes | None]], ts: int = 1000,
        **kwargs) -> int:
    """Append one batch of (key, value) records; returns its base offset."""
    batch = build_batch([(k, v, [], ts + i) for i, (k, v) in enumerate(items)], **kwargs)
    return plog.append(batch, ts + len(items)).base_offset  # the broker's clock: now


def fill(plog: PartitionLog, writes: int, keys: int, per_batch: int = 1, **kwargs) -> None:
    """`writes` records cycling over `keys` keys, value = b"<key>=<write number>"."""
    for start in range(0, writes, per_batch):
        put(plog, [(b"k%d" % (i % keys), b"k%d=%d" % (i % keys, i))
                   for i in range(start, min(start + per_batch, writes))],
            ts=1000 + start, **kwargs)


def rows(data: bytes) -> list[Row]:
    return [(r.offset, r.timestamp, r.key, r.value)
            for pos, h in iter_batches(data) for r in decode_records(data[pos:pos + h.size])]


def dump(plog: PartitionLog) -> list[Row]:
    return rows(plog.read(plog.log_start_offset, 1 << 30))


def survivors(before: list[Row], active_base: int, drop_tombstones: bool = False) -> list[Row]:
    """What compaction must leave: the latest inactive record per key, and the active
    segment as it was."""
    latest = {key: offset for offset, _, key, _ in before if offset < active_base}
    return [r for r in before if r[0] >= active_base
            or (latest[r[2]] == r[0] and not (drop_tombstones and r[3] is None))]


def age_segments(plog: PartitionLog, mtime_ms: int = T0) -> None:
    for segment in plog.segments[:-1]:
        os.utime(segment.log_path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))


def reopen(path: Path, config: LogConfig = COMPACT) -> PartitionLog:
    return PartitionLog.open(path, config, "topic", 0, 0)


@pytest.fixture
def clog(open_log):
    return open_log(COMPACT)


@pytest.fixture
def cleaner() -> LogCleaner:
    return LogCleaner(lambda: T0)


# ---- what survives ------------------------------------------------------------------


def test_latest_value_per_key_survives_with_offsets_and_timestamps(clog, cleaner) -> None:
    fill(clog, 300, keys=12)
    assert len(clog.segments) > 8
    before = dump(clog)
    active_base = clog.segments[-1].base_offset

    stats = cleaner.clean(clog)

    after = dump(clog)
    assert after == survivors(before, active_base)
    assert {k: v for _, _, k, v in after} == {k: v for _, _, k, v in before}
    assert stats.records_removed == len(before) - len(after)
    assert stats.bytes_after < stats.bytes_before / 5
    assert clog.log_end_offset == 300 and clog.log_start_offset == 0
    assert put(clog, [(b"k0", b"new")]) == 300


def test_read_from_a_removed_offset_lands_on_the_next_survivor(clog, cleaner) -> None:
    fill(clog, 200, keys=7, per_batch=3)
    cleaner.clean(clog)
    kept = [r[0] for r in dump(clog)]
    for offset in range(clog.log_end_offset):
        first = next(r for r in rows(clog.read(offset, 1)) if r[0] >= offset)
        assert first[0] == min(o for o in kept if o >= offset)


def test_partially_kept_batches_keep_their_offset_range(clog, cleaner) -> None:
    fill(clog, 90, keys=5, per_batch=3)  # every batch straddles several keys
    before = {h.base_offset: h for _, h in iter_batches(clog.read(0, 1 << 30))}
    cleaner.clean(clog)
    data = clog.read(0, 1 << 30)
    for pos, h in iter_batches(data):
        old = before[h.base_offset]
        assert h.last_offset_delta == old.last_offset_delta
        assert h.records_count == len(decode_records(data[pos:pos + h.size]))
    # a real client's parser agrees on offsets and values
    batches, parsed = MemoryRecords(data), []
    while (batch := batches.next_batch()) is not None:
        parsed += [(r.offset, r.key, r.value) for r in batch]
    assert parsed == [(o, k, v) for o, _, k, v in dump(clog)]


def test_timestamp_lookup_and_max_timestamp_after_cleaning(clog, cleaner) -> None:
    fill(clog, 120, keys=4)
    cleaner.clean(clog)
    kept = dump(clog)
    removed_ts = 1000 + 10  # offset 10 was superseded
    assert all(r[0] != 10 for r in kept)
    assert clog.offset_for_timestamp(removed_ts) == next(
        (o, t) for o, t, _, _ in kept if t >= removed_ts)
    assert clog.max_timestamp_entry() == (119, 1119)


def test_active_segment_is_never_touched(clog, cleaner) -> None:
    fill(clog, 150, keys=3)
    active = clog.segments[-1]
    content = active.read(0, active.size)
    inode = os.stat(active.log_path).st_ino
    before = dump(clog)
    cleaner.clean(clog)
    assert clog.segments[-1] is active
    assert active.read(0, active.size) == content
    assert os.stat(active.log_path).st_ino == inode
    # keys rewritten in the active segment still keep their older inactive copy
    assert [r for r in dump(clog) if r[0] >= active.base_offset] == \
        [r for r in before if r[0] >= active.base_offset]


def test_small_segments_are_merged_and_reopen_cleanly(clog, cleaner, tmp_path) -> None:
    fill(clog, 400, keys=5)
    segments_before = len(clog.segments)
    cleaner.clean(clog)
    assert len(clog.segments) == 2  # one cleaned segment (at base 0) + the active one
    assert clog.segments[0].base_offset == 0 and segments_before > 10
    after = dump(clog)
    put(clog, [(b"k1", b"more")])
    clog.close()
    again = reopen(tmp_path / "topic-0")
    assert dump(again)[:-1] == after
    assert again.log_start_offset == 0 and again.log_end_offset == 401
    again.close()


def test_keyless_records_already_in_the_log_are_dropped(open_log, cleaner) -> None:
    plog = open_log(dataclasses.replace(COMPACT, cleanup_policy="delete"))
    put(plog, [(None, b"no key"), (b"a", b"1")])
    plog.roll(0)
    plog.update_config(COMPACT)
    cleaner.clean(plog)
    assert [(k, v) for _, _, k, v in dump(plog)] == [(b"a", b"1")]


# ---- tombstones ---------------------------------------------------------------------


def test_tombstone_kept_for_delete_retention_then_removed(clog) -> None:
    put(clog, [(b"a", b"1"), (b"b", b"1")])
    put(clog, [(b"a", None)])
    clog.roll(0)
    put(clog, [(b"c", b"active")])
    age_segments(clog)
    retention = COMPACT.delete_retention_ms

    LogCleaner(lambda: T0 + retention - 1).clean(clog)
    assert [(k, v) for _, _, k, v in dump(clog)] == [(b"b", b"1"), (b"a", None),
                                                      (b"c", b"active")]
    # the rewrite kept the segment's mtime: the tombstone clock did not restart
    assert os.stat(clog.segments[0].log_path).st_mtime_ns == T0 * 1_000_000

    LogCleaner(lambda: T0 + retention + 1).clean(clog)
    assert [(k, v) for _, _, k, v in dump(clog)] == [(b"b", b"1"), (b"c", b"active")]
    assert clog.read(2, 1 << 20)[:8] == (3).to_bytes(8, "big")  # next batch: offset 3


def test_recent_segment_keeps_tombstone_old_segment_loses_it(clog) -> None:
    put(clog, [(b"x", None)])
    clog.roll(0)
    put(clog, [(b"y", None)])
    clog.roll(0)
    put(clog, [(b"z", b"active")])
    old, recent = clog.segments[:2]
    os.utime(old.log_path, ns=(T0 * 1_000_000,) * 2)
    os.utime(recent.log_path, ns=((T0 + 100_000) * 1_000_000,) * 2)
    LogCleaner(lambda: T0 + 90_000).clean(clog)
    assert [k for _, _, k, _ in dump(clog)] == [b"y", b"z"]


# ---- compression --------------------------------------------------------------------


@pytest.mark.parametrize("codec", [compression.GZIP, compression.ZSTD, compression.SNAPPY,
                                   compression.LZ4])
def test_compressed_batches_are_cleaned_and_keep_their_codec(clog, cleaner, codec) -> None:
    fill(clog, 150, keys=6, per_batch=5, compression=codec)
    before = dump(clog)
    active_base = clog.segments[-1].base_offset
    cleaner.clean(clog)
    assert dump(clog) == survivors(before, active_base)
    for _, h in iter_batches(clog.read(0, 1 << 30)):
        assert h.compression == codec


# ---- crash safety -------------------------------------------------------------------


@pytest.fixture
def twin_logs(tmp_path):
    """A compacted log with many segments, and a byte-identical copy cleaned without
    interruption: its content is the reference a recovered log must converge to."""
    path = tmp_path / "topic-0"
    plog = reopen(path)
    fill(plog, 300, keys=8, per_batch=2)
    original = dump(plog)
    plog.flush()
    shutil.copytree(path, tmp_path / "twin-0")
    twin = PartitionLog.open(tmp_path / "twin-0", COMPACT, "twin", 0, 0)
    LogCleaner(lambda: T0).clean(twin)
    reference = dump(twin)
    twin.close()
    yield plog, original, reference
    for segment in plog.segments:
        segment.close()


def check_recovered(path: Path, original: list[Row], reference: list[Row]) -> None:
    again = reopen(path)
    assert not list(path.glob("*.cleaned")) and not list(path.glob("*.swap"))
    recovered = dump(again)
    offsets = [r[0] for r in recovered]
    assert offsets == sorted(set(offsets))
    assert set(recovered) <= set(original) and set(reference) <= set(recovered)
    assert {k: v for _, _, k, v in recovered} == {k: v for _, _, k, v in original}
    LogCleaner(lambda: T0).clean(again)
    assert dump(again) == reference
    assert put(again, [(b"k0", b"after")]) == 300
    again.close()


def test_crash_before_commit_discards_cleaned_files(twin_logs, monkeypatch) -> None:
    plog, original, reference = twin_logs
    clean_until_crash(monkeypatch, plog, swap, "commit", now_ms=T0)
    assert list(plog.path.glob("*.log.cleaned"))
    again = reopen(plog.path)
    assert dump(again) == original
    again.close()
    check_recovered(plog.path, original, reference)


@pytest.mark.parametrize("calls", [1, 2])
def test_crash_after_commit_completes_the_swap(twin_logs, monkeypatch, calls) -> None:
    """Dies after the `.swap` rename: before deleting any old segment, or after one."""
    plog, original, reference = twin_logs
    first_group = None
    real_replace = PartitionLog.replace_segments

    def spy(self, old, base):
        nonlocal first_group
        first_group = [s.base_offset for s in old]
        return real_replace(self, old, base)

    monkeypatch.setattr(PartitionLog, "replace_segments", spy)
    clean_until_crash(monkeypatch, plog, LogSegment, "delete", calls, now_ms=T0)
    assert len(list(plog.path.glob("*.log.swap"))) == 1
    assert first_group is not None and len(first_group) > 1  # a merge was under way
    check_recovered(plog.path, original, reference)


def test_crash_after_install_reopens_cleaned_segment(twin_logs, monkeypatch) -> None:
    plog, original, reference = twin_logs
    clean_until_crash(monkeypatch, plog, LogSegment, "open", now_ms=T0)
    check_recovered(plog.path, original, reference)


def test_leftover_files_from_a_dead_cleaner(clog, tmp_path) -> None:
    fill(clog, 100, keys=4)
    before = dump(clog)
    base = clog.segments[1].base_offset
    for suffix in (".log", ".index", ".timeindex"):
        swap.cleaned_path(clog.path, base, suffix).write_bytes(b"\0" * 50)
    again = reopen(clog.path)
    assert dump(again) == before
    assert not list(clog.path.glob("*.cleaned"))
    again.close()


# ---- producers ----------------------------------------------------------------------


def test_idempotent_producer_continues_after_cleaning_and_restart(clog, cleaner) -> None:
    put(clog, [(b"a", b"1"), (b"b", b"1")], producer_id=PID, producer_epoch=0,
        base_sequence=0)
    put(clog, [(b"a", b"2"), (b"b", b"2")], producer_id=PID, producer_epoch=0,
        base_sequence=2)
    put(clog, [(b"a", b"3"), (b"b", b"3")])  # another writer supersedes everything
    clog.roll(0)
    put(clog, [(b"c", b"active")])

    cleaner.clean(clog)

    headers = [h for _, h in iter_batches(clog.read(0, 1 << 20))]
    assert [(h.base_offset, h.records_count, h.producer_id) for h in headers] == [
        (2, 0, PID), (4, 2, -1), (6, 1, -1)]  # the producer's last batch: header only
    assert headers[0].base_sequence == 2 and headers[0].last_offset_delta == 1
    batches, seen = MemoryRecords(clog.read(0, 1 << 20)), []
    while (batch := batches.next_batch()) is not None:
        seen.append((batch.next_offset, len(list(batch))))
    assert seen == [(4, 0), (6, 2), (7, 1)]  # kafka-python steps over the empty batch

    path = clog.path
    clog.close()
    for snapshot in path.glob("*.snapshot"):  # force a replay of the cleaned headers
        snapshot.unlink()
    again = reopen(path)
    retry = again.append(build_batch([(b"a", b"2", [], 0), (b"b", b"2", [], 0)],
                                     producer_id=PID, producer_epoch=0, base_sequence=2), 0)
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (2, 3)
    with pytest.raises(LogError) as exc:
        put(again, [(b"a", b"x")], producer_id=PID, producer_epoch=0, base_sequence=7)
    assert exc.value.code == E.out_of_order_sequence_number
    assert put(again, [(b"a", b"4")], producer_id=PID, producer_epoch=0,
               base_sequence=4) == 7
    again.close()


def test_empty_producer_batch_goes_once_the_producer_writes_again(clog, cleaner) -> None:
    put(clog, [(b"a", b"1")], producer_id=PID, producer_epoch=0, base_sequence=0)
    put(clog, [(b"a", b"2")])
    clog.roll(0)
    put(clog, [(b"z", b"z")])
    cleaner.clean(clog)
    assert [h.records_count for _, h in iter_batches(clog.read(0, 1 << 20))] == [0, 1, 1]
    put(clog, [(b"x", b"x")], producer_id=PID, producer_epoch=0, base_sequence=1)
    clog.roll(0)
    put(clog, [(b"y", b"y")])
    cleaner.clean(clog)
    assert [h.base_offset for _, h in iter_batches(clog.read(0, 1 << 20))] == [1, 2, 3, 4]


def test_aborted_transaction_data_goes_and_its_last_marker_stays(clog, cleaner) -> None:
    txn = build_batch([(b"a", b"txn", [], 1)], producer_id=PID, producer_epoch=0,
                      base_sequence=0, is_transactional=True)
    clog.append(txn, 0)
    marker = build_batch([(b"\0\0\0\0", b"\0\0\0\0\0\0", [], 2)], producer_id=PID,
                         producer_epoch=0, is_transactional=True, is_control=True)  # ABORT
    clog.append(marker, 0, origin_client=False)
    put(clog, [(b"a", b"plain")])
    put(clog, [(b"a", b"later")])
    clog.roll(0)
    put(clog, [(b"z", b"z")])
    age_segments(clog)
    cleaner.clean(clog)
    kept = clog.read(0, 1 << 20)
    # the aborted record is gone; its batch was the producer's last data batch, so it
    # stays emptied, and its marker stays with it
    assert [(h.base_offset, h.records_count) for _, h in iter_batches(kept)] == \
        [(0, 0), (1, 1), (3, 1), (4, 1)]


# ---- produce validation -------------------------------------------------------------


def test_keyless_produce_to_compacted_topic_is_invalid_record(open_log) -> None:
    plog = open_log(COMPACT)
    for items in ([(None, b"v")], [(b"k", b"v"), (None, b"v")]):
        with pytest.raises(LogError) as exc:
            put(plog, items)
        assert exc.value.code == E.invalid_record
    assert plog.log_end_offset == 0
    gz = build_batch([(None, b"v", [], 0)], compression=compression.GZIP)
    with pytest.raises(LogError):
        plog.append(gz, 0)
    assert plog.append(build_batch([(None, b"v", [], 0)]), 0, origin_client=False)
    plog.update_config(dataclasses.replace(COMPACT, cleanup_policy="delete"))
    assert put(plog, [(None, b"v")]) == 1


def test_keyless_produce_rejected_under_compact_delete(open_log) -> None:
    plog = open_log(dataclasses.replace(COMPACT, cleanup_policy="compact,delete"))
    with pytest.raises(LogError) as exc:
        put(plog, [(None, b"v")])
    assert exc.value.code == E.invalid_record


# ---- scheduling ---------------------------------------------------------------------


def test_dirty_ratio_gates_cleaning(tmp_path) -> None:
    manager = LogManager(tmp_path, lambda: T0)
    config = dataclasses.replace(COMPACT, segment_bytes=2048, min_cleanable_dirty_ratio=0.5)
    compacted = manager.create("c", 0, config)
    plain = manager.create("d", 0, dataclasses.replace(config, cleanup_policy="delete"))
    for plog in (compacted, plain):
        for i in range(200):  # 200 distinct keys: cleaning removes nothing
            put(plog, [(b"key-%03d" % i, b"v" * 40)])

    assert manager.cleaner.dirty_ratio(compacted) == 1.0  # never cleaned
    result = manager.run_cleaner(T0)
    assert list(result) == [("c", 0)] and isinstance(result[("c", 0)], CleanStats)
    assert (compacted.path / CHECKPOINT).read_text().strip() == \
        str(compacted.segments[-1].base_offset)
    assert manager.cleaner.dirty_ratio(compacted) == 0.0
    assert manager.run_cleaner(T0) == {}

    clean_bytes = sum(s.size for s in compacted.segments[:-1])
    while sum(s.size for s in compacted.segments[:-1]) - clean_bytes < clean_bytes / 3:
        put(compacted, [(b"key-000", b"w" * 40)])
    assert 0 < manager.cleaner.dirty_ratio(compacted) < 0.5
    assert manager.run_cleaner(T0) == {}
    while manager.cleaner.dirty_ratio(compacted) < 0.5:
        put(compacted, [(b"key-001", b"w" * 40)])
    assert manager.run_cleaner(T0, backoff_ms=15_000) == {}  # within the backoff
    assert list(manager.run_cleaner(T0 + 15_000, backoff_ms=15_000)) == [("c", 0)]
    manager.close_all()


def test_min_cleanable_dirty_ratio_config() -> None:
    from headwater.config import BrokerConfig

    assert LogConfig.resolve(BrokerConfig(), {}).min_cleanable_dirty_ratio == 0.5
    broker = BrokerConfig({"log.cleaner.min.cleanable.ratio": "0.2"})
    assert LogConfig.resolve(broker, {}).min_cleanable_dirty_ratio == 0.2
    assert LogConfig.resolve(broker, {"min.cleanable.dirty.ratio": "0.9"}) \
        .min_cleanable_dirty_ratio == 0.9
    validate_topic_config("min.cleanable.dirty.ratio", "0.01")
    for bad in ("1.5", "-0.1", "x", "nan"):
        with pytest.raises(ConfigError):
            validate_topic_config("min.cleanable.dirty.ratio", bad)
    assert BrokerConfig().get_int("log.cleaner.backoff.ms") == 15000


# ---- living alongside the event loop ------------------------------------------------


def test_cleaner_in_a_thread_while_appending_and_reading(clog) -> None:
    fill(clog, 200, keys=10)
    cleaner = LogCleaner(lambda: T0)
    stop = threading.Event()
    errors: list[BaseException] = []

    def clean_loop() -> None:
        try:
            while not stop.is_set():
                cleaner.clean(clog)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    worker = threading.Thread(target=clean_loop)
    worker.start()
    try:
        for i in range(200, 800):
            put(clog, [(b"k%d" % (i % 10), b"k%d=%d" % (i % 10, i))], ts=1000 + i)
            got = rows(clog.read(max(0, i - 50), 4096))
            assert got and [r[0] for r in got] == sorted({r[0] for r in got})
    finally:
        stop.set()
        worker.join()
    assert not errors
    cleaner.clean(clog)
    final = dump(clog)
    assert {k: v for _, _, k, v in final} == {b"k%d" % k: b"k%d=%d" % (k, 790 + k)
                                              for k in range(10)}
    assert len(clog.segments) <= 3


def test_emptied_first_segment_is_kept_then_expires_under_compact_delete(open_log) -> None:
    """Everything inactive was an expired tombstone's past: the first segment stays,
    empty, so the log start does not move; retention may later delete it by mtime."""
    config = dataclasses.replace(COMPACT, cleanup_policy="compact,delete",
                                 retention_ms=60_000)
    plog = open_log(config)
    put(plog, [(b"a", b"1")])
    plog.roll(0)
    put(plog, [(b"a", None)])
    plog.roll(0)
    put(plog, [(b"b", b"1")], ts=T0 + 10**6)
    age_segments(plog)
    LogCleaner(lambda: T0 + 10**6).clean(plog)
    assert [(s.base_offset, s.size) for s in plog.segments] == [(0, 0), (2, 70)]
    assert plog.log_start_offset == 0 and rows(plog.read(0, 1 << 20))[0][0] == 2
    plog.close()
    again = PartitionLog.open(plog.path, config, "topic", 0, 0)
    assert again.log_start_offset == 0 and rows(again.read(0, 1 << 20))[0][0] == 2
    assert again.apply_retention(T0 + 10**6) == 1  # the empty one, by its old mtime
    assert again.log_start_offset == 2 and len(again.segments) == 1
    again.close()


def test_log_changed_under_the_cleaner_stops_the_pass(clog, monkeypatch) -> None:
    fill(clog, 300, keys=8)
    real = PartitionLog.replace_segments

    def racing(self, old, base):  # DeleteRecords lands between reading and swapping
        self.delete_records_before(self.segments[2].base_offset)
        return real(self, old, base)

    monkeypatch.setattr(PartitionLog, "replace_segments", racing)
    before = dump(clog)
    stats = LogCleaner(lambda: T0).clean(clog)
    assert stats.bytes_after == stats.bytes_before and not list(clog.path.glob("*.cleaned"))
    assert dump(clog) == [r for r in before if r[0] >= clog.log_start_offset]
    assert not (clog.path / CHECKPOINT).exists()
    monkeypatch.undo()
    clog.close()
    assert LogCleaner(lambda: T0).clean(clog) == CleanStats(0, 0, 0, 0)


# ---- compaction lag -------------------------------------------------------------------


def test_min_compaction_lag_leaves_recent_records_alone(open_log) -> None:
    plog = open_log(dataclasses.replace(COMPACT, min_compaction_lag_ms=60_000))
    for i, ts in enumerate((T0, T0 + 100_000, T0 + 110_000)):
        put(plog, [(b"a", b"%d" % i)], ts=ts)
        plog.roll(0)
    put(plog, [(b"z", b"z")], ts=T0 + 110_000)  # the active segment
    LogCleaner(lambda: T0 + 120_000).clean(plog)  # only the first segment is old enough
    assert [v for _, _, _, v in dump(plog)] == [b"0", b"1", b"2", b"z"]
    LogCleaner(lambda: T0 + 10**6).clean(plog)  # later, all of them are
    assert [v for _, _, _, v in dump(plog)] == [b"2", b"z"]


def test_max_compaction_lag_cleans_below_the_dirty_ratio_and_rolls(tmp_path) -> None:
    config = dataclasses.replace(COMPACT, min_cleanable_dirty_ratio=0.99,
                                 max_compaction_lag_ms=60_000)
    manager = LogManager(tmp_path, lambda: T0)
    plog = manager.create("t", 0, config)
    for i in range(6):
        put(plog, [(b"k%d" % i, b"old")], ts=T0)
        plog.roll(0)
    assert manager.run_cleaner(T0)  # everything dirty: the ratio says clean
    put(plog, [(b"k0", b"new")], ts=T0 + 1000)
    plog.roll(0)
    put(plog, [(b"z", b"z")], ts=T0 + 1000)
    assert LogCleaner(lambda: T0).dirty_ratio(plog) < 0.99
    assert not manager.run_cleaner(T0 + 2000)  # below the ratio, within the lag
    assert (b"k0", b"old") in [(k, v) for _, _, k, v in dump(plog)]
    assert manager.run_cleaner(T0 + 62_000)  # the dirty record waited longer than the lag
    assert (b"k0", b"old") not in [(k, v) for _, _, k, v in dump(plog)]
    # the active segment rolls once its first record is older than the lag
    active = plog.segments[-1].base_offset
    plog.append(build_batch([(b"y", b"y", [], T0 + 70_000)]), T0 + 70_000)
    assert plog.segments[-1].base_offset > active
    manager.close_all()
