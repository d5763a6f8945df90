"""This broker's place in a cluster, as the API handlers ask about it: which brokers are
live, who leads a partition, who the controller is, and how a metadata change reaches
the controller (`forward.py`) and comes back (`metadata_log.py`)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode as E

from ..wire.dispatch import RequestContext
from ..wire.peer_errors import EnvelopeRefused, ForwardError
from .cluster import BrokerInfo
from .forward import forward
from .marker_holds import CONFIRM_CLIENT_ID, HOLD_CLIENT_ID
from .metadata_log import SharedMetadata
from .peers import Peers
from .store import SharedStore

CONTROLLER_WAIT_S = 10.0
COORDINATOR_TIMEOUT_S = 10.0
PRODUCE, FETCH, LIST_OFFSETS, CREATE_TOPICS, SHARE_FETCH = 0, 1, 2, 19, 78
#: The client id of a ShareFetch that asks a partition's leader to load a share-partition
#: (its share coordinator found ARCHIVING records in it after a restart): no session, no
#: records, only the load, which writes the dead letters it owes.
RECOVER_SHARE_CLIENT_ID = "headwater-share-recover"
ALLOCATE_PRODUCER_IDS = 67
#: NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS,
#: KAFKA_STORAGE_ERROR: a partition moving, or its leader's commit failing for now.
LEADER_MOVING = frozenset({6, 5, 7, 19, 56})
#: ListOffsets' answers of a broker that has not taken a partition yet: it has not
#: followed the metadata (UNKNOWN_TOPIC_OR_PARTITION), or is taking it.
NOT_SERVED_YET = frozenset({3, 5, 6})
SERVED_POLL_S = 0.05
log = logging.getLogger("headwater.shared")


#: (key, key type) -> (topic, topic id, partition) of the coordinator shard for the key,
#: None while its topic does not exist (or coordinators follow the controller).
ShardOf = Callable[[str, int], "tuple[str, uuid.UUID, int] | None"]


class ClusterNode:
    def __init__(self, store: SharedStore, metadata: SharedMetadata, peers: Peers,
                 shard_of: ShardOf | None = None) -> None:
        self.store = store
        self.metadata = metadata
        #: The connections to the other brokers (their inter-broker listeners).
        self.peers = peers
        #: Where coordinator shards are (None: every shard with the controller).
        self.shard_of = shard_of

    @property
    def node_id(self) -> int:
        return self.store.node_id

    @property
    def spreads_coordinators(self) -> bool:
        """Coordinator shards where the shared log places their partitions (else all
        with the controller, headwater.shared.coordinators=controller)."""
        return self.shard_of is not None

    def hold_marker(self, topic: str, partition: int, producer_id: int,
                    producer_epoch: int, commit: bool, coordinator_epoch: int,
                    transaction_version: int) -> int | Awaitable[int]:
        """A coordinator of the cluster holds a marker here (`SharedStore.hold_marker`)."""
        return self.store.hold_marker(topic, partition, producer_id, producer_epoch, commit,
                                      coordinator_epoch, transaction_version)

    async def confirm_marker(self, topic: str, partition: int, producer_id: int,
                             producer_epoch: int, commit: bool, timeout_s: float) -> int:
        """The held marker is committed (`SharedStore.confirm_marker`)."""
        return await self.store.confirm_marker(topic, partition, producer_id,
                                               producer_epoch, commit, timeout_s)

    def brokers(self) -> list[BrokerInfo]:
        """The brokers clients are told of (`ClusterView.listed`; this one always among
        them)."""
        listed = dict(self.store.view.listed)
        listed.setdefault(self.node_id, self.store.advertised)
        return [listed[n] for n in sorted(listed)]

    def broker(self, node_id: int) -> BrokerInfo | None:
        if node_id == self.node_id:
            return self.store.advertised
        return self.store.view.listed.get(node_id)

    def is_controller(self) -> bool:
        return self.metadata.active

    def controller_id(self) -> int:
        """This broker while it leads; else the controller of the last view, except this
        broker itself: a view read while it led still names it after it lost the lease
        (cut off from PostgreSQL), and Metadata sent clients to it for up to a refresh
        while another broker already led. -1 (none known) until the view is read again."""
        if self.metadata.active:
            return self.node_id
        named = self.store.view.controller
        return -1 if named == self.node_id else named

    def coordinator(self, key: str, key_type: int = 0) -> BrokerInfo | None:
        """The broker coordinating `key` (a group id, a transactional id, a share key:
        `key_type` as FindCoordinator's): this broker while it serves the key's shard,
        else the live broker the shard is placed on (which serves it, or is about to
        take it); the controller when shards follow it. None if none is live."""
        shard = None if self.shard_of is None else self.shard_of(key, key_type)
        if shard is None:
            return self.broker(self.controller_id())
        topic, topic_id, partition = shard
        if self.store.partition(topic, partition) is not None:
            return self.broker(self.node_id)  # served here (until handed over)
        # The broker placement names, rather than the lease holder this broker's view
        # saw: a holder that has handed the shard over since answers NOT_COORDINATOR
        # (and is named again until the view is refreshed), while the next owner
        # answers COORDINATOR_LOAD_IN_PROGRESS until it has taken it (runtime.shard).
        return self.broker(self.store.view.owner_of(topic_id, partition))

    @staticmethod
    def asks_to_hold(client_id: str | None) -> bool:
        """A WriteTxnMarkers from a transaction coordinator of the cluster, asking that
        its markers be held for it to commit together (`marker_holds.py`)."""
        return client_id == HOLD_CLIENT_ID

    @staticmethod
    def asks_to_confirm(client_id: str | None) -> bool:
        """A WriteTxnMarkers from a transaction coordinator that committed the markers
        held here, waiting until they are taken in (`MarkerHolds.confirm`)."""
        return client_id == CONFIRM_CLIENT_ID

    # ---- share/remote.py's CoordinatorChannel -------------------------------------------
    def remote(self, key: str, key_type: int) -> bool:
        found = self.coordinator(key, key_type)
        return found is None or found.node_id != self.node_id

    async def ask(self, key: str, key_type: int, api_key: int, version: int,
                  body: dict[str, Any]) -> Any | None:
        target = self.coordinator(key, key_type)
        if target is None or target.node_id == self.node_id:
            return None
        try:
            return await self.peers.call(target.host, target.port, api_key, version, body,
                              COORDINATOR_TIMEOUT_S)
        except ForwardError as exc:
            log.info("coordinator of %r (key type %d, broker %d) not reached: %s", key,
                     key_type, target.node_id, exc)
            return None

    async def end_offset(self, topic: str, topic_id: uuid.UUID, partition: int
                         ) -> int | None:
        """A partition's high watermark as its leader answers ListOffsets (latest); None
        if it cannot be asked or answers an error."""
        part = self.store.partition(topic, partition)
        if part is not None:
            return part.high_watermark
        leader, _epoch = self.leader(topic, topic_id, partition)
        target = self.broker(leader) if leader != self.node_id else None
        if target is None:
            return None
        body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}]}]}
        try:
            response = await self.peers.call(target.host, target.port, LIST_OFFSETS, 7, body,
                                  COORDINATOR_TIMEOUT_S)
        except ForwardError as exc:
            log.info("end offset of %s-%d: broker %d not reached: %s", topic, partition,
                     target.node_id, exc)
            return None
        for t in response.topics:
            for p in t.partitions:
                if t.name == topic and p.partition_index == partition and not p.error_code:
                    return int(p.offset)
        return None

    # ---- a partition another broker serves, as a client reaches it ---------------------
    # (share/dead_letter.py's RemoteLogs: dead letters for a partition led elsewhere)
    async def _at_leader(self, topic: str, topic_id: uuid.UUID, partition: int, api_key: int,
                         version: int, body: dict[str, Any],
                         code_of: Callable[[Any], int],
                         client_id: str = "headwater-broker") -> Any:
        """The answer of the partition's leader to `body`, asked again (the leader found
        again) with backoff while the partition moves, for up to the lease time and 5 s.
        ForwardError if no other broker answers without a moving error by then."""
        loop = asyncio.get_running_loop()
        deadline, backoff = loop.time() + self.store.lease_ms / 1000 + 5, 0.05
        while True:
            leader, _epoch = self.leader(topic, topic_id, partition)
            target = self.broker(leader) if leader != self.node_id else None
            why = f"led here ({leader})" if target is None else ""
            if target is not None:
                try:
                    response = await self.peers.call(target.host, target.port, api_key, version, body,
                                          COORDINATOR_TIMEOUT_S, client_id)
                    code = int(code_of(response))
                    if code not in LEADER_MOVING:
                        return response
                    why = f"broker {leader} answered {code}"
                except ForwardError as exc:
                    why = str(exc)
            if loop.time() + backoff > deadline:
                raise ForwardError(f"{topic}-{partition} not reached: {why}")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    @staticmethod
    def _partition_code(response: Any, topic_field: str, index_field: str, topic: str,
                        partition: int, responses: str = "responses",
                        partitions: str = "partitions") -> Any:
        for t in getattr(response, responses, ()):
            if getattr(t, topic_field) != topic:
                continue
            for p in getattr(t, partitions):
                if getattr(p, index_field) == partition:
                    return p
        return None

    async def produce(self, topic: str, topic_id: uuid.UUID, partition: int,
                      batch: bytes) -> tuple[int, int]:
        """A record batch appended at the partition's leader as a producer with acks=all
        sends it (Produce v9): the error code of its answer (0 once it is committed) and
        the base offset answered (of the batch it repeats, for a duplicate).
        ForwardError while the partition cannot be reached."""
        body = {"transactional_id": None, "acks": -1, "timeout": 30_000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}

        def answer(response: Any) -> Any:
            return self._partition_code(response, "name", "index", topic, partition,
                                        partitions="partition_responses")

        def code(response: Any) -> int:
            p = answer(response)
            return 6 if p is None else int(p.error_code)
        p = answer(await self._at_leader(topic, topic_id, partition, PRODUCE, 9, body, code))
        return (6, -1) if p is None else (int(p.error_code), int(p.base_offset))

    async def fetch(self, topic: str, topic_id: uuid.UUID, partition: int, offset: int,
                    max_bytes: int) -> tuple[int, bytes, int, int]:
        """(error code, records from `offset`, high watermark, log start offset) of the
        partition, as its leader answers a consumer's Fetch (v12, read_uncommitted).
        ForwardError while the partition cannot be reached."""
        body = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": max_bytes,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                    {"topic": topic, "partitions": [
                        {"partition": partition, "current_leader_epoch": -1,
                         "fetch_offset": offset, "last_fetched_epoch": -1,
                         "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
                "forgotten_topics_data": [], "rack_id": ""}

        def found(response: Any) -> Any:
            return self._partition_code(response, "topic", "partition_index", topic,
                                        partition)

        def code(response: Any) -> int:
            p = found(response)
            return 6 if p is None else int(p.error_code)
        p = found(await self._at_leader(topic, topic_id, partition, FETCH, 12, body, code))
        return (int(p.error_code), bytes(p.records or b""), int(p.high_watermark),
                int(p.log_start_offset))

    @staticmethod
    def asks_to_recover_share(client_id: str | None) -> bool:
        """A ShareFetch from another broker's share coordinator: load the share-partitions
        it names (`recover_share_partition`)."""
        return client_id == RECOVER_SHARE_CLIENT_ID

    async def recover_share_partition(self, key: tuple[str, uuid.UUID, int],
                                      topic: str) -> None:
        """Ask the leader of share-partition `key`'s partition to load it (after a
        restart its share coordinator, here, holds ARCHIVING records of it: the leader
        writes their dead letters, as a fetch there would make it do). ForwardError if
        no leader answers in time."""
        group_id, topic_id, partition = key
        body = {"group_id": group_id, "member_id": RECOVER_SHARE_CLIENT_ID,
                "share_session_epoch": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 0,
                "max_records": 0, "batch_size": 0, "topics": [{"topic_id": topic_id,
                "partitions": [{"partition_index": partition,
                                "acknowledgement_batches": []}]}],
                "forgotten_topics_data": []}

        def code(response: Any) -> int:
            if response.error_code:
                return int(response.error_code)
            for t in response.responses:
                for p in t.partitions:
                    if p.partition_index == partition:
                        return int(p.error_code)
            return 6
        response = await self._at_leader(topic, topic_id, partition, SHARE_FETCH, 1, body,
                                          code, client_id=RECOVER_SHARE_CLIENT_ID)
        if code(response):
            log.info("the leader of %s answered %d to loading it", key, code(response))

    async def create_topic(self, name: str, partitions: int,
                           configs: dict[str, str]) -> int:
        """A topic created by the controller (CreateTopics v7, as a client asks it), and
        followed here: the error code of its answer (0, or TOPIC_ALREADY_EXISTS).
        ForwardError if no controller can be reached."""
        body = {"topics": [{"name": name, "num_partitions": partitions,
                            "replication_factor": -1, "assignments": [],
                            "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                "timeout": 30_000, "validate_only": False}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONTROLLER_WAIT_S
        while True:
            target = self.broker(self.controller_id())
            if target is not None and target.node_id != self.node_id:
                response = await self.peers.call(target.host, target.port, CREATE_TOPICS, 7, body,
                                      CONTROLLER_WAIT_S)
                code = int(response.topics[0].error_code)
                if code == 41:  # NOT_CONTROLLER: it moved; ask the next one
                    await asyncio.sleep(0.1)
                    continue
                await self.follow_now(CONTROLLER_WAIT_S)  # this broker's image has it
                return code
            if loop.time() >= deadline:
                raise ForwardError("no other broker is the controller")
            await asyncio.sleep(0.1)

    async def end_offsets(self, partitions: list[tuple[str, uuid.UUID, int]],
                          timeout_s: float = COORDINATOR_TIMEOUT_S
                          ) -> dict[tuple[str, int], int]:
        """(topic, partition) -> high watermark of each of `partitions`: this broker's
        own, the others' in one ListOffsets (latest) per leader; a partition whose
        leader cannot be asked in time, or answers an error, is left out."""
        out: dict[tuple[str, int], int] = {}
        by_leader: dict[int, dict[str, list[int]]] = {}
        for topic, topic_id, partition in partitions:
            part = self.store.partition(topic, partition)
            if part is not None:
                out[(topic, partition)] = part.high_watermark
                continue
            leader, _epoch = self.leader(topic, topic_id, partition)
            if leader != self.node_id and self.broker(leader) is not None:
                by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)

        async def ask(leader: int, topics: dict[str, list[int]]) -> None:
            target = self.broker(leader)
            assert target is not None
            body = {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                    for p in parts]} for topic, parts in topics.items()]}
            try:
                response = await self.peers.call(target.host, target.port, LIST_OFFSETS, 7, body,
                                      timeout_s)
            except ForwardError as exc:
                log.info("end offsets: broker %d not reached: %s", leader, exc)
                return
            for t in response.topics:
                for p in t.partitions:
                    if not p.error_code:
                        out[(t.name, int(p.partition_index))] = int(p.offset)
        await asyncio.gather(*(ask(n, topics) for n, topics in by_leader.items()))
        return out
    async def served_elsewhere(self, wanted: list[tuple[str, uuid.UUID, int]],
                               timeout_s: float) -> bool:
        """Wait, up to `timeout_s`, until the partitions of `wanted` that other brokers
        lead are served there: their leader answers ListOffsets for them without
        UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER or LEADER_NOT_AVAILABLE (it
        has followed the metadata and taken them), so a new topic takes produce at its
        leaders at once, as on one node. A partition with no live leader (an existing
        one of a CreatePartitions whose broker died), a leader that cannot be asked in
        time (unreachable, or a listener that wants a login first) or that answers
        another error is not waited for. Whether all were seen served."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        pending = set(wanted)
        while True:
            by_leader: dict[int, tuple[BrokerInfo, list[tuple[str, uuid.UUID, int]]]] = {}
            for key in pending:
                leader, _epoch = self.leader(*key)
                target = self.broker(leader) if leader >= 0 else None
                # this broker's own (its caller waits for those), or no live leader (an
                # existing partition whose broker died: not this request's to wait for)
                if target is not None and leader != self.node_id:
                    by_leader.setdefault(leader, (target, []))[1].append(key)
            wait_s = max(min(deadline - loop.time(), COORDINATOR_TIMEOUT_S), 0.1)
            results = await asyncio.gather(*(self._not_served(target, keys, wait_s)
                                             for target, keys in by_leader.values()))
            pending = set().union(*results)
            if not pending:
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(SERVED_POLL_S)

    async def _not_served(self, target: BrokerInfo, keys: list[tuple[str, uuid.UUID, int]],
                          timeout_s: float) -> set[tuple[str, uuid.UUID, int]]:
        """Those of `keys` `target` does not serve yet (ListOffsets, latest)."""
        topics: dict[str, list[int]] = {}
        for topic, _tid, partition in keys:
            topics.setdefault(topic, []).append(partition)
        body = {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                        "timestamp": -1} for p in ps]}
            for t, ps in topics.items()]}
        try:
            response = await self.peers.call(target.host, target.port, LIST_OFFSETS, 7, body, timeout_s)
        except ForwardError as exc:
            log.info("broker %d not asked whether it serves new partitions: %s",
                     target.node_id, exc)
            return set()
        waiting = {(t.name, p.partition_index) for t in response.topics for p in t.partitions
                   if int(p.error_code) in NOT_SERVED_YET}
        return {k for k in keys if (k[0], k[2]) in waiting}

    def leader(self, topic: str, topic_id: uuid.UUID, partition: int) -> tuple[int, int]:
        """(leader, leader epoch) of a partition on the shared log."""
        part = self.store.partition(topic, partition)
        if part is not None:
            return self.node_id, part.leader_epoch
        leader, epoch = self.store.view.leader(topic_id, partition)
        if leader == self.node_id:  # handed over since the view was read
            return self.store.view.owner_of(topic_id, partition), epoch
        return leader, epoch

    def durable(self) -> Awaitable[None] | None:
        return self.metadata.durable()

    async def forward(self, ctx: RequestContext, request: Any) -> bytes:
        """The controller's answer to a metadata change asked of this broker. As Kafka's
        channel to the controller, it asks again (the controller of the moment) when the
        controller cannot be reached or answers NOT_CONTROLLER, until CONTROLLER_WAIT_S
        has passed: then ForwardError; EnvelopeRefused for any other envelope error."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONTROLLER_WAIT_S
        why = "no controller is live"
        while loop.time() < deadline:
            target = self.broker(self.controller_id())
            if target is not None and target.node_id != self.node_id:
                try:
                    return await forward(self.peers, target.host, target.port, ctx, request,
                                         max(deadline - loop.time(), 0.1))
                except EnvelopeRefused as exc:
                    if exc.code != E.not_controller:
                        raise
                    why = str(exc)
                except ForwardError as exc:
                    why = str(exc)
            await asyncio.sleep(0.1)
        raise ForwardError(f"not forwarded in {CONTROLLER_WAIT_S:.0f} s: {why}")

    async def allocate_producer_ids(self) -> tuple[int, int]:
        """A block of producer ids from the controller (AllocateProducerIds, KIP-730):
        (first id, length), answered once the controller has it durably. ForwardError
        if no other broker is the controller, it cannot be reached, or it refuses."""
        controller = self.controller_id()
        target = self.broker(controller)
        if target is None or controller == self.node_id:
            raise ForwardError("no other broker is the controller")
        response = await self.peers.call(target.host, target.port, ALLOCATE_PRODUCER_IDS, 0,
                              {"broker_id": self.node_id, "broker_epoch": -1},
                              CONTROLLER_WAIT_S)
        if response.error_code:
            raise ForwardError(f"controller {controller} answered AllocateProducerIds "
                               f"with error {response.error_code}")
        return int(response.producer_id_start), int(response.producer_id_len)

    async def follow_now(self, timeout_s: float) -> None:
        await self.metadata.caught_up(timeout_s)
