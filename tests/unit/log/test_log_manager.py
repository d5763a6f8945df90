"""LogManager: partition directories, clean-shutdown marker, retention and flush scheduling."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from headwater.config import LogConfig
from headwater.log.manager import CLEAN_SHUTDOWN_MARKER, LogManager, parse_partition_dir
from headwater.records.batch import build_batch

CONFIG = LogConfig(segment_bytes=1024, index_interval_bytes=128)


def one_batch(ts: int = 1) -> bytes:
    return build_batch([(None, b"v" * 50, [], ts)])


def test_create_get_discover_delete(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, lambda: 0)
    orders = manager.create("my-orders", 2, CONFIG)
    assert manager.create("my-orders", 2, CONFIG) is orders
    assert manager.get("my-orders", 2) is orders and manager.get("my-orders", 3) is None
    manager.create("b", 0, CONFIG)
    assert (tmp_path / "my-orders-2").is_dir()
    assert manager.discover() == [("b", 0), ("my-orders", 2)]
    assert sorted(log.topic for log in manager.all()) == ["b", "my-orders"]
    assert manager.delete("my-orders", 2)
    assert not (tmp_path / "my-orders-2").exists() and manager.get("my-orders", 2) is None
    assert not manager.delete("my-orders", 2)
    manager.close_all()


def test_parse_partition_dir() -> None:
    assert parse_partition_dir("a-b-12") == ("a-b", 12)
    assert parse_partition_dir("__consumer_offsets-0") == ("__consumer_offsets", 0)
    assert parse_partition_dir("noindex") is None and parse_partition_dir("x-") is None


def test_clean_shutdown_marker_lifecycle(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, lambda: 0)
    assert not manager.clean_start
    manager.create("t", 0, CONFIG).append(one_batch(), 0)
    manager.close_all()
    assert (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()

    manager = LogManager(tmp_path, lambda: 0)
    assert manager.clean_start
    assert not (tmp_path / CLEAN_SHUTDOWN_MARKER).exists(), "removed while running"
    assert manager.open_existing("t", 1, CONFIG) is None
    plog = manager.open_existing("t", 0, CONFIG)
    assert plog is not None and plog.log_end_offset == 1
    manager.close_all()


def test_run_retention_over_all_logs(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, lambda: 0)
    config = dataclasses.replace(CONFIG, retention_ms=1_000)
    logs = [manager.create("t", p, config) for p in range(2)]
    for plog in logs:
        for _ in range(40):
            plog.append(one_batch(ts=5_000), 0)
    assert manager.run_retention(now_ms=5_500) == 0
    per_log = [len(plog.segments) for plog in logs]
    assert manager.run_retention(now_ms=7_000) == sum(per_log)
    assert all(plog.log_start_offset == plog.log_end_offset == 40 for plog in logs)
    manager.close_all()


def test_flush_due_honours_flush_ms(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, lambda: 1_000)
    plog = manager.create("t", 0, dataclasses.replace(CONFIG, flush_ms=500))
    assert manager.flush_due(now_ms=5_000) == 0  # nothing written yet
    plog.append(one_batch(), 0)
    assert manager.flush_due(now_ms=1_400) == 0
    assert manager.flush_due(now_ms=1_500) == 1
    assert plog.unflushed_messages == 0 and not plog.segments[-1].dirty
    plog.append(one_batch(), 0)
    assert manager.flush_due(now_ms=1_600) == 0
    manager.close_all()


def test_lazy_partitions_open_at_first_get_or_in_slices(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, lambda: 0)
    for p in range(5):
        manager.create("t", p, CONFIG).append(one_batch(), 0)
    manager.close_all()

    manager = LogManager(tmp_path, lambda: 0)
    for p in range(5):
        manager.add_lazy("t", p, CONFIG)
    manager.add_lazy("t", 9, CONFIG)  # in the image, not on disk: created at once
    assert manager.pending == 5 and sorted(log.partition for log in manager.all()) == [9]
    assert manager.get("t", 3).log_end_offset == 1 and manager.pending == 4
    manager.delete("t", 4)
    assert manager.pending == 3 and not (tmp_path / "t-4").exists()
    assert manager.open_pending(2) == 1 and manager.open_pending(2) == 0
    assert sorted(log.partition for log in manager.all()) == [0, 1, 2, 3, 9]
    manager.close_all()


def test_an_unclean_start_stopped_before_every_partition_opened_stays_unclean(
        tmp_path: Path) -> None:
    """A partition never opened was never recovered: the next start must still do it."""
    manager = LogManager(tmp_path, lambda: 0)
    manager.create("t", 0, CONFIG).append(one_batch(), 0)
    manager.create("t", 1, CONFIG).append(one_batch(), 0)  # no close_all: a crash

    manager = LogManager(tmp_path, lambda: 0)
    assert not manager.clean_start
    manager.add_lazy("t", 0, CONFIG)
    manager.add_lazy("t", 1, CONFIG)
    manager.get("t", 0)
    manager.close_all()
    assert not (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()

    manager = LogManager(tmp_path, lambda: 0)  # recovers both, opened or not
    manager.add_lazy("t", 0, CONFIG)
    manager.add_lazy("t", 1, CONFIG)
    assert manager.open_pending(10) == 0
    manager.close_all()
    assert (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()

    manager = LogManager(tmp_path, lambda: 0)  # a clean start may stop with some unopened
    manager.add_lazy("t", 0, CONFIG)
    manager.add_lazy("t", 1, CONFIG)
    manager.close_all()
    assert (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()


def test_closing_a_log_unchanged_since_it_opened_writes_nothing(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, lambda: 0)
    manager.create("t", 0, CONFIG).append(one_batch(), 0)
    manager.close_all()
    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "t-0").iterdir()}

    manager = LogManager(tmp_path, lambda: 0)
    assert manager.open_existing("t", 0, CONFIG).log_end_offset == 1
    manager.close_all()
    after = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "t-0").iterdir()}
    assert after == before

    manager = LogManager(tmp_path, lambda: 0)
    manager.open_existing("t", 0, CONFIG).append(one_batch(), 0)
    manager.close_all()
    changed = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "t-0").iterdir()}
    assert changed != before and "00000000000000000002.snapshot" in changed
