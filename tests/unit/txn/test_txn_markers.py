"""The coordinator service's marker writer, over a real `__transaction_state` log and
fake data partitions: markers go to every partition once, a partition that cannot take
one yet is retried without re-marking the others, then Complete* is written."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from headwater.config import BrokerConfig, LogConfig
from headwater.coordinator.runtime import NotReady
from headwater.log.partition_log import PartitionLog
from headwater.metadata.image import MetadataImage
from headwater.txn.coordinator import TOPIC, TransactionCoordinator
from headwater.txn.state import TxnState


class FakePartition:
    def __init__(self) -> None:
        self.markers: list[tuple[int, int, bool, int]] = []

    def append_marker(self, pid: int, epoch: int, commit: bool, coordinator_epoch: int,
                      now_ms: int, transaction_version: int = 0) -> int:
        self.markers.append((pid, epoch, commit, coordinator_epoch))
        return len(self.markers) - 1


class FakeGroupRuntime:
    """`__consumer_offsets`: loading (NotReady) until `ready`."""

    def __init__(self) -> None:
        self.ready = False
        self.markers: list[tuple[int, int, int, bool]] = []

    def write_marker(self, partition: int, pid: int, epoch: int, commit: bool,
                     coordinator_epoch: int, transaction_version: int = 0) -> int:
        if not self.ready:
            raise NotReady(14)
        self.markers.append((partition, pid, epoch, commit))
        return 0

    def settled(self) -> None:
        return None  # one node: an append is as durable as it gets


class FakeGroups:
    def __init__(self) -> None:
        self.runtime = FakeGroupRuntime()


class FakeController:
    def __init__(self) -> None:
        self.next = 500

    def allocate_producer_id(self) -> int:
        self.next += 1
        return self.next

    def ensure_internal_topic(self, name: str, num_partitions: int,
                              configs: object) -> int:
        return num_partitions


class FakeBroker:
    def __init__(self, txn_log: PartitionLog) -> None:
        self.config = BrokerConfig({"transaction.state.log.num.partitions": "1"})
        self.image = MetadataImage()
        self.controller = FakeController()
        self.groups = FakeGroups()
        self.coordinator_key_types: set[int] = {0}
        self.txn_log = txn_log
        self.data = {("t", 0): FakePartition(), ("t", 1): FakePartition()}

    def partition(self, topic: str, partition: int):
        if topic == TOPIC:
            return self.txn_log if partition == 0 else None
        return self.data.get((topic, partition))

    def now_ms(self) -> int:
        return 1_000_000

    def commit(self, partitions: object) -> None:
        return None  # durable at once


def coordinator_over(broker: FakeBroker) -> TransactionCoordinator:
    """A coordinator given what it uses, all faked by `broker`."""
    return TransactionCoordinator(
        broker.config, image=lambda: broker.image, partitions=broker,
        topics=broker.controller, clock=broker.now_ms, producer_ids=broker.controller,
        offsets=broker.groups.runtime)


@pytest.fixture
def broker(tmp_path: Path):
    log = PartitionLog.open(tmp_path / f"{TOPIC}-0", LogConfig(cleanup_policy="compact"),
                            TOPIC, 0, 0)
    yield FakeBroker(log)
    log.close()


def test_markers_are_written_once_each_and_a_loading_offsets_partition_is_retried(broker):
    async def story() -> None:
        txns = coordinator_over(broker)
        await txns.runtime._load_all()
        error, pid, epoch = txns.init_producer_id("tx", 5000, None)
        assert (error, pid, epoch) == (0, 501, 0)
        parts = [("t", 0), ("t", 1), ("__consumer_offsets", 3)]
        assert txns.add_partitions("tx", pid, epoch, parts) == 0
        assert txns.end_txn("tx", pid, epoch, commit=True).error == 0
        # The data partitions have their markers; __consumer_offsets is still loading.
        assert broker.data[("t", 0)].markers == [(pid, epoch, True, 0)]
        assert broker.data[("t", 1)].markers == [(pid, epoch, True, 0)]
        assert txns.describe("tx")["transaction_state"] == "PrepareCommit"
        assert 0 in txns._retries  # a retry is armed
        # Meanwhile the client is told to wait.
        assert txns.add_partitions("tx", pid, epoch, [("t", 0)]) == 51
        broker.groups.runtime.ready = True
        txns._retries.pop(0).cancel()
        txns._drive(0)  # what the retry timer does
        assert broker.groups.runtime.markers == [(3, pid, epoch, True)]
        assert broker.data[("t", 0)].markers == [(pid, epoch, True, 0)]  # not re-marked
        assert txns.describe("tx")["transaction_state"] == "CompleteCommit"
        # A restart finds nothing owed.
        again = coordinator_over(broker)
        await again.runtime._load_all()
        shard = again.runtime.shard(0)
        assert shard.pending_markers() == []
        assert shard.txns["tx"].state is TxnState.COMPLETE_COMMIT
        await txns.stop()
        await again.stop()

    asyncio.run(story())


def test_a_prepare_found_on_load_is_completed(broker):
    async def story() -> None:
        txns = coordinator_over(broker)
        await txns.runtime._load_all()
        _, pid, epoch = txns.init_producer_id("tx", 5000, None)
        txns.add_partitions("tx", pid, epoch, [("t", 1), ("__consumer_offsets", 0)])
        txns.end_txn("tx", pid, epoch, commit=False)  # offsets partition not ready
        assert txns.describe("tx")["transaction_state"] == "PrepareAbort"
        await txns.stop()
        # "Restart": a new coordinator over the same log, now with everything loaded.
        broker.groups.runtime.ready = True
        broker.data[("t", 1)].markers.clear()
        again = coordinator_over(broker)
        await again.runtime._load_all()
        assert again.describe("tx")["transaction_state"] == "CompleteAbort"
        assert broker.data[("t", 1)].markers == [(pid, epoch, False, 0)]
        assert broker.groups.runtime.markers == [(0, pid, epoch, False)]
        await again.stop()

    asyncio.run(story())
