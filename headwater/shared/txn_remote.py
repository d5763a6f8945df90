"""A transaction's requests between brokers, as Kafka's brokers send them.

* **Markers** (`MarkerSender`): the coordinator's marker for a partition another broker
  serves goes to that broker in a WriteTxnMarkers request (key 27); the leader answers
  once the marker is committed. A broker that cannot be reached, or answers late,
  counts as NOT_LEADER_OR_FOLLOWER: the coordinator tries again (its retry loop),
  finding the partition's new leader if it moved.
* **Produce verification** (`RemoteVerifier`, KIP-890): a partition leader asks the
  transaction coordinator, in an AddPartitionsToTxn v5 request, whether (verify_only)
  or that (transaction version 2: add) a producer's first transactional batch on a
  partition belongs to its ongoing transaction, at the broker
  `ClusterNode.coordinator` names. A coordinator that cannot be
  reached counts as NETWORK_EXCEPTION, which Produce answers as NOT_ENOUGH_REPLICAS
  (retried by clients).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode as E

from .forward import ForwardError, call
from .node import ClusterNode

log = logging.getLogger("headwater.shared")

ADD_PARTITIONS_TO_TXN = 24
WRITE_TXN_MARKERS = 27
ADD_VERSION = 5  # batched, verify_only per transaction; an add at transaction version 2
VERSION = 2  # with transaction_version (KIP-890)
TIMEOUT_S = 10.0


class MarkerSender:
    """`RemoteMarkers` (txn/coordinator.py) for a broker of the cluster."""

    def __init__(self, node: ClusterNode,
                 topic_id: Callable[[str], uuid.UUID | None]) -> None:
        self._node = node
        self._topic_id = topic_id  # from the metadata image

    def send(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
             commit: bool, coordinator_epoch: int,
             transaction_version: int) -> Awaitable[int] | None:
        topic_id = self._topic_id(topic)
        if topic_id is None:
            return None
        leader, _epoch = self._node.leader(topic, topic_id, partition)
        target = self._node.broker(leader) if leader != self._node.node_id else None
        if target is None:
            return None
        body = {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch,
            "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
            "transaction_version": transaction_version,
            "topics": [{"name": topic, "partition_indexes": [partition]}]}]}
        return self._send(target.host, target.port, body, topic, partition)

    async def _send(self, host: str, port: int, body: dict[str, Any], topic: str,
                    partition: int) -> int:
        try:
            response = await call(host, port, WRITE_TXN_MARKERS, VERSION, body, TIMEOUT_S)
        except ForwardError as exc:
            log.info("marker for %s-%d not delivered: %s", topic, partition, exc)
            return E.not_leader_or_follower
        for marker in response.markers:
            for t in marker.topics:
                for p in t.partitions:
                    if t.name == topic and p.partition_index == partition:
                        return int(p.error_code)
        return E.not_leader_or_follower


class RemoteVerifier:
    """`RemoteVerification` (txn/verification.py) for a broker of the cluster."""

    def __init__(self, node: ClusterNode) -> None:
        self._node = node

    def coordinator_elsewhere(self, transactional_id: str) -> bool:
        return self._node.remote(transactional_id)

    async def verify(self, transactional_id: str,
                     by_producer: Mapping[tuple[int, int], list[tuple[str, int]]],
                     add: bool) -> dict[tuple[str, int], int]:
        wanted = [tp for tps in by_producer.values() for tp in tps]
        target = self._node.coordinator(transactional_id)
        if target is None or target.node_id == self._node.node_id:
            return dict.fromkeys(wanted, E.not_coordinator)
        body = {"transactions": [{
            "transactional_id": transactional_id, "producer_id": pid,
            "producer_epoch": epoch, "verify_only": not add,
            "topics": [{"name": topic, "partitions": [p for t, p in tps if t == topic]}
                       for topic in sorted({t for t, _p in tps})]}
            for (pid, epoch), tps in by_producer.items()]}
        try:
            response = await call(target.host, target.port, ADD_PARTITIONS_TO_TXN,
                                  ADD_VERSION, body, TIMEOUT_S)
        except ForwardError as exc:
            log.info("transaction verification of %r failed: %s", transactional_id, exc)
            return dict.fromkeys(wanted, E.network_exception)
        codes = dict.fromkeys(wanted, int(getattr(response, "error_code", 0))
                              or E.unknown_server_error)
        for txn in response.results_by_transaction:
            for t in txn.topic_results:
                for p in t.results_by_partition:
                    codes[(t.name, p.partition_index)] = int(p.partition_error_code)
        return codes
