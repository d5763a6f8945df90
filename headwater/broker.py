"""Wires the components into one process: broker + controller (combined mode).

The broker builds the partition store, the controller (metadata records), the
coordinators and the wire server; it keeps the store's partitions in step with the
metadata image.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode as E

from . import __version__
from .api import register_all
from .api.services import Topology
from .cluster_parts import ClusterParts, ControllerTarget, check_controller
from .config import BrokerConfig, ConfigError, LogConfig
from .coordinator.runtime import ClusterShards, CoordinatorRuntime
from .faults import PRODUCE_ACK_BEFORE_COMMIT, Faults
from .fetch.service import FetchService
from .fetch.sessions import FetchSessionCache
from .group.coordinator import GroupCoordinator
from .group.offsets import PartitionCommit
from .group.streams.configured import InternalTopic
from .iceberg.launcher import (
    TableWriterLauncher,
    default_catalog,
    shared_catalog,
    writer_command,
    writer_env,
)
from .limits import open_file_capacity, raise_nofile_limit
from .log.fdcache import FILES
from .log.manager import partition_dir_name
from .log.store import LocalStore
from .metadata.assignments import reported_replicas
from .metadata.controller import METADATA_TOPIC, Controller, NewTopic
from .metadata.convert import convert_json_log
from .metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage, TopicImage
from .metadata.topics import INTERNAL_TOPICS
from .metrics import MetricsServer
from .one_node import OneNode
from .produce.service import ProduceService
from .quota.enforce import ClientQuotas
from .security import listeners, tls
from .security.access import AccessControl
from .security.inter_broker import credentials_setting, inter_broker_client, own_scram_user
from .security.sasl import SaslConfig, SaslSession
from .security.scram import MECHANISMS, ScramCredential
from .share.admin import ShareAdmin, ShareState
from .share.coordinator import SHARE_KEY_TYPE, ShareCoordinator
from .share.dead_letter import DeadLetterWriter
from .share.fetch_service import LocalMembers, ShareAssignments, ShareFetchService
from .share.manager import SharePartitionManager, SharePersister
from .share.remote import RemoteMembership, RemotePersister
from .share.sessions import ShareSessionCache
from .shared.cleaner import delete_orphans
from .shared.cluster import BrokerInfo, cluster_id
from .shared.database import OUTAGES
from .shared.errors import STARTUP_ERRORS
from .shared.metadata_log import SharedMetadata
from .shared.node import ClusterNode
from .shared.peers import Peers
from .shared.settings import SharedSettings
from .shared.store import SharedStore
from .shared.txn_remote import MarkerSender, RemoteVerifier
from .shared.upkeep import UpkeepSettings
from .storage.partition import Partition
from .storage.routed import RoutedStore
from .storage.store import PartitionStore
from .storage.waiters import PartitionWaiters
from .txn.coordinator import TRANSACTION_KEY_TYPE, ProducerIds, TransactionCoordinator
from .txn.offset_commit import TxnOffsetCommitter
from .txn.producer_id_blocks import ProducerIdBlocks
from .txn.verification import ProduceVerification
from .wire.codec import build
from .wire.dispatch import Dispatcher, RequestContext
from .wire.limits import ConnectionLimits
from .wire.peer_errors import ForwardError, PeerAuthenticationError
from .wire.schemas import load_request_schema
from .wire.server import KafkaServer

log = logging.getLogger("headwater.broker")

CREATE_TOPICS = 19
API_VERSIONS = 18
# CreateTopics waits at most this long for the new partitions to be taken (a topic of
# thousands of partitions answers before all are: clients retry LEADER_NOT_AVAILABLE).
READY_WAIT_MAX_S = 10.0
GROUP_KEY_TYPE = 0  # FindCoordinator's key types: 0 group, 1 transaction, 2 share


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _host_port(value: str) -> tuple[str, int]:
    value = value.split("://", 1)[-1]
    host, _, port = value.rpartition(":")
    return host or "127.0.0.1", int(port)


class StartupError(RuntimeError):
    """The broker cannot start with its configuration; the message names the setting."""


class Broker:
    # Built by `open`, every one of them, before anything is served (`_opened`): the
    # stores, the controller, the coordinators and the services the handlers use.
    local: LocalStore
    store: PartitionStore
    controller: Controller
    groups: GroupCoordinator
    transactions: TransactionCoordinator
    producer_ids: ProducerIds
    share_coordinator: ShareCoordinator
    txn_offsets: TxnOffsetCommitter[PartitionCommit]
    share_partitions: SharePartitionManager
    share_admin: ShareAdmin
    share_fetch: ShareFetchService
    fetch: FetchService
    produce: ProduceService
    produce_verification: ProduceVerification

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        # Test-only fault points armed by config keys (faults.py), read once.
        self.faults = Faults.from_config(config)
        self.node_id = config.get_int("node.id")
        self.data_dir = Path(config.get_str("log.dirs")).resolve()
        self.listeners = listeners.parse(config)
        first = self.listeners[0]
        #: Where the other brokers of a cluster reach this one.
        self.inter_broker = listeners.inter_broker(config, self.listeners)
        self.listen_host, self.listen_port = first.host, first.port
        self._advertised = ((first.advertised_host, first.advertised_port)
                            if config.get("advertised.listeners") else None)
        self.servers: list[KafkaServer] = []
        #: the SASL listeners' configs (an OAUTHBEARER one holds its JWKS refresher)
        self.sasl_configs: list[SaslConfig] = []
        self.now_ms = now_ms
        # `local`: every partition on one node; with the shared log, the metadata log's
        # cache. `store`: what services use, the local store or the shared log.
        self._opened = False
        #: A cluster broker's parts (`open_shared`); None on one node.
        self._parts: ClusterParts | None = None
        self._background: set[asyncio.Future[None]] = set()
        #: This broker's place in a cluster (headwater.storage=shared), else None.
        self.cluster: ClusterNode | None = None
        #: Where the brokers, the controller and the coordinators are: this broker
        #: alone, or the cluster once the shared log is open (`open_shared`).
        self.topology: Topology = OneNode(self.node_id, self._advertised_on)
        self.metrics: MetricsServer | None = None
        #: Starts the Iceberg table writer once a topic asks for a table.
        self.table_writer: TableWriterLauncher | None = None
        #: The shared log's settings (a cluster's broker): its table writer's catalog.
        self._shared_settings: SharedSettings | None = None
        self.server: KafkaServer | None = None
        self.dispatcher = Dispatcher()
        self.cluster_id = ""
        self._tasks: list[asyncio.Task[None]] = []
        self._log_configs: dict[str, LogConfig] = {}
        # Services the API handlers use (built here, not by the handlers): parked long
        # polls of Fetch and ShareFetch, and the two session caches.
        self.partition_waiters = PartitionWaiters()
        self.fetch_sessions = FetchSessionCache(
            config.get_int("max.incremental.fetch.session.cache.slots"))
        self.share_sessions = ShareSessionCache(
            config.get_int("group.share.max.share.sessions"))
        # FindCoordinator key types served here (0 group; 1 transaction and 2 share
        # once their coordinators run).
        self.coordinator_key_types: set[int] = {GROUP_KEY_TYPE}
        #: A cluster's coordinator shards: each where the shared log places its
        #: partition ("spread", the default), or all with the controller.
        self._spread = config.get("headwater.shared.coordinators") != "controller"

    # ---- lifecycle -----------------------------------------------------------------
    @property
    def advertised(self) -> tuple[str, int]:
        if self._advertised is not None:
            return self._advertised
        host = self.listen_host if self.listen_host not in ("0.0.0.0", "") else "127.0.0.1"
        return host, self.listen_port

    def _broker_info(self) -> BrokerInfo:
        """What this broker registers: its inter-broker address and every listener's."""
        inter = self.inter_broker
        return BrokerInfo(
            self.node_id, inter.advertised_host, inter.advertised_port,
            self.config.get("broker.rack") or None,
            tuple((li.name, li.advertised_host, li.advertised_port)
                  for li in self.listeners))

    def _topic_size(self, topic_id: uuid.UUID) -> int | None:
        """A topic's partition count in the metadata image: placement spreads it evenly.
        None for the coordinators' topics: placed by rendezvous alone, a broker's death
        moves only its own shards (a shard's move is a coordinator's failover, every
        group on it rejoins; a data partition's is a leader change clients retry)."""
        topic = self.image.topic_by_id(topic_id)
        if topic is None or topic.name in INTERNAL_TOPICS:
            return None
        return len(topic.partitions)

    async def open_shared(self) -> None:
        """headwater.storage=shared: connect the shared log (database migrated, object
        store probed) before `open`; a wrong setting raises one clear error."""
        placement = self.config.get_str("headwater.shared.coordinators")
        if placement not in ("spread", "controller"):
            raise StartupError(f"headwater.shared.coordinators={placement!r}: expected "
                               "spread (each coordinator shard on its own lease) or "
                               "controller (every shard with the controller)")
        try:
            settings = SharedSettings.from_config(self.config)
            self._shared_settings = settings
            shared = SharedStore(
                settings, self.node_id, self.data_dir / "shared-cache", self.now_ms,
                linger_ms=self.config.get_int("headwater.shared.commit.linger.ms"),
                lease_ms=self.config.get_int("headwater.shared.lease.ms"),
                listed_ms=self.config.get_int("broker.session.timeout.ms"),
                inline_max_bytes=self.config.get_int("headwater.shared.inline.max.bytes"),
                retention_check_ms=self.config.get_int("log.retention.check.interval.ms"),
                upkeep=UpkeepSettings(
                    interval_ms=self.config.get_int("log.cleaner.backoff.ms"),
                    merge_bytes=self.config.get_int("headwater.shared.merge.bytes"),
                    merge_age_ms=self.config.get_int("headwater.shared.merge.age.ms"),
                    merge_pieces=self.config.get_int("headwater.shared.merge.pieces"),
                    object_max_bytes=self.config.get_int(
                        "headwater.shared.merge.object.max.bytes")),
                reserved=(METADATA_TOPIC,),
                advertised=self._broker_info(), on_marker=self._offsets_marker,
                # every coordinator shard with the controller: served while it leads
                with_controller=() if self._spread else INTERNAL_TOPICS,
                controller_active=self._leads_metadata, topic_size=self._topic_size)
            await shared.open(wait_s=self.config.get_int(
                "headwater.shared.startup.wait.ms") / 1000, register=False)
            meta = SharedMetadata(shared, self.data_dir / partition_dir_name(METADATA_TOPIC, 0))
            await meta.download()
            async with shared.pool.acquire() as conn:
                shared_id = await cluster_id(conn, uuid.uuid4().hex[:22])
            peers = Peers(inter_broker_client(self.config, self.inter_broker),
                          credentials_setting(self.inter_broker, self.config.get_str(
                              "sasl.mechanism.inter.broker.protocol")))
            node = ClusterNode(shared, meta, peers, self._shard_of if self._spread else None)
            self._parts = ClusterParts(
                shared, meta, node,
                ProducerIdBlocks(functools.partial(self._fetch_producer_ids, node)),
                shared_id)
            self.cluster = self.topology = node
        except STARTUP_ERRORS as exc:
            raise StartupError(str(exc)) from exc
        except ConfigError as exc:  # the inter-broker listener's client settings
            raise StartupError(str(exc)) from exc
        log.info("shared log: database %s, objects %s", settings.redacted_database(),
                 settings.objects)

    def open(self) -> None:
        """Open storage and replay metadata (synchronous: nothing is served yet)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        parts = self._parts
        self.cluster_id = (self._load_meta_properties() if parts is None
                           else parts.cluster_id)
        FILES.set_capacity(self.config.get_int("headwater.max.open.partition.files",
                                               open_file_capacity(raise_nofile_limit())))
        local = self.local = LocalStore(
            self.data_dir, self.now_ms,
            retention_check_ms=self.config.get_int("log.retention.check.interval.ms"),
            cleaner_backoff_ms=self.config.get_int("log.cleaner.backoff.ms"),
            reserved=(METADATA_TOPIC,))
        # On the shared log every topic is shared, the coordinators' included (they
        # follow the controller: `ControllerTarget`); the local store keeps the
        # metadata log's cache.
        self.store = (local if parts is None
                      else RoutedStore(parts.shared, local, ()))
        meta_config = LogConfig.resolve(self.config, {
            "segment.bytes": str(self.config.get_int("metadata.log.segment.bytes")),
            "retention.ms": "-1"})
        convert_json_log(local.manager.path_for(METADATA_TOPIC, 0))
        meta_log = local.open_reserved(METADATA_TOPIC, meta_config)
        self.controller = Controller(
            meta_log, self.config, self.now_ms, self.faults,
            max_partitions=self.config.get_int("headwater.max.partitions"),
            snapshot_runner=self._run_snapshot, brokers=self.broker_ids,
            writer_check=None if parts is None else functools.partial(
                check_controller, parts.meta),
            written=None if parts is None else parts.meta.written)
        self.controller.load()
        self._sync_logs(MetadataImage(), self.controller.image, lazy=True)
        self.controller.subscribe(self._sync_logs)
        self.fetch = FetchService(self.store, self.partition_waiters, self.fetch_sessions,
                                  self.now_ms)
        self._build_coordinators(self.controller, self.store)
        self._build_share_services(self.groups, self.share_coordinator)
        controller = self.controller
        self.quotas = ClientQuotas(self.config, lambda: controller.image.client_quotas,
                                   self.now_ms)
        self.access = AccessControl(self.config.get, lambda: controller.image.acls)
        self.produce = self._build_produce(controller, self.store)
        register_all(self.dispatcher, self)
        self._opened = True

    def _build_produce(self, controller: Controller, store: PartitionStore) -> ProduceService:
        quotas, faults = self.quotas, self.faults

        def in_sync(topic: TopicImage, partition: int) -> int:
            """The in-sync replicas of a partition this broker leads: itself on one node;
            on the shared log as many live brokers as its replication factor (an acks=all
            append is acknowledged once committed to PostgreSQL and the object store,
            which every one of them reads: metadata/assignments.py)."""
            if self.cluster is None:
                return 1
            stored = next((p.replicas for p in topic.partitions
                           if p.partition_id == partition), ())
            return len(reported_replicas(stored, self.node_id, self.broker_ids()))

        def throttle(ctx: RequestContext, size: int) -> int:
            return (quotas.throttle(quotas.produce, ctx, size)
                    if controller.image.client_quotas else 0)

        return ProduceService(
            store, lambda: controller.image, self.access, self.produce_verification,
            in_sync, throttle, self.now_ms, transactions=True,
            ack_early=faults.armed(PRODUCE_ACK_BEFORE_COMMIT),  # a planted bug (faults.py)
            hit=lambda: faults.hit(PRODUCE_ACK_BEFORE_COMMIT))

    def broker_ids(self) -> list[int]:
        """The ids of the live brokers: this one on one node."""
        return [b.node_id for b in self.topology.brokers()]

    def _build_coordinators(self, controller: Controller, store: PartitionStore) -> None:
        """The group, transaction and share coordinators, each given what it uses."""

        def image() -> MetadataImage:
            return controller.image

        # A cluster's shards follow the shared log: each where it places the shard's
        # partition ("spread"), or all with the controller (`ControllerTarget`).
        parts = self._parts
        shards = None if parts is None else ClusterShards(
            parts.shared if self._spread else None)
        self.groups = GroupCoordinator(self.config, image=image, metadata=controller,
                                       partitions=store, topics=controller,
                                       clock=self.now_ms, cluster=shards)
        #: Producer ids: the controller's (one node), or blocks from it (a cluster).
        self.producer_ids = controller if parts is None else parts.producer_id_blocks
        self.transactions = TransactionCoordinator(
            self.config, image=image, partitions=store, topics=controller,
            clock=self.now_ms, producer_ids=self.producer_ids, offsets=self.groups.runtime,
            faults=self.faults,
            remote_markers=None if self.cluster is None else MarkerSender(
                self.cluster, lambda name: getattr(image().topic(name), "topic_id", None),
                self.faults, ordered=self._spread), cluster=shards)
        self.share_coordinator = ShareCoordinator(
            self.config, image=image, metadata=controller, store=store, topics=controller,
            clock=self.now_ms, cluster=shards)
        remote = None if self.cluster is None else RemoteVerifier(self.cluster)
        self.txn_offsets = TxnOffsetCommitter(self.transactions, self.groups, remote)
        self.produce_verification = ProduceVerification(
            self.transactions, self.config.get_bool("transaction.partition.verification.enable"),
            remote=remote)

    def _build_share_services(self, groups: GroupCoordinator,
                              coordinator: ShareCoordinator) -> None:
        """The share-partition leaders (with their dead-letter writer) and the share
        admin, subscribed to the loads of the coordinators they recover from."""
        controller, store = self.controller, self.store

        def image() -> MetadataImage:
            return controller.image

        dead_letters = DeadLetterWriter(self.config, image=image, store=store,
                                        topics=controller, clock=self.now_ms,
                                        faults=self.faults, remote=self.cluster,
                                        producer_ids=self.producer_ids)
        # In a cluster a leader's coordinators, and the share coordinator of a group's
        # share-partitions, may be on other brokers (share/remote.py).
        persister: SharePersister = coordinator
        state: ShareState = coordinator
        members: ShareAssignments = LocalMembers(groups)
        if self.cluster is not None:
            remote = RemotePersister(coordinator, self.cluster, retry_s=self.config.get_int(
                "headwater.shared.lease.ms") / 1000 + 5)  # through a takeover
            persister = state = remote
            members = RemoteMembership(groups, self.cluster)
        self.share_partitions = SharePartitionManager(
            persister, groups, self.partition_waiters, dead_letters, image=image,
            partitions=store, clock=self.now_ms,
            remote_recovery=None if self.cluster is None
            else self.cluster.recover_share_partition)
        coordinator.subscribe_load(self.share_partitions.recover_dead_letters)
        # Group configs are dynamic: loaded leaders follow them (after `_sync_logs`).
        controller.subscribe(lambda _old, _new: self.share_partitions.refresh_configs())
        end_offset = None
        if self.cluster is not None:
            cluster = self.cluster

            async def end_offset(topic: str, partition: int) -> int | None:
                found = image().topic(topic)
                return None if found is None else await cluster.end_offset(
                    topic, found.topic_id, partition)
        self.share_admin = ShareAdmin(
            groups, state, self.share_partitions, image=image, partitions=store,
            faults=self.faults, end_offset=end_offset)
        groups.runtime.subscribe_load(self.share_admin.group_partition_loaded)
        self.share_fetch = ShareFetchService(self.share_partitions, self.share_sessions,
                                             members)
        groups.add_share_member_listener(self.share_fetch.member_left)

    async def start(self) -> None:
        if self.config.get_str("headwater.storage") != "local":
            await self.open_shared()
        self.open()
        parts = self._parts
        if parts is not None:
            await self._join_cluster(parts)
        self.connection_limits = ConnectionLimits.from_config(self.config)
        self.servers = [self._server_for(listener) for listener in self.listeners]
        self.server = self.servers[0]
        for sasl_config in self.sasl_configs:  # OAUTHBEARER's first JWKS fetch
            try:
                await asyncio.to_thread(sasl_config.load)
            except ConfigError as exc:
                raise StartupError(str(exc)) from None
        await self.groups.start()
        if parts is not None:
            parts.producer_id_blocks.start()
        await self.transactions.start()
        self.coordinator_key_types.add(TRANSACTION_KEY_TYPE)
        await self.share_coordinator.start()
        self.coordinator_key_types.add(SHARE_KEY_TYPE)
        for server in self.servers:
            await server.start()
        self.listen_port = self.server.port
        metrics_listen = self.config.get("headwater.metrics.listen")
        if metrics_listen:
            host, port = _host_port(metrics_listen)
            self.metrics = MetricsServer(self, host, port)
            await self.metrics.start()
        self.store.start()
        self._start_table_writer()
        self._tasks.append(asyncio.create_task(self._chores()))
        host, port = self.advertised
        log.info("headwater %s started: node %d, listener %s:%d (advertised %s:%d), "
                 "data dir %s, cluster id %s", __version__, self.node_id, self.listen_host,
                 self.listen_port, host, port, self.data_dir, self.cluster_id)

    def _start_table_writer(self) -> None:
        """The Iceberg table writer (a child process), once some topic has
        `headwater.iceberg.mode` set: it reads this broker's listener as a client. Its
        catalog: SQLite in the data directory on one node, the shared log's PostgreSQL
        and object store on a cluster (unless `headwater.iceberg.catalog.uri` says)."""
        properties: dict[str, str] = {}
        catalog_dir: Path | None = None
        if self._shared_settings is not None:
            uri, warehouse, properties = shared_catalog(self._shared_settings)
        else:
            uri, warehouse = default_catalog(self.data_dir)
            catalog_dir = self.data_dir / "iceberg"
        host = self.listen_host if self.listen_host not in ("", "0.0.0.0", "::") \
            else "127.0.0.1"
        self.table_writer = TableWriterLauncher(writer_command(
            f"{host}:{self.listen_port}", self.node_id,
            self.config.get("headwater.iceberg.warehouse") or warehouse,
            self.config.get_str("headwater.iceberg.namespace")),
            catalog_dir=catalog_dir,
            env=writer_env(self.config.get("headwater.iceberg.catalog.uri") or uri,
                           properties))
        self.controller.subscribe(self.table_writer.on_image)
        self.table_writer.on_image(self.image, self.image)

    async def stop(self) -> None:
        if self.table_writer is not None:
            await asyncio.to_thread(self.table_writer.stop)
        for task in self._tasks:
            task.cancel()
        for server in self.servers:
            await server.stop()
        for sasl_config in self.sasl_configs:  # a JWKS fetch in flight may take a moment
            await asyncio.to_thread(sasl_config.close)
        if self.metrics is not None:
            await self.metrics.stop()
        self.coordinator_key_types.intersection_update({GROUP_KEY_TYPE})
        parts = self._parts
        if self._opened:
            await self.transactions.stop()
            if parts is not None:
                await parts.producer_id_blocks.stop()
            await self.share_coordinator.stop()
            await self.groups.stop()
        if parts is not None:
            await parts.meta.close()
            await parts.node.peers.close()
        if self._opened:
            await self.store.close()
        log.info("headwater stopped; logs flushed and closed")

    # ---- the cluster (headwater.storage=shared) -------------------------------------
    async def _join_cluster(self, parts: ClusterParts) -> None:
        """Follow the shared metadata log (or take the controller lease), then wait until
        the image has the coordinators' internal topics (the controller creates them
        when it takes over), so the coordinators start as on one node."""
        shared, meta, cluster = parts.shared, parts.meta, parts.node
        meta.start(ControllerTarget(self.controller, self.coordinator_runtimes(), shared,
                                     self.local,
                                     spread=self._spread, leads=self._leads_metadata,
                                     own_user=own_scram_user(cluster.peers.client)))
        wanted = [rt.topic for rt in self.coordinator_runtimes()]
        deadline = time.monotonic() + self.config.get_int(
            "headwater.shared.join.timeout.ms") / 1000
        # ... and until some broker is the controller (this one, restarted, takes its
        # own lease back at once): its coordinators answer from then on, not
        # NOT_COORDINATOR to a client that found this broker through a stale view.
        # The view is read again meanwhile (the heartbeats that refresh it start with
        # the store, after this): one read a moment before the controller's first
        # heartbeat after its own restart saw no live controller, and the broker waited
        # the whole timeout for it (a restarted trio in make test-cluster).
        read_at = time.monotonic()
        while not all(self.image.topic(t) is not None for t in wanted) or \
                cluster.controller_id() in (-1, self.node_id) and not meta.active:
            if time.monotonic() > deadline:
                raise StartupError("no controller created the internal topics within "
                                   "headwater.shared.join.timeout.ms: is the shared "
                                   "database reachable by every broker?")
            await asyncio.sleep(0.05)
            if time.monotonic() - read_at >= shared.refresh_s:
                read_at = time.monotonic()
                try:
                    await asyncio.wait_for(shared.refresh_view(register=False),
                                           shared.lease_ms / 1000)
                except OUTAGES as exc:
                    log.warning("reading the cluster's state failed: %s: %s",
                                type(exc).__name__, exc)
        # Registered (listed to clients, given partitions) only once the others accept
        # its credentials: a refused broker is never listed, even for a moment.
        await self._check_peer_login(cluster)
        await shared.refresh_view()

    async def _check_peer_login(self, cluster: ClusterNode) -> None:
        """This broker's inter-broker credentials, tried on the controller at start: a
        broker the others would refuse stops here with one line naming the setting,
        rather than serve and fail every request it sends them."""
        controller = cluster.broker(cluster.controller_id())
        if controller is None or controller.node_id == self.node_id:
            return
        try:
            await cluster.peers.call(controller.host, controller.port, API_VERSIONS, 3,
                                     {"client_software_name": "headwater",
                                      "client_software_version": __version__}, 10.0)
        except PeerAuthenticationError as exc:
            raise StartupError(str(exc)) from None
        except ForwardError as exc:  # not reached now: requests will try again
            log.warning("the controller's inter-broker listener not reached: %s", exc)

    def _leads_metadata(self) -> bool:
        """This broker holds the controller lease (writes the shared metadata log)."""
        return self._parts is not None and self._parts.meta.active

    def _offsets_marker(self, topic: str, partition: int, producer_id: int, epoch: int,
                        commit: bool, offset: int) -> None:
        """A marker held on a coordinator topic's partition here is committed: for
        `__consumer_offsets`, a transaction's offsets, committed with its other markers
        by a coordinator on any broker, become committed here (KIP-447)."""
        if self._opened and topic == self.groups.runtime.topic:
            self.groups.runtime.replay_marker(partition, producer_id, epoch, commit, offset)

    def _shard_of(self, key: str, key_type: int) -> tuple[str, uuid.UUID, int] | None:
        """The coordinator shard of a FindCoordinator key (`ClusterNode.shard_of`)."""
        runtimes = self.coordinator_runtimes()
        if not 0 <= key_type < len(runtimes):
            return None
        runtime = runtimes[key_type]  # group (0), transaction (1), share (2)
        topic = self.image.topic(runtime.topic)
        if topic is None:
            return None
        return runtime.topic, topic.topic_id, runtime.partition_for(key)

    async def _fetch_producer_ids(self, cluster: ClusterNode) -> tuple[int, int]:
        """A block of producer ids for this broker of a cluster (`ProducerIdBlocks`):
        from the controller's own allocator when this broker is the controller, once
        the block is durable; else from the controller in AllocateProducerIds."""
        controller = self.controller
        if not cluster.is_controller():
            return await cluster.allocate_producer_ids()
        block = controller.allocate_producer_ids(self.node_id)
        durable = cluster.durable()
        if durable is not None:
            await durable
        return block

    def coordinator_runtimes(self) -> list[CoordinatorRuntime]:
        return [self.groups.runtime, self.transactions.runtime,
                self.share_coordinator.runtime]

    def auto_create_elsewhere(self, ctx: RequestContext, names: list[str]) -> None:
        """Metadata asked for unknown topics with auto-creation on a broker that is not
        the controller: the controller is asked to create them (in the background)."""
        if self.cluster is None:  # one node: Metadata creates them itself
            return
        self._create_on_controller(ctx, [{"name": n, "num_partitions": -1,
                                          "replication_factor": -1} for n in names])

    def create_internal_topics(self, ctx: RequestContext,
                               topics: Sequence[InternalTopic]) -> None:
        """A streams group's missing repartition and changelog topics (Kafka's
        AutoTopicCreationManager.createStreamsInternalTopics): made by the controller,
        here or on the controller's broker; a failure is logged (the next heartbeat
        reports them missing again and asks again)."""
        if self.cluster is None or self.cluster.is_controller():
            results = self.controller.create_topics(
                [NewTopic(t.name, t.partitions, t.replication_factor,
                          configs=dict(t.configs)) for t in topics], allow_internal=False)
            for topic, error, _ in results:
                if error is not None and error.code != E.topic_already_exists:
                    log.warning("creating streams internal topic %s failed: %s", topic.name,
                                error)
            return
        self._create_on_controller(ctx, [
            {"name": t.name, "num_partitions": t.partitions,
             "replication_factor": t.replication_factor,
             "configs": [{"name": k, "value": v} for k, v in t.configs]} for t in topics])

    def _create_on_controller(self, ctx: RequestContext, topics: list[dict[str, Any]]) -> None:
        """CreateTopics forwarded to the controller, in the background."""
        cluster = self.cluster
        assert cluster is not None
        names = [t["name"] for t in topics]
        request = build(load_request_schema(CREATE_TOPICS, 4), {
            "topics": topics, "timeout_ms": 30_000})
        inner = RequestContext(CREATE_TOPICS, 4, 0, ctx.client_id, ctx.client_host,
                               ctx.connection_id, dict(ctx.attrs))

        async def create() -> None:
            try:
                await cluster.forward(inner, request)
                await cluster.follow_now(5.0)
            except Exception as exc:
                log.warning("auto-creating %s on the controller failed: %s",
                            ", ".join(names), exc)
        task = asyncio.ensure_future(create())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def is_controller(self) -> bool:
        return self.topology.is_controller()

    def _server_for(self, listener: listeners.Listener) -> KafkaServer:
        ssl_context = tls.server_context(self.config, listener) if listener.tls else None
        factory = None
        if listener.sasl:
            try:
                sasl_config = SaslConfig(self.config, listener, self._scram_credential)
            except ConfigError as exc:
                raise StartupError(str(exc)) from None
            self.sasl_configs.append(sasl_config)

            def factory() -> SaslSession:
                return SaslSession(sasl_config)
        return KafkaServer(self.dispatcher, listener.host, listener.port,
                           self.config.get_int("socket.request.max.bytes"),
                           listener=listener.name, ssl_context=ssl_context,
                           session_factory=factory,
                           principal_of=tls.peer_principal if listener.tls else None,
                           limits=self.connection_limits,
                           request_quota=self.quotas.request_time,
                           request_quota_active=self.quotas.any,
                           connection_quota=self.quotas.connection_throttle)

    def _scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        rec = self.image.scram.get((user, MECHANISMS[mechanism][0]))
        if rec is None:
            return None
        return ScramCredential(rec.salt, rec.stored_key, rec.server_key, rec.iterations)

    def _advertised_on(self, name: str | None) -> tuple[str, int]:
        """The advertised address of the listener named `name`, the first's if none is
        (Kafka answers Metadata and FindCoordinator with the client's own listener)."""
        for listener, server in zip(self.listeners, self.servers, strict=False):
            if listener.name == name:
                return listener.advertised_host, listener.advertised_port or server.port
        return self.advertised

    def _load_meta_properties(self) -> str:
        path = self.data_dir / "meta.properties"
        if path.exists():
            props = dict(line.split("=", 1) for line in path.read_text().splitlines()
                         if "=" in line and not line.startswith("#"))
            return props.get("cluster.id", "")
        cluster_id = uuid.uuid4().hex[:22]
        path.write_text(f"version=1\ncluster.id={cluster_id}\nnode.id={self.node_id}\n")
        return cluster_id

    async def _chores(self) -> None:
        """The broker's own periodic work (the store keeps its partitions itself): a
        time-based metadata snapshot, unloading idle share-partitions (their state
        stays persisted) every `log.retention.check.interval.ms`, and on the shared
        log's controller (one broker at a time) the orphan-object cleaner."""
        unload_every = self.config.get_int("log.retention.check.interval.ms") / 1000
        clean_every = self.config.get_int("headwater.shared.cleaner.interval.ms") / 1000
        last_unload = last_clean = time.monotonic()
        while True:
            await asyncio.sleep(1.0)
            parts = self._parts
            if (parts is not None and self.is_controller()
                    and time.monotonic() - last_clean >= clean_every):
                last_clean = time.monotonic()
                self._clean_objects(parts.shared)
            try:
                self.controller.maybe_snapshot()  # a time-based snapshot with no commit
                if time.monotonic() - last_unload >= unload_every:
                    last_unload = time.monotonic()
                    self.share_partitions.unload_idle(self.now_ms())
            except Exception:
                log.exception("background chore failed")

    def _clean_objects(self, shared: SharedStore) -> None:
        async def clean() -> None:
            try:
                deleted = await delete_orphans(
                    shared.pool, shared.objects, older_than_s=self.config.get_int(
                        "headwater.shared.cleaner.min.age.ms") / 1000)
            except Exception as exc:
                log.warning("orphan-object cleaner failed: %s: %s", type(exc).__name__, exc)
                return
            if deleted:
                log.info("orphan-object cleaner deleted %d objects", deleted)
        task = asyncio.ensure_future(clean())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _run_snapshot(self, job: Callable[[], object],
                      done: Callable[[BaseException | None], None]) -> None:
        """A metadata snapshot is encoded and written in the executor (the image is
        immutable); `done` runs back on the loop, where the controller lives."""
        future = asyncio.get_running_loop().run_in_executor(None, job)

        def finished(f: asyncio.Future[object]) -> None:
            done(asyncio.CancelledError() if f.cancelled() else f.exception())
        future.add_done_callback(finished)

    # ---- metadata -> logs ----------------------------------------------------------
    @property
    def image(self) -> MetadataImage:
        return self.controller.image

    def log_config(self, topic: str) -> LogConfig:
        overrides = self.image.resource_configs(TOPIC_RESOURCE, topic)
        return LogConfig.resolve(self.config, overrides)

    def _sync_logs(self, old: MetadataImage, new: MetadataImage, lazy: bool = False) -> None:
        """Create, update and remove partitions so the store matches the new image
        (dynamic broker configs first: they are the defaults of every topic's configs).
        At start (`lazy`) every partition of the image is ensured; later only new ones
        and those of topics whose configs changed."""
        self.config.set_dynamic(new.resource_configs(BROKER_RESOURCE, ""),
                                new.resource_configs(BROKER_RESOURCE, str(self.node_id)))
        for name, topic in old.topics_by_name.items():
            current = new.topics_by_name.get(name)
            if current is None or current.topic_id != topic.topic_id:
                for part in topic.partitions:
                    self.store.remove(name, part.partition_id)
                self._log_configs.pop(name, None)
        for name, topic in new.topics_by_name.items():
            config = self.log_config(name)
            changed = self._log_configs.get(name) != config
            self._log_configs[name] = config
            previous = old.topics_by_name.get(name)
            known = (len(previous.partitions)
                     if previous is not None and previous.topic_id == topic.topic_id else 0)
            for part in topic.partitions:
                if lazy or changed or part.partition_id >= known:
                    self.store.ensure(name, part.partition_id, config,
                                      topic_id=topic.topic_id)

    def partitions_ready(self, topics: Iterable[str], timeout_s: float
                         ) -> Awaitable[None] | None:
        """On a store that takes partitions in the background (the shared log): wait,
        up to `timeout_s`, until every partition of `topics` is served by its leader
        (here, or in a cluster by the broker that takes it once it has followed the
        committed change), so a CreateTopics answer means the topic takes produce at
        once, on one node as on several. None on the local store (its partitions are
        there as soon as the image has them)."""
        if self._parts is None:
            return None
        ready = self.store.ready
        wanted = [(t.name, t.topic_id, p.partition_id) for t in map(self.image.topic, topics)
                  if t is not None for p in t.partitions]
        if not wanted:
            return None
        names = ", ".join(topics)
        timeout_s = min(timeout_s, READY_WAIT_MAX_S)
        cluster = self.cluster

        async def wait() -> None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            try:
                await asyncio.wait_for(asyncio.gather(*(ready(t, p) for t, _i, p in wanted)),
                                       timeout_s)
            except TimeoutError:
                log.warning("partitions of %s not taken within %.1f s", names, timeout_s)
                return
            if cluster is None or not cluster.is_controller():
                return
            durable = cluster.durable()  # the others follow only what is committed
            if durable is not None:
                await durable
            if not await cluster.served_elsewhere(wanted, max(deadline - loop.time(), 0.0)):
                log.warning("partitions of %s not served by their leaders within %.1f s",
                            names, timeout_s)
        return wait()

    def partition(self, topic: str, partition: int) -> Partition | None:
        """A topic partition (never the metadata log: see `LocalStore`)."""
        return self.store.partition(topic, partition)

    def absent_error(self, topic: str, partition: int) -> int:
        """The error for a partition this broker does not serve (`PartitionStore`)."""
        return self.store.absent_error(topic, partition)

    def topic(self, name: str) -> TopicImage | None:
        return self.image.topic(name)
