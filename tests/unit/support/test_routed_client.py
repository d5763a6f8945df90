"""Where the cluster suite's raw client sends a request (tests/support/routed_client.py):
the routing table read from request bodies, without brokers."""

from __future__ import annotations

import uuid

from headwater.wire.client import encode_request
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


def test_share_state_requests_are_split_per_share_coordinator() -> None:
    """A share-state request naming share-partitions of two coordinators goes to each
    as its own request (Kafka's persister), and the answers come back as one."""
    from kio.schema.errors import ErrorCode
    from kio.schema.write_share_group_state.v1 import response as w

    from headwater.share.coordinator import coordinator_key

    sent: list[tuple[int, dict]] = []

    class Conn:
        def __init__(self, port: int) -> None:
            self.port = port

        def request(self, api_key: int, version: int, body: dict, cid: int) -> object:
            sent.append((self.port, body))
            return w.WriteShareGroupStateResponse(results=tuple(
                w.WriteStateResult(topic_id=t["topic_id"], partitions=tuple(
                    w.PartitionResult(partition=p["partition"], error_code=ErrorCode.none,
                                      error_message=None) for p in t["partitions"]))
                for t in body["topics"]))

    class Split(Probe):
        def _coordinator(self, key: str, key_type: int) -> int | None:
            self.asked.append(("coordinator", key, key_type))
            return 9000 + int(key.rsplit(":", 1)[1]) % 2  # even / odd partitions

        def _conn(self, port: int) -> Conn:  # type: ignore[override]
            return Conn(port)

    p = Split()
    body = {"group_id": "g", "topics": [{"topic_id": TOPIC_ID, "partitions": [
        {"partition": n, "state_epoch": 1} for n in range(3)]}]}
    answer = p.request(85, 1, body)
    assert [(port, [x["partition"] for x in b["topics"][0]["partitions"]])
            for port, b in sent] == [(9000, [0, 2]), (9001, [1])]
    assert [c for c in p.asked] == [("coordinator", coordinator_key("g", TOPIC_ID, n), 2)
                                    for n in range(3)]
    (result,) = answer.results
    assert result.topic_id == TOPIC_ID
    assert sorted(x.partition for x in result.partitions) == [0, 1, 2]
    sent.clear()
    p.request(84, 0, {"group_id": "g", "topics": [{"topic_id": TOPIC_ID, "partitions": [
        {"partition": 1, "leader_epoch": 0}]}]})
    assert [port for port, _b in sent] == [9001]  # one coordinator: the request as it is


def test_a_share_request_naming_no_partition_goes_to_the_members_session() -> None:
    """An incremental ShareFetch names no partition: it goes where the member opened its
    share session (the leader of the partitions its first fetch named)."""
    sent: list[int] = []

    class Conn:
        def __init__(self, port: int) -> None:
            self.port = port

        def request(self, api_key: int, version: int, body: dict, cid: int) -> None:
            sent.append(self.port)

    class Sessions(Probe):
        def __init__(self) -> None:
            super().__init__()
            self.bootstrap_port = 7000
            self._share_sessions = {}

        def _conn(self, port: int) -> Conn:  # type: ignore[override]
            return Conn(port)

    p = Sessions()
    first = {"group_id": "g", "member_id": "m", "topics": [
        {"topic_id": TOPIC_ID, "partitions": [{"partition_index": 2}]}]}
    p.request(78, 1, first)
    p.request(78, 1, {"group_id": "g", "member_id": "m", "topics": []})
    p.request(79, 1, {"group_id": "g", "member_id": "m", "topics": []})
    p.request(78, 1, {"group_id": "g", "member_id": "other", "topics": []})
    assert sent == [8002, 8002, 8002, 7000]
def test_a_fetch_session_stays_with_the_broker_that_opened_it() -> None:
    p = Probe()
    p._sessions[42] = 8003  # opened by partition 3's leader
    assert p._route(1, {"session_id": 42, "topics": []}) == 8003
    assert p._route(1, {"session_id": 42, "topics": [{"topic": "t", "partitions": [
        {"partition": 0}]}]}) == 8003
    assert p._route(1, {"session_id": 0, "topics": [{"topic": "t", "partitions": [
        {"partition": 1}]}]}) == 8001  # a new session: the first partition's leader
    assert p._route(1, {"session_id": 43, "topics": []}) == 7000  # unknown: bootstrap


def test_add_partitions_v3_goes_to_the_transaction_coordinator() -> None:
    """AddPartitionsToTxn v0-3 names its transactional id in its own field."""
    p = Probe()
    assert p._target(24, {"v3_and_below_transactional_id": "tx3",
                          "v3_and_below_topics": []}) == 9001
    assert p.asked == [("coordinator", "tx3", 1)]


def test_an_encoded_request_is_routed_by_its_decoded_body() -> None:
    """send_bytes of one whole request (the admin code's DescribeTransactions) goes
    where `request` would send it; anything else to the bootstrap broker."""
    p = Probe()
    assert p._frame_target(encode_request(65, 0, {"transactional_ids": ["tx4"]})) == 9001
    assert p._frame_target(encode_request(9, 8, {"groups": [
        {"group_id": "g5", "topics": None}], "require_stable": True})) == 9000
    assert p._frame_target(encode_request(24, 3, {
        "v3_and_below_transactional_id": "tx5", "v3_and_below_producer_id": 1,
        "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [
            {"name": "t", "partitions": [0]}]})) == 9001
    assert p._frame_target(encode_request(0, 9, {
        "transactional_id": None, "acks": -1, "timeout": 100, "topic_data": [
            {"name": "t", "partition_data": [{"index": 4, "records": b""}]}]})) == 8004
    metadata = encode_request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False})
    assert p._frame_target(metadata) is None  # not routed
    assert p._frame_target(metadata + metadata) is None  # two frames: as sent
    assert p._frame_target(b"\x00\x00\x00\x04\x00\x41\x00") is None  # truncated
    assert p.asked == [("coordinator", "tx4", 1), ("coordinator", "g5", 0),
                       ("coordinator", "tx5", 1), ("leader", "t", 4)]
