"""Transaction-shard test context: a TxnShard over a fake clock and timer, plus a
group-shard context that writes transactionally and replays markers."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from headwater.config import BrokerConfig
from headwater.coordinator.record_codec import CoordinatorRecord
from headwater.coordinator.runtime import Result
from headwater.group.shard import GroupShard
from headwater.txn.config import TxnConfig
from headwater.txn.records import CODEC
from headwater.txn.shard import MarkerJob, TxnShard
from headwater.txn.state import TxnState
from tests.support.coordinator import ShardContext
from tests.unit.group.context import GroupContext

TXN_DEFAULTS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
                "transactional.id.expiration.ms": "600000",
                "transaction.remove.expired.transaction.cleanup.interval.ms": "60000"}


class TxnContext(ShardContext):
    """Drives one TxnShard. Producer ids come from a counter starting at 1000; `markers`
    plays the marker writer: it completes every Prepare* transaction, returning the jobs
    (what would have been written to the data partitions)."""

    def __init__(self, **config: str) -> None:
        self.config = TxnConfig.from_broker(BrokerConfig({**TXN_DEFAULTS, **config}))
        self.pids = itertools.count(1000)
        super().__init__(lambda timer: TxnShard(0, timer, self.config,
                                                lambda: next(self.pids)), CODEC)

    # ---- client calls --------------------------------------------------------------
    def init(self, txn_id: str = "tx", timeout_ms: int = 5000,
             expected: tuple[int, int] | None = None) -> tuple[int, int, int]:
        return tuple(self.write(lambda s, now: s.init_producer_id(txn_id, timeout_ms,
                                                                  expected, now)))

    def add(self, pid: int, epoch: int, *partitions: tuple[str, int],
            txn_id: str = "tx") -> int:
        return self.write(lambda s, now: s.add_partitions(txn_id, pid, epoch, partitions, now))

    def end(self, pid: int, epoch: int, commit: bool, txn_id: str = "tx") -> int:
        """EndTxn v4 and older (transaction version 0/1): the error code."""
        return self.write(lambda s, now: s.end_txn(txn_id, pid, epoch, commit, now)).error

    def end_v2(self, pid: int, epoch: int, commit: bool,
               txn_id: str = "tx") -> tuple[int, int, int]:
        """EndTxn v5 (transaction version 2): (error, producer id, producer epoch)."""
        return tuple(self.write(lambda s, now: s.end_txn(txn_id, pid, epoch, commit, now, 2)))

    def add_v2(self, pid: int, epoch: int, *partitions: tuple[str, int],
               txn_id: str = "tx") -> int:
        """The implicit add of a Produce v12 / TxnOffsetCommit v5."""
        return self.write(lambda s, now: s.add_partitions(txn_id, pid, epoch, partitions,
                                                          now, 2))

    def markers(self) -> list[MarkerJob]:
        jobs = self.shard.pending_markers()
        for job in jobs:
            self.write(lambda s, now, job=job: s.complete(job, now))
        return jobs

    # ---- state ---------------------------------------------------------------------
    def state(self, txn_id: str = "tx") -> TxnState:
        return self.shard.txns[txn_id].state

    def meta(self, txn_id: str = "tx") -> Any:
        return self.shard.txns[txn_id]

    def states_written(self) -> list[str]:
        return [TxnState(r.value["transaction_status"]).kafka_name if r.value else "tombstone"
                for r in self.last_records]


class TxnGroupContext(GroupContext):
    """A group shard whose writes may carry a producer id (TxnOffsetCommit) and which
    receives markers; `replayed()` rebuilds from both, in log order."""

    def __init__(self, topics: dict[str, int] | None = None, **config: str) -> None:
        super().__init__(topics, **config)
        self.entries: list[tuple[int, int, CoordinatorRecord | bool]] = []

    def write(self, op: Callable[[Any, int], Result], producer_id: int = -1,
              producer_epoch: int = -1) -> Any:
        result = op(self.shard, self.now)
        self._append(result.records, producer_id, producer_epoch)
        return result.response

    def _append(self, records: list[CoordinatorRecord], producer_id: int = -1,
                producer_epoch: int = -1) -> None:
        self.last_records = []
        for record in records:
            key, value = self.codec.encode(record)
            decoded = self.codec.decode(key, value)
            assert decoded is not None
            self.last_records.append(decoded)
            self.shard.replay(len(self.entries), producer_id, producer_epoch, decoded)
            self.entries.append((producer_id, producer_epoch, decoded))
            self.log.append(decoded)

    def marker(self, producer_id: int, producer_epoch: int, commit: bool) -> None:
        self.shard.replay_end_transaction(producer_id, producer_epoch, commit,
                                          len(self.entries))
        self.entries.append((producer_id, producer_epoch, commit))

    def replayed(self) -> GroupShard:
        shard = self.factory(type(self.timer)(self))
        for offset, (pid, epoch, entry) in enumerate(self.entries):
            if isinstance(entry, bool):
                shard.replay_end_transaction(pid, epoch, entry, offset)
            else:
                shard.replay(offset, pid, epoch, entry)
        shard.on_loaded(self.now)
        return shard
