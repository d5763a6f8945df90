"""The coordinator runtime's transaction support over a real partition log: writes under
a producer id, markers through `write_marker`, and loading that replays both."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from headwater.config import BrokerConfig, LogConfig
from headwater.coordinator.runtime import CoordinatorRuntime
from headwater.group import records as R
from headwater.group.config import GroupConfig
from headwater.group.offsets import PartitionCommit
from headwater.group.shard import GroupShard
from headwater.log.partition_log import PartitionLog
from headwater.storage.errors import LogError
from tests.unit.group.context import image_with

TOPIC = "__consumer_offsets"
INVALID_PRODUCER_EPOCH = 47


class FakeBroker:
    """What the runtime needs: partitions, its internal topic and a clock."""

    def __init__(self, plog: PartitionLog) -> None:
        self.plog = plog
        self.now = 1_000_000

    def partition(self, topic: str, partition: int) -> PartitionLog | None:
        return self.plog if (topic, partition) == (TOPIC, 0) else None

    def now_ms(self) -> int:
        return self.now

    def ensure_internal_topic(self, name: str, num_partitions: int,
                              configs: Mapping[str, str]) -> int:
        return num_partitions


@pytest.fixture
def plog(tmp_path: Path):
    opened: list[PartitionLog] = []

    def open_log() -> PartitionLog:
        log = PartitionLog.open(tmp_path / f"{TOPIC}-0", LogConfig(cleanup_policy="compact"),
                                TOPIC, 0, 0)
        opened.append(log)
        return log

    yield open_log
    for log in opened:
        log.close()


def runtime_over(broker: FakeBroker) -> CoordinatorRuntime:
    config = GroupConfig.from_broker(BrokerConfig({}))
    image = image_with({"t": 2})
    return CoordinatorRuntime(TOPIC, 1, R.CODEC,
                              lambda p, timer: GroupShard(p, timer, config, lambda: image), {},
                              partitions=broker, topics=broker, clock=broker.now_ms)


def commit(runtime: CoordinatorRuntime, offset: int, pid: int, epoch: int,
           partition: int = 0) -> Any:
    return runtime.write(0, lambda s, now: s.offsets.commit_transactional(
        "g", "", None, -1, [("t", [PartitionCommit(partition, offset)])], now), pid, epoch,
        transactional=True)


def committed(runtime: CoordinatorRuntime) -> dict[int, int]:
    shard = runtime.shard(0)
    return {p: c.offset for p, c in shard.offsets.offsets.get("g", {}).get("t", {}).items()}


def test_markers_resolve_pending_offsets_live_and_after_a_reload(plog):
    async def story() -> None:
        broker = FakeBroker(plog())
        runtime = runtime_over(broker)
        await runtime._load_all()
        assert commit(runtime, 10, pid=7, epoch=0) == {"t": {0: 0}}
        assert commit(runtime, 20, pid=8, epoch=0, partition=1) == {"t": {1: 0}}
        # Both transactions hold the partition's last stable offset back.
        assert broker.plog.last_stable_offset == 0
        runtime.write_marker(0, 7, 0, commit=True, coordinator_epoch=0)
        assert committed(runtime) == {0: 10}
        assert commit(runtime, 30, pid=9, epoch=0) == {"t": {0: 0}}
        runtime.write_marker(0, 9, 0, commit=False, coordinator_epoch=0)
        assert committed(runtime) == {0: 10}
        live = runtime.shard(0).offsets
        # A second runtime loads the same log: the same committed and pending offsets.
        again = runtime_over(broker)
        await again._load_all()
        loaded = again.shard(0).offsets
        assert loaded.offsets == live.offsets
        assert loaded.pending == live.pending and set(loaded.pending) == {8}
        again.write_marker(0, 8, 0, commit=True, coordinator_epoch=0)
        assert committed(again) == {0: 10, 1: 20}
        assert broker.plog.last_stable_offset == broker.plog.high_watermark
        await runtime.stop()
        await again.stop()

    asyncio.run(story())


def test_a_write_under_a_fenced_epoch_is_refused_and_changes_nothing(plog):
    async def story() -> None:
        broker = FakeBroker(plog())
        runtime = runtime_over(broker)
        await runtime._load_all()
        commit(runtime, 10, pid=7, epoch=1)
        runtime.write_marker(0, 7, 2, commit=False, coordinator_epoch=0)  # fenced at epoch 2
        with pytest.raises(LogError) as err:
            commit(runtime, 11, pid=7, epoch=1)
        assert err.value.code == INVALID_PRODUCER_EPOCH
        assert runtime.shard(0).offsets.pending == {}
        await runtime.stop()

    asyncio.run(story())
