"""Produce's transaction verification with a fake transaction coordinator over a real
partition log: when a transactional batch may open a transaction, and Kafka's codes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.config import LogConfig
from headwater.coordinator.runtime import NotReady
from headwater.log.partition_log import PartitionLog
from headwater.records.batch import build_batch
from headwater.txn.verification import ProduceVerification

TP = tuple[str, int]


class FakeTransactions:
    def __init__(self, code: int = 0, not_ready: bool = False) -> None:
        self.code, self.not_ready = code, not_ready
        self.calls: list[tuple[str, int, int, list[TP]]] = []

    def add_partitions(self, txn_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TP], client_tv: int = 0) -> int:
        self.calls.append(("add", producer_id, producer_epoch, list(partitions)))
        if self.not_ready:
            raise NotReady(E.coordinator_load_in_progress)
        return self.code

    def verify_partitions(self, txn_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TP]) -> dict[TP, int]:
        parts = list(partitions)
        self.calls.append(("verify", producer_id, producer_epoch, parts))
        if self.not_ready:
            raise NotReady(E.coordinator_load_in_progress)
        return {tp: self.code for tp in parts}


@pytest.fixture
def part(tmp_path: Path) -> Iterator[PartitionLog]:
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), "t", 0, 0)
    yield plog
    plog.close()


def txn_batch(seq: int = 0, pid: int = 5) -> bytes:
    return build_batch([(b"k", b"v", [], 1)], producer_id=pid, producer_epoch=0,
                       base_sequence=seq, is_transactional=True)


def code_of(verifier: ProduceVerification, part: PartitionLog, version: int,
            records: bytes | None = None, added: dict[TP, int] | None = None) -> int | None:
    refused = verifier.refusal("tx", "t", part, records or txn_batch(), version, added or {})
    return None if refused is None else refused[0]


def test_only_a_transactional_batch_opening_a_transaction_is_checked(
        part: PartitionLog) -> None:
    txns = FakeTransactions(code=E.invalid_txn_state)
    verifier = ProduceVerification(txns, True)
    plain = build_batch([(b"k", b"v", [], 1)])
    assert code_of(verifier, part, 9, plain) is None
    assert code_of(ProduceVerification(txns, False), part, 9) is None  # switched off
    assert verifier.refusal(None, "t", part, txn_batch(), 9, {}) is None  # no txn id
    assert txns.calls == []
    part.append(txn_batch(), 0)  # the transaction is open here now
    assert code_of(verifier, part, 9, txn_batch(seq=1)) is None


def test_kafkas_codes_by_version(part: PartitionLog) -> None:
    assert code_of(ProduceVerification(FakeTransactions(E.transaction_abortable), True),
                   part, 10) == E.invalid_txn_state
    assert code_of(ProduceVerification(FakeTransactions(E.transaction_abortable), True),
                   part, 11) == E.transaction_abortable
    assert code_of(ProduceVerification(FakeTransactions(E.producer_fenced), True),
                   part, 11) == E.invalid_producer_epoch
    assert code_of(ProduceVerification(FakeTransactions(not_ready=True), True),
                   part, 11) == E.not_enough_replicas
    assert code_of(ProduceVerification(FakeTransactions(E.concurrent_transactions), True),
                   part, 11) == E.not_enough_replicas
    # A version 2 client retries CONCURRENT_TRANSACTIONS itself.
    assert code_of(ProduceVerification(FakeTransactions(E.concurrent_transactions), True),
                   part, 12) == E.concurrent_transactions
    assert code_of(ProduceVerification(None, True), part, 11) == E.not_enough_replicas


def test_version_2_adds_and_wants_sequence_0_first(part: PartitionLog) -> None:
    txns = FakeTransactions()
    verifier = ProduceVerification(txns, True)
    assert code_of(verifier, part, 12) is None
    assert txns.calls == [("add", 5, 0, [("t", 0)])]
    assert code_of(verifier, part, 12, txn_batch(seq=3)) == E.out_of_order_sequence_number
    assert code_of(verifier, part, 12, added={("t", 0): 0}) is None
    assert len(txns.calls) == 2  # the request's implicit add answered the last one
    assert code_of(verifier, part, 11) is None and txns.calls[-1][0] == "verify"


def test_implicit_adds_are_one_call_per_producer() -> None:
    txns = FakeTransactions()
    codes = ProduceVerification(txns, True).add_implicitly(
        "tx", {(5, 0): [("t", 0), ("t", 1)], (6, 2): [("u", 0)]})
    assert codes == {("t", 0): 0, ("t", 1): 0, ("u", 0): 0}
    assert [c[1:3] for c in txns.calls] == [(5, 0), (6, 2)]
