"""LogManager: partition directories, clean-shutdown marker, retention and flush scheduling."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from headwater.config import LogConfig
from headwater.log.batch import build_batch
from headwater.log.manager import CLEAN_SHUTDOWN_MARKER, LogManager, parse_partition_dir

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
