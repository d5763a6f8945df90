"""A partition's owner answering UNKNOWN_TOPIC_OR_PARTITION for a topic the coordinator
knows (a broker just started, its metadata image behind) gets its marker again, as
Kafka's coordinator retries it; only a topic the coordinator's own image lacks (deleted)
takes no marker. Skipped, the marker left the transaction open on that partition for
good: read_committed consumers stopped at it (the short fault campaign in CI)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.shared.txn_remote import MarkerSender
from headwater.txn.coordinator import TransactionCoordinator
from headwater.txn.shard import MarkerJob

T_ID = uuid.uuid4()


def _image() -> Any:
    topics = {"t": SimpleNamespace(partitions=[object(), object()])}
    return SimpleNamespace(topic=topics.get)


def test_an_owner_that_does_not_know_a_known_topic_is_asked_again() -> None:
    coordinator = object.__new__(TransactionCoordinator)
    coordinator._image = _image
    job = MarkerJob("tx", 7, 0, True, frozenset({("t", 1), ("gone", 0)}))
    done: set[tuple[str, int]] = set()
    assert coordinator._settle(job, ("t", 1), E.unknown_topic_or_partition, done) is False
    assert done == set()
    assert coordinator._settle(job, ("gone", 0), E.unknown_topic_or_partition, done)
    assert coordinator._settle(job, ("t", 1), 0, done)
    assert done == {("t", 1), ("gone", 0)}


@pytest.mark.parametrize(("known", "answered"), [
    (True, E.not_leader_or_follower), (False, E.unknown_topic_or_partition)])
def test_the_owners_unknown_topic_is_retriable_where_the_coordinator_knows_it(
        known: bool, answered: int) -> None:
    async def call(*_args: object) -> Any:
        partition = SimpleNamespace(partition_index=1,
                                    error_code=E.unknown_topic_or_partition)
        return SimpleNamespace(markers=[SimpleNamespace(topics=[
            SimpleNamespace(name="t", partitions=[partition])])])

    node: Any = SimpleNamespace(peers=SimpleNamespace(call=call))  # its connections
    sender = MarkerSender(node, lambda _t: T_ID if known else None)
    code = asyncio.run(sender._send("h", 1, {}, "t", 1, "c"))
    assert code == answered
