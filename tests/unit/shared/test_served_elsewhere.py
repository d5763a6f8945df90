"""CreateTopics on a cluster answers once the new partitions are served by their leaders
(`ClusterNode.served_elsewhere`): the controller asks each other leader in ListOffsets
until it stops answering "not yet" for them. Behaviour over the wire:
tests/integration/test_fetch_protocol.py under --storage=cluster."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from headwater.shared import node as node_module
from headwater.shared.cluster import BrokerInfo
from headwater.shared.node import ClusterNode
from headwater.wire.peer_errors import ForwardError

BROKERS = {n: BrokerInfo(n, f"host{n}", 9000 + n) for n in (1, 2, 3)}
#: The connections to the other brokers (`shared/peers.py`): each test gives its `call`.
PEERS: Any = SimpleNamespace(call=None)
TID = uuid.uuid4()


def node(leaders: dict[int, int]) -> ClusterNode:
    """Broker 1 of three; partition -> leader of topic "t" as `leaders` says."""
    view = SimpleNamespace(brokers=BROKERS, listed=BROKERS, controller=1,
                           leader=lambda _tid, p: (leaders[p], 0),
                           owner_of=lambda _tid, p: leaders[p])
    store: Any = SimpleNamespace(node_id=1, advertised=BROKERS[1], view=view,
                                 partition=lambda _t, _p: None)
    return ClusterNode(store, SimpleNamespace(active=True), PEERS)  # type: ignore[arg-type]


def answer(codes: dict[int, int]) -> Any:
    return SimpleNamespace(topics=[SimpleNamespace(name="t", partitions=[
        SimpleNamespace(partition_index=p, error_code=c) for p, c in codes.items()])])


def test_waits_until_each_other_leader_serves_its_partitions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_module, "SERVED_POLL_S", 0.0)
    # broker 2 has not followed the metadata, then takes partition 1; broker 3 serves 2
    replies = {9002: [answer({1: 3}), answer({1: 6}), answer({1: 0})],
               9003: [answer({2: 0})]}
    asked: list[tuple[int, list[int]]] = []

    async def call(host: str, port: int, api_key: int, version: int, body: Any,
                   timeout: float, *args: Any) -> Any:
        assert api_key == 2
        asked.append((port, [p["partition_index"] for t in body["topics"]
                             for p in t["partitions"]]))
        return replies[port].pop(0)

    monkeypatch.setattr(PEERS, "call", call)
    wanted = [("t", TID, p) for p in (0, 1, 2)]
    assert asyncio.run(node({0: 1, 1: 2, 2: 3}).served_elsewhere(wanted, 5.0))
    # partition 0 is this broker's own (its caller waits for those), never asked
    assert sorted(asked) == [(9002, [1]), (9002, [1]), (9002, [1]), (9003, [2])]


def test_a_leader_that_cannot_be_asked_or_refuses_is_not_waited_for(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def call(host: str, port: int, *args: Any) -> Any:
        if port == 9002:  # a listener that wants a login first closes the connection
            raise ForwardError("closed")
        return answer({2: 29})  # TOPIC_AUTHORIZATION_FAILED: not "not yet"

    monkeypatch.setattr(PEERS, "call", call)
    wanted = [("t", TID, p) for p in (1, 2, 3)]
    # partition 3: no live leader (its broker died): not this request's to wait for
    assert asyncio.run(node({1: 2, 2: 3, 3: -1}).served_elsewhere(wanted, 5.0))


def test_gives_up_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_module, "SERVED_POLL_S", 0.01)

    async def call(host: str, port: int, *args: Any) -> Any:
        return answer({1: 3})

    monkeypatch.setattr(PEERS, "call", call)
    assert not asyncio.run(node({1: 2}).served_elsewhere([("t", TID, 1)], 0.1))
