"""Where the cluster suite's raw client sends a request (tests/support/routed_client.py):
the routing table read from request bodies, without brokers."""

from __future__ import annotations

import uuid

from tests.support.routed_client import RoutedClient

TOPIC_ID = uuid.uuid4()


class Probe(RoutedClient):
    """RoutedClient's choice, with the lookups answered here: a coordinator's port is
    9000 + key type, a leader's 8000 + partition."""

    def __init__(self) -> None:  # no connection
        self.asked: list[tuple] = []
        self.bootstrap_port = 7000
        self._sessions = {}

    def _coordinator(self, key: str, key_type: int) -> int | None:
        self.asked.append(("coordinator", key, key_type))
        return 9000 + key_type

    def _leader(self, topic: str | uuid.UUID, partition: int) -> int | None:
        self.asked.append(("leader", topic, partition))
        return 8000 + partition


def test_coordinated_requests_go_to_their_coordinator() -> None:
    p = Probe()
    assert p._target(8, {"group_id": "g"}) == 9000
    assert p._target(9, {"groups": [{"group_id": "g2", "topics": None}]}) == 9000
    assert p._target(15, {"groups": ["g3"]}) == 9000
    assert p._target(26, {"transactional_id": "tx"}) == 9001
    assert p._target(28, {"transactional_id": "tx", "group_id": "g4"}) == 9000  # the group's
    assert p._target(24, {"transactions": [{"transactional_id": "tx2"}]}) == 9001
    assert p._target(22, {"transactional_id": None}) is None  # idempotent: any broker
    assert p.asked == [("coordinator", "g", 0), ("coordinator", "g2", 0),
                       ("coordinator", "g3", 0), ("coordinator", "tx", 1),
                       ("coordinator", "g4", 0), ("coordinator", "tx2", 1)]


def test_partition_requests_go_to_the_first_partitions_leader() -> None:
    p = Probe()
    assert p._target(0, {"topic_data": [{"name": "t", "partition_data": [{"index": 2}]}]}) \
        == 8002
    assert p._target(1, {"topics": [{"topic": "", "topic_id": TOPIC_ID,
                                     "partitions": [{"partition": 1}]}]}) == 8001
    assert p._target(61, {"topics": [{"name": "t", "partition_indexes": [3]}]}) == 8003
    assert p._target(35, {"topics": [{"topic": "t", "partitions": [4]}]}) == 8004
    assert p._target(35, {"topics": None}) is None  # every partition: the bootstrap's
    assert p._target(78, {"topics": []}) is None
    assert p.asked == [("leader", "t", 2), ("leader", TOPIC_ID, 1), ("leader", "t", 3),
                       ("leader", "t", 4)]


def test_anything_else_goes_to_the_bootstrap_broker() -> None:
    p = Probe()
    assert p._target(3, {"topics": None}) is None
    assert p._target(18, {}) is None
    assert p.asked == []


def test_a_fetch_session_stays_with_the_broker_that_opened_it() -> None:
    p = Probe()
    p._sessions[42] = 8003  # opened by partition 3's leader
    assert p._route(1, {"session_id": 42, "topics": []}) == 8003
    assert p._route(1, {"session_id": 42, "topics": [{"topic": "t", "partitions": [
        {"partition": 0}]}]}) == 8003
    assert p._route(1, {"session_id": 0, "topics": [{"topic": "t", "partitions": [
        {"partition": 1}]}]}) == 8001  # a new session: the first partition's leader
    assert p._route(1, {"session_id": 43, "topics": []}) == 7000  # unknown: bootstrap
