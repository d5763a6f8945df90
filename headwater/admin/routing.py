"""The admin commands' requests routed as Kafka's AdminClient routes them, so that they
work against a cluster of several brokers (headwater's shared log, or Kafka) and not only
against the broker they bootstrap from.

`Routed` has `RawClient`'s `request` and `close`; by API key, a request goes to
* the coordinator of its group (FindCoordinator key type 0: the consumer, share and
  streams group APIs) or transactional id (key type 1: DescribeTransactions), found through the
  bootstrap broker, asked again while it answers COORDINATOR_NOT_AVAILABLE or
  COORDINATOR_LOAD_IN_PROGRESS;
* every broker, answers merged (ListGroups, ListTransactions: each broker lists the
  groups and transactions it coordinates);
* the leader of each partition, answers merged (ListOffsets, DescribeProducers) or of
  the first one (WriteTxnMarkers);
* else the bootstrap broker.
On one broker every route ends at the same connection.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from ..wire.client import RawClient
from .connect import connect, security

GROUP, TRANSACTION = 0, 1
COORDINATOR_WAIT_S = 10.0
_RETRY_COORDINATOR = {14, 15}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE

#: API key -> (key type, the request's key).
_KEYED: dict[int, tuple[int, Callable[[dict[str, Any]], str]]] = {
    8: (GROUP, lambda b: b["group_id"]),  # OffsetCommit
    9: (GROUP, lambda b: b["groups"][0]["group_id"]),  # OffsetFetch
    15: (GROUP, lambda b: b["groups"][0]),  # DescribeGroups
    42: (GROUP, lambda b: b["groups_names"][0]),  # DeleteGroups
    47: (GROUP, lambda b: b["group_id"]),  # OffsetDelete
    65: (TRANSACTION, lambda b: b["transactional_ids"][0]),  # DescribeTransactions
    69: (GROUP, lambda b: b["group_ids"][0]),  # ConsumerGroupDescribe
    77: (GROUP, lambda b: b["group_ids"][0]),  # ShareGroupDescribe
    89: (GROUP, lambda b: b["group_ids"][0]),  # StreamsGroupDescribe
    90: (GROUP, lambda b: b["groups"][0]["group_id"]),  # DescribeShareGroupOffsets
    91: (GROUP, lambda b: b["group_id"]),  # AlterShareGroupOffsets
    92: (GROUP, lambda b: b["group_id"]),  # DeleteShareGroupOffsets
}
#: API key -> the response's list that each broker's answer adds to.
_EVERY_BROKER = {16: "groups", 66: "transaction_states"}  # ListGroups, ListTransactions
#: API key -> the name of a request topic's partition list (answers merged by topic list).
_BY_LEADER = {2: "partitions", 61: "partition_indexes"}  # ListOffsets, DescribeProducers
WRITE_TXN_MARKERS = 27


class Routed:
    """A connection per broker, opened on first use; see the module's docstring."""

    def __init__(self, args: argparse.Namespace, bootstrap: RawClient | None = None) -> None:
        self._args = args
        self.bootstrap = bootstrap if bootstrap is not None else connect(args)
        self._by_node: dict[int, RawClient] = {}
        self._addresses: dict[int, tuple[str, int]] | None = None
        self._leaders: dict[tuple[str, int], int] = {}

    # ---- RawClient's interface -------------------------------------------------------
    def request(self, api_key: int, version: int, body: Any, correlation_id: int = 1) -> Any:
        if api_key in _KEYED and isinstance(body, dict):
            key_type, key_of = _KEYED[api_key]
            return self.coordinator(key_of(body), key_type).request(
                api_key, version, body, correlation_id)
        if api_key in _EVERY_BROKER:
            return self._every_broker(api_key, version, body, correlation_id)
        if api_key in _BY_LEADER and isinstance(body, dict):
            return self._by_leader(api_key, version, body, correlation_id)
        if api_key == WRITE_TXN_MARKERS and isinstance(body, dict):
            topic = body["markers"][0]["topics"][0]
            node = self._leader(topic["name"], topic["partition_indexes"][0])
            return self._client(node).request(api_key, version, body, correlation_id)
        return self.bootstrap.request(api_key, version, body, correlation_id)

    def close(self) -> None:
        for client in {id(c): c for c in [self.bootstrap, *self._by_node.values()]}.values():
            client.close()

    # ---- routes ----------------------------------------------------------------------
    def coordinator(self, key: str, key_type: int) -> RawClient:
        """A connection to the coordinator of `key`."""
        deadline = time.monotonic() + COORDINATOR_WAIT_S
        while True:
            found = self.bootstrap.request(10, 4, {"key_type": key_type,
                                                   "coordinator_keys": [key]}).coordinators[0]
            code = int(found.error_code)
            if code not in _RETRY_COORDINATOR or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if code:  # the coordinated request answers this error itself
            return self.bootstrap
        return self._client(int(found.node_id), (found.host, int(found.port)))

    def _every_broker(self, api_key: int, version: int, body: Any,
                      correlation_id: int) -> Any:
        """Each broker's list joined into the first answer; an error answer as it is."""
        field = _EVERY_BROKER[api_key]
        answers = []
        for node in sorted(self._brokers()):
            answer = self._client(node).request(api_key, version, body, correlation_id)
            if int(getattr(answer, "error_code", 0)):
                return answer
            answers.append(answer)
        if not answers:
            return self.bootstrap.request(api_key, version, body, correlation_id)
        return dataclasses.replace(answers[0], **{
            field: tuple(item for answer in answers for item in getattr(answer, field))})

    def _by_leader(self, api_key: int, version: int, body: dict[str, Any],
                   correlation_id: int) -> Any:
        inner = _BY_LEADER[api_key]
        per_node: dict[int, list[dict[str, Any]]] = {}
        for topic in body["topics"]:
            for entry in topic[inner]:
                index = entry["partition_index"] if isinstance(entry, dict) else entry
                node = self._leader(topic["name"], index)
                topics = per_node.setdefault(node, [])
                if not topics or topics[-1]["name"] != topic["name"]:
                    topics.append({**topic, inner: []})
                topics[-1][inner].append(entry)
        merged: Any = None
        answered: list[Any] = []
        for node, topics in per_node.items():
            answer = self._client(node).request(api_key, version, {**body, "topics": topics},
                                                correlation_id)
            merged = merged or answer
            answered.extend(answer.topics)
        if merged is None:
            return self.bootstrap.request(api_key, version, body, correlation_id)
        return dataclasses.replace(merged, topics=tuple(answered))

    # ---- brokers -----------------------------------------------------------------------
    def _brokers(self) -> dict[int, tuple[str, int]]:
        if self._addresses is None:
            meta = self.bootstrap.request(3, 12, {
                "topics": (), "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False})
            self._addresses = {int(b.node_id): (b.host, int(b.port)) for b in meta.brokers}
        return self._addresses

    def _leader(self, topic: str, partition: int) -> int:
        """The partition's leader (-1, the bootstrap broker, when none is known)."""
        if (topic, partition) not in self._leaders:
            meta = self.bootstrap.request(3, 12, {
                "topics": [{"name": topic, "topic_id": None}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False})
            for t in meta.topics:
                for p in t.partitions:
                    self._leaders[(t.name, int(p.partition_index))] = int(p.leader_id)
        return self._leaders.get((topic, partition), -1)

    def _client(self, node: int, address: tuple[str, int] | None = None) -> RawClient:
        """A connection to broker `node` (the bootstrap one for -1 or an unknown node)."""
        if node in self._by_node:
            return self._by_node[node]
        address = address or self._brokers().get(node)
        if address is None:
            return self.bootstrap
        peer = self.bootstrap.sock.getpeername()
        if (address[0], address[1]) == (peer[0], peer[1]):
            client = self.bootstrap
        else:
            client = RawClient(address[0], address[1], security=security(self._args))
        self._by_node[node] = client
        return client
