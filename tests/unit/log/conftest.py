"""Fixtures for the partition-log tests: small configs, a log factory, batch builders."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from headwater.config import LogConfig
from headwater.log.partition_log import PartitionLog
from headwater.records.batch import build_batch

BatchFactory = Callable[..., bytes]


@pytest.fixture
def config() -> LogConfig:
    """Tiny segments and a dense index, so a few batches exercise rolls and lookups."""
    return LogConfig(segment_bytes=1024, index_interval_bytes=128, retention_ms=-1)


@pytest.fixture
def batch() -> BatchFactory:
    """batch(n=1, ts=1000, size=20, **build_batch kwargs) -> n records with distinct keys."""

    def make(n: int = 1, ts: int = 1000, size: int = 20, **kwargs) -> bytes:
        records = [(f"k{i}".encode(), bytes([65 + i % 26]) * size, [], ts + i) for i in range(n)]
        return build_batch(records, **kwargs)

    return make


@pytest.fixture
def open_log(tmp_path: Path, config: LogConfig) -> Callable[..., PartitionLog]:
    """open_log(config=None, now_ms=0, clean_shutdown=False) on one partition directory;
    every log opened this way is closed (or its fds released) at teardown."""
    opened: list[PartitionLog] = []

    def make(cfg: LogConfig | None = None, now_ms: int = 0,
             clean_shutdown: bool = False) -> PartitionLog:
        plog = PartitionLog.open(tmp_path / "topic-0", cfg or config, "topic", 0, now_ms,
                                 clean_shutdown=clean_shutdown)
        opened.append(plog)
        return plog

    yield make
    for plog in opened:
        for segment in plog.segments:
            segment.close()
