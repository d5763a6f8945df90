"""Which coordinator each cross-broker request is routed to: `ClusterNode` asks
`coordinator(key, key_type)` for the key it is given, FindCoordinator and the
transaction verifier pass their key types, and a request goes to the broker named.
Coordinators are all on the controller today; a `coordinator` placing keys on other
brokers (the spreading of coordinator shards) is stood in for here, so the routing is
checked before it lands. Behaviour over the wire: tests/integration/."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from headwater.api import find_coordinator
from headwater.share.coordinator import coordinator_key
from headwater.shared.cluster import BrokerInfo
from headwater.shared.node import ClusterNode
from headwater.shared.txn_remote import RemoteVerifier
from headwater.wire.dispatch import RequestContext

BROKERS = {n: BrokerInfo(n, f"host{n}", 9000 + n) for n in (1, 2, 3)}
#: The connections to the other brokers (`shared/peers.py`): each test gives its `call`.
PEERS: Any = SimpleNamespace(call=None)


class Spread(ClusterNode):
    """Broker 1 of three, whose coordinators are placed by `owners` (key, key type) ->
    node (default: the controller, 1), every lookup recorded."""

    def __init__(self, owners: dict[tuple[str, int], int]) -> None:
        store: Any = SimpleNamespace(node_id=1, advertised=BROKERS[1],
                                     view=SimpleNamespace(brokers=BROKERS, listed=BROKERS, controller=1))
        metadata: Any = SimpleNamespace(active=True)
        super().__init__(store, metadata, PEERS)
        self.owners = owners
        self.looked_up: list[tuple[str, int]] = []

    def coordinator(self, key: str, key_type: int = 0) -> BrokerInfo | None:
        self.looked_up.append((key, key_type))
        return self.broker(self.owners.get((key, key_type), 1))


def test_the_default_coordinator_is_the_controller_for_every_key_type() -> None:
    store: Any = SimpleNamespace(node_id=2, advertised=BROKERS[2],
                                 view=SimpleNamespace(brokers=BROKERS, listed=BROKERS, controller=3))
    node = ClusterNode(store, SimpleNamespace(active=False), PEERS)  # type: ignore[arg-type]
    for key_type in (0, 1, 2):
        assert node.coordinator("k", key_type) == BROKERS[3]
        assert node.remote("k", key_type)
    assert node.coordinator("k") == BROKERS[3]


def test_a_request_goes_to_the_coordinator_of_its_key_and_key_type(
        monkeypatch: pytest.MonkeyPatch) -> None:
    tid = uuid.uuid4()
    share_key = coordinator_key("g", tid, 0)
    node = Spread({("g", 0): 2, (share_key, 2): 3})
    sent: list[tuple[str, int, int]] = []

    async def call(host: str, port: int, api_key: int, version: int, body: Any,
                   timeout: float, *args: Any) -> Any:
        sent.append((host, port, api_key))
        return "answer"

    monkeypatch.setattr(PEERS, "call", call)
    assert node.remote("g", 0) and node.remote(share_key, 2)
    assert not node.remote("g", 2) and not node.remote(share_key, 0)  # here (broker 1)
    assert asyncio.run(node.ask("g", 0, 77, 1, {})) == "answer"
    assert asyncio.run(node.ask(share_key, 2, 85, 1, {})) == "answer"
    assert asyncio.run(node.ask("g", 2, 85, 1, {})) is None  # coordinated here: not sent
    assert sent == [("host2", 9002, 77), ("host3", 9003, 85)]


def test_transaction_verification_asks_by_transactional_id_with_key_type_1(
        monkeypatch: pytest.MonkeyPatch) -> None:
    node = Spread({("tx", 1): 2})
    sent: list[str] = []

    async def call(host: str, port: int, api_key: int, version: int, body: Any,
                   timeout: float, *args: Any) -> Any:
        sent.append(host)
        return SimpleNamespace(error_code=0, results_by_transaction=[])

    monkeypatch.setattr(PEERS, "call", call)
    verifier = RemoteVerifier(node)
    assert verifier.coordinator_elsewhere("tx")
    assert not Spread({("tx", 0): 2}).remote("tx", 1)  # a group "tx" is not the txn
    asyncio.run(verifier.verify("tx", {(5, 0): [("t", 0)]}, add=False))
    assert sent == ["host2"]
    assert node.looked_up == [("tx", 1), ("tx", 1)]


def test_find_coordinator_asks_for_the_key_type_requested() -> None:
    tid = uuid.uuid4()
    share_key = coordinator_key("g", tid, 4)
    node = Spread({("g", 0): 2, ("tx", 1): 3, (share_key, 2): 3})
    handlers: dict[int, Any] = {}
    dispatcher: Any = SimpleNamespace(
        register=lambda key, lo, hi, handler: handlers.__setitem__(key, handler))
    broker: Any = SimpleNamespace(coordinator_key_types={0, 1, 2},
                                  access=SimpleNamespace(enabled=False), node_id=1,
                                  cluster=node, topology=node)
    find_coordinator.register(dispatcher, broker)
    ctx = RequestContext(10, 4, 1, "test", "127.0.0.1", 1)

    def ask(key_type: int, *keys: str) -> list[int]:
        req = SimpleNamespace(key_type=key_type, coordinator_keys=list(keys))
        return [c["node_id"] for c in handlers[10](ctx, req)["coordinators"]]

    assert ask(0, "g", "tx") == [2, 1]
    assert ask(1, "g", "tx") == [1, 3]
    assert ask(2, share_key) == [3]
    assert node.looked_up == [("g", 0), ("tx", 0), ("g", 1), ("tx", 1), (share_key, 2)]


def test_a_shard_is_named_where_it_is_placed_not_where_a_stale_view_saw_its_lease() -> None:
    """FindCoordinator names this broker while it serves the shard, else the live broker
    placement puts it on: a lease holder that has handed the shard over since this
    broker's view was read would answer NOT_COORDINATOR, and be named again until the
    next refresh, while the next owner answers COORDINATOR_LOAD_IN_PROGRESS."""
    tid = uuid.uuid4()
    served: set[tuple[str, int]] = set()
    view = SimpleNamespace(brokers=BROKERS, listed=BROKERS, controller=1,
                           owner_of=lambda topic_id, partition: 3,
                           leader=lambda topic_id, partition: (2, 4))  # holder 2 (stale)
    store: Any = SimpleNamespace(node_id=1, advertised=BROKERS[1], view=view,
                                 partition=lambda t, p: object() if (t, p) in served
                                 else None)
    node = ClusterNode(store, SimpleNamespace(active=True), PEERS)  # type: ignore[arg-type]
    node.shard_of = lambda key, key_type: ("__consumer_offsets", tid, 7)
    assert node.coordinator("g") == BROKERS[3]
    served.add(("__consumer_offsets", 7))  # still serving it here: until handed over
    assert node.coordinator("g") == BROKERS[1]
    view.brokers = {}  # no live broker
    view.owner_of = lambda topic_id, partition: -1
    served.clear()
    assert node.coordinator("g") is None


def test_a_broker_that_lost_the_controller_lease_does_not_name_itself() -> None:
    """Its last view, read while it led, still names it: Metadata says no controller
    (-1) until the view is read again, rather than send clients to a broker that knows
    it does not lead; a view naming another broker is passed on."""
    view = SimpleNamespace(brokers=BROKERS, listed=BROKERS, controller=1)
    store: Any = SimpleNamespace(node_id=1, advertised=BROKERS[1], view=view)
    metadata = SimpleNamespace(active=True)
    node = ClusterNode(store, metadata, PEERS)  # type: ignore[arg-type]
    assert node.controller_id() == 1
    metadata.active = False  # the lease lost (cut off from PostgreSQL)
    assert node.controller_id() == -1
    assert node.broker(node.controller_id()) is None
    view.controller = 2  # read again: broker 2 leads
    assert node.controller_id() == 2
