"""TxnOffsetCommit's steps with fakes of both coordinators: the transaction must hold the
group's partition (verified before v5, added from v5), then the group writes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from kio.schema.errors import ErrorCode as E

from headwater.coordinator.runtime import NotReady
from headwater.storage.errors import LogError
from headwater.txn.offset_commit import TxnOffsetCommitter

TP = tuple[str, int]


class Commit(NamedTuple):
    partition: int
    offset: int


class FakeTransactions:
    def __init__(self, code: int = 0, not_ready: bool = False) -> None:
        self.code, self.not_ready = code, not_ready
        self.calls: list[tuple[str, list[TP]]] = []

    def add_partitions(self, txn_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TP], client_tv: int = 0) -> int:
        self.calls.append(("add", list(partitions)))
        if self.not_ready:
            raise NotReady(E.coordinator_load_in_progress)
        return self.code

    def verify_partitions(self, txn_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TP]) -> dict[TP, int]:
        parts = list(partitions)
        self.calls.append(("verify", parts))
        return {tp: self.code for tp in parts}

    def pending_commits(self, txn_id: str) -> None:
        return None  # one node: nothing waits for a commit


class FakeGroups:
    def __init__(self, fail: Exception | None = None) -> None:
        self.fail = fail
        self.written: list[tuple[str, int, int]] = []

    def partition_for(self, group_id: str) -> int:
        return 7

    def pending_commits(self, group_id: str) -> None:
        return None

    def commit_transactional(self, group_id: str, member_id: str, instance_id: str | None,
                             generation: int, commits: Sequence[tuple[str, list[Commit]]],
                             producer_id: int, producer_epoch: int
                             ) -> Mapping[str, Mapping[int, int]]:
        if self.fail is not None:
            raise self.fail
        self.written.append((group_id, producer_id, producer_epoch))
        return {t: {c.partition: 0 for c in cs} for t, cs in commits}


COMMITS = [("t", [Commit(0, 5), Commit(1, 9)])]


def commit(txns: FakeTransactions, groups: FakeGroups, version: int) -> dict[TP, int]:
    return TxnOffsetCommitter(txns, groups).commit("tx", 3, 1, "g", "", None, -1, COMMITS,
                                                   version)


def test_v5_adds_the_group_partition_then_writes() -> None:
    txns, groups = FakeTransactions(), FakeGroups()
    assert commit(txns, groups, 5) == {("t", 0): 0, ("t", 1): 0}
    assert txns.calls == [("add", [("__consumer_offsets", 7)])]
    assert groups.written == [("g", 3, 1)]


def test_before_v5_the_partition_must_already_be_in_the_transaction() -> None:
    txns, groups = FakeTransactions(code=E.invalid_txn_state), FakeGroups()
    assert set(commit(txns, groups, 4).values()) == {E.invalid_txn_state}
    assert txns.calls == [("verify", [("__consumer_offsets", 7)])] and not groups.written


def test_kafkas_error_mapping() -> None:
    abortable = FakeTransactions(code=E.transaction_abortable)
    assert set(commit(abortable, FakeGroups(), 3).values()) == {E.invalid_txn_state}
    assert set(commit(abortable, FakeGroups(), 4).values()) == {E.transaction_abortable}
    fenced = FakeTransactions(code=E.producer_fenced)
    assert set(commit(fenced, FakeGroups(), 5).values()) == {E.invalid_producer_epoch}
    loading = FakeTransactions(not_ready=True)
    assert set(commit(loading, FakeGroups(), 5).values()) == {E.coordinator_load_in_progress}
    refused = FakeGroups(fail=LogError(E.invalid_producer_epoch, "fenced by the log"))
    assert set(commit(FakeTransactions(), refused, 5).values()) == {E.invalid_producer_epoch}
