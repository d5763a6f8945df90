"""A transaction's requests between brokers, as Kafka's brokers send them.

* **Markers** (`MarkerSender`): the coordinator's marker for a partition another broker
  serves goes to that broker in a WriteTxnMarkers request (key 27); the leader answers
  once the marker is committed. A broker that cannot be reached, or answers late,
  counts as NOT_LEADER_OR_FOLLOWER: the coordinator tries again (its retry loop),
  finding the partition's new leader if it moved.
* **Markers together** (`MarkerSender.write_together`): a transaction's markers on
  several partitions are committed in one PostgreSQL transaction. Each partition's owner
  holds its marker (here: `SharedStore.hold_marker`; on another broker: a WriteTxnMarkers
  request from client id `HOLD_CLIENT_ID`), then `staged_markers.promote` commits them
  all or none (`marker_holds.py`, `staged_markers.py`).
  When coordinators are spread over the brokers, a job takes its holds one at a time
  in (topic, partition) order, stopping at the first refused: two jobs of different
  coordinators never each hold a partition the other waits for.
* **Produce verification** (`RemoteVerifier`, KIP-890): a partition leader asks the
  transaction coordinator, in an AddPartitionsToTxn v5 request, whether (verify_only)
  or that (transaction version 2: add) a producer's first transactional batch on a
  partition belongs to its ongoing transaction, at the broker
  `ClusterNode.coordinator` names. A coordinator that cannot be
  reached counts as NETWORK_EXCEPTION, which Produce answers as NOT_ENOUGH_REPLICAS
  (retried by clients).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode as E

from ..faults import TXN_AFTER_HOLDS, Faults
from ..wire.peer_errors import ForwardError
from .marker_holds import CONFIRM_CLIENT_ID, HOLD_CLIENT_ID
from .node import ClusterNode
from .sequencer import Outcome
from .staged_markers import promote

log = logging.getLogger("headwater.shared")

ADD_PARTITIONS_TO_TXN = 24
WRITE_TXN_MARKERS = 27
ADD_VERSION = 5  # batched, verify_only per transaction; an add at transaction version 2
VERSION = 2  # with transaction_version (KIP-890)
TIMEOUT_S = 10.0
TRANSACTION_KEY_TYPE = 1  # FindCoordinator's key type of a transactional id
OFFSETS_TOPIC = "__consumer_offsets"
#: Answers to a hold that a later attempt may change (the others end the partition's part).
RETRIABLE = frozenset({
    E.not_leader_or_follower, E.kafka_storage_error, E.network_exception,
    E.coordinator_load_in_progress, E.coordinator_not_available, E.not_coordinator,
    E.request_timed_out, E.unknown_server_error})

TopicPartition = tuple[str, int]


class MarkerSender:
    """`RemoteMarkers` (txn/coordinator.py) for a broker of the cluster."""

    def __init__(self, node: ClusterNode, topic_id: Callable[[str], uuid.UUID | None],
                 faults: Faults | None = None, ordered: bool = False) -> None:
        self._node = node
        #: Coordinators on several brokers: holds are taken one at a time in one global
        #: order, so two transactions never each hold a partition the other waits for.
        self._ordered = ordered
        self._topic_id = topic_id  # from the metadata image
        self._faults = faults if faults is not None else Faults()  # test-only

    def send(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
             commit: bool, coordinator_epoch: int, transaction_version: int,
             client_id: str = "headwater-broker") -> Awaitable[int] | None:
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
        return self._send(target.host, target.port, body, topic, partition, client_id)

    async def write_together(self, partitions: Sequence[TopicPartition], producer_id: int,
                             producer_epoch: int, commit: bool, coordinator_epoch: int,
                             transaction_version: int) -> dict[TopicPartition, int]:
        """Every partition's marker in one PostgreSQL transaction: per partition 0
        (committed), a code of `RETRIABLE` (nothing committed: try again; the holds
        that were granted stay, and answer the next attempt at once) or another code
        (that partition takes no marker: a deleted topic, a fenced producer)."""
        if self._ordered:
            codes: dict[TopicPartition, int] = {}
            for topic, partition in sorted(partitions):
                code = await self._hold(topic, partition, producer_id, producer_epoch,
                                        commit, coordinator_epoch, transaction_version)
                codes[(topic, partition)] = code
                if code in RETRIABLE:  # the later ones wait until this one is held
                    codes.update((tp, E.not_leader_or_follower) for tp in partitions
                                 if tp not in codes)
                    break
        else:  # one coordinator runs jobs that share a partition one after the other
            answers = await asyncio.gather(*(
                self._hold(topic, partition, producer_id, producer_epoch, commit,
                           coordinator_epoch, transaction_version)
                for topic, partition in partitions))
            codes = dict(zip(partitions, answers, strict=True))
        held = [tp for tp, code in codes.items() if code == 0]
        if any(code in RETRIABLE for code in codes.values()):
            return {tp: E.not_leader_or_follower if code == 0 or code in RETRIABLE
                    else code for tp, code in codes.items()}
        if not held:
            return codes
        if self._faults.armed(TXN_AFTER_HOLDS):
            self._faults.hit(TXN_AFTER_HOLDS, f"before committing the markers of producer "
                             f"{producer_id} on {len(held)} partitions")
        keys = {tp: (self._topic_id(tp[0]), tp[1]) for tp in held}
        try:
            async with self._node.store.pool.acquire() as conn:
                outcomes = await promote(conn, [(t, p) for t, p in keys.values()
                                                if t is not None],
                                         producer_id, producer_epoch)
        except Exception as exc:  # the outcome may be unknown: the next attempt tells
            log.info("markers of producer %d not committed: %s: %s", producer_id,
                     type(exc).__name__, exc)
            return {tp: E.kafka_storage_error if tp in keys else code
                    for tp, code in codes.items()}
        failed = {k: o for k, o in outcomes.items() if o is not Outcome.COMMITTED}
        if failed or len(outcomes) < len(keys):
            log.info("markers of producer %d not committed: %s", producer_id,
                     ", ".join(f"{t}-{p}: {o.value}" for (t, p), o in failed.items()))
            return {tp: E.not_leader_or_follower if tp in keys else code
                    for tp, code in codes.items()}
        self._node.store.markers_committed(held)
        await self._confirm([tp for tp in held if tp[0] == OFFSETS_TOPIC], producer_id,
                            producer_epoch, commit, transaction_version)
        return codes

    async def _confirm(self, partitions: Sequence[TopicPartition], producer_id: int,
                       producer_epoch: int, commit: bool, transaction_version: int) -> None:
        """Wait until the owners of `partitions` on other brokers took in the committed
        markers (`MarkerHolds.confirm`). Only `__consumer_offsets`: its group
        coordinator must hold the transaction's offsets by the time EndTxn answers
        (an OffsetFetch right after `commit_transaction` found none), where Kafka's
        marker is written a moment later. Best effort: the markers are committed
        whatever is answered, and an owner learns of them from PostgreSQL anyway."""
        sends = []
        for topic, partition in partitions:
            if self._node.store.partition(topic, partition) is not None:
                continue  # here: `markers_committed` took it in
            sent = self.send(topic, partition, producer_id, producer_epoch, commit, 0,
                             transaction_version, CONFIRM_CLIENT_ID)
            if sent is not None:
                sends.append(sent)
        if sends:
            await asyncio.gather(*sends)

    async def _hold(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                    commit: bool, coordinator_epoch: int, transaction_version: int) -> int:
        if self._topic_id(topic) is None:
            return E.unknown_topic_or_partition
        store = self._node.store
        if store.partition(topic, partition) is not None:
            here = store.hold_marker(topic, partition, producer_id, producer_epoch, commit,
                                     coordinator_epoch, transaction_version)
            return here if isinstance(here, int) else await here
        sent = self.send(topic, partition, producer_id, producer_epoch, commit,
                         coordinator_epoch, transaction_version, HOLD_CLIENT_ID)
        return E.not_leader_or_follower if sent is None else await sent

    async def _send(self, host: str, port: int, body: dict[str, Any], topic: str,
                    partition: int, client_id: str) -> int:
        try:
            response = await self._node.peers.call(host, port, WRITE_TXN_MARKERS, VERSION, body, TIMEOUT_S,
                                  client_id)
        except ForwardError as exc:
            log.info("marker for %s-%d not delivered: %s", topic, partition, exc)
            return E.not_leader_or_follower
        for marker in response.markers:
            for t in marker.topics:
                for p in t.partitions:
                    if t.name == topic and p.partition_index == partition:
                        code = int(p.error_code)
                        if code == E.unknown_topic_or_partition and \
                                self._topic_id(topic) is not None:
                            # The owner has not caught up with a topic the coordinator
                            # knows (it just started): asked again, as a moved leader.
                            return E.not_leader_or_follower
                        return code
        return E.not_leader_or_follower


class RemoteVerifier:
    """`RemoteVerification` (txn/verification.py) for a broker of the cluster."""

    def __init__(self, node: ClusterNode) -> None:
        self._node = node

    def coordinator_elsewhere(self, transactional_id: str) -> bool:
        return self._node.remote(transactional_id, TRANSACTION_KEY_TYPE)

    async def verify(self, transactional_id: str,
                     by_producer: Mapping[tuple[int, int], list[tuple[str, int]]],
                     add: bool) -> dict[tuple[str, int], int]:
        wanted = [tp for tps in by_producer.values() for tp in tps]
        target = self._node.coordinator(transactional_id, TRANSACTION_KEY_TYPE)
        if target is None or target.node_id == self._node.node_id:
            return dict.fromkeys(wanted, E.not_coordinator)
        body = {"transactions": [{
            "transactional_id": transactional_id, "producer_id": pid,
            "producer_epoch": epoch, "verify_only": not add,
            "topics": [{"name": topic, "partitions": [p for t, p in tps if t == topic]}
                       for topic in sorted({t for t, _p in tps})]}
            for (pid, epoch), tps in by_producer.items()]}
        try:
            response = await self._node.peers.call(target.host, target.port, ADD_PARTITIONS_TO_TXN,
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
