"""What handlers may use of the broker, one capability per protocol.

Each API module declares the few capabilities its handlers use as a `Services`
protocol of its own (`class Services(HasAccess, HasImage, Protocol)`), so a reader
sees at its top what it touches, a test can hand it a small fake, and no handler
module imports the assembly (`broker.py`). The assembly satisfies all of them
structurally; mypy checks that where it calls `register_all`.

Read-only properties: a handler reads the services it was given, it never swaps one.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..coordinator.runtime import CoordinatorRuntime
    from ..fetch.service import FetchService
    from ..group.coordinator import GroupCoordinator
    from ..group.offsets import PartitionCommit
    from ..metadata.controller import Controller
    from ..metadata.image import MetadataImage
    from ..produce.service import ProduceService
    from ..quota.enforce import ClientQuotas
    from ..security.access import AccessControl
    from ..security.listeners import Listener
    from ..share.admin import ShareAdmin
    from ..share.coordinator import ShareCoordinator
    from ..share.fetch_service import ShareFetchService
    from ..share.manager import SharePartitionManager
    from ..storage.partition import Partition
    from ..storage.store import PartitionStore
    from ..txn.coordinator import ProducerIds, TransactionCoordinator
    from ..txn.offset_commit import TxnOffsetCommitter
    from ..wire.dispatch import RequestContext
    from ..wire.server import KafkaServer


class HasAccess(Protocol):
    @property
    def access(self) -> AccessControl: ...


class HasImage(Protocol):
    @property
    def image(self) -> MetadataImage: ...


class HasController(Protocol):
    @property
    def controller(self) -> Controller: ...

    def is_controller(self) -> bool: ...


class HasIdentity(Protocol):
    """This broker's and its cluster's ids."""

    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...


class HasConfig(Protocol):
    @property
    def config(self) -> BrokerConfig: ...


class Peer(Protocol):
    """A live broker of the cluster as handlers name it to clients."""

    @property
    def node_id(self) -> int: ...

    @property
    def rack(self) -> str | None: ...

    def address(self, listener: str | None) -> tuple[str, int]: ...


class Topology(Protocol):
    """Where the brokers, the controller and the coordinators are: one node's
    (`one_node.py`) or a cluster's (`shared/node.py`'s `ClusterNode`), chosen once by
    the assembly."""

    def brokers(self) -> Sequence[Peer]: ...

    def is_controller(self) -> bool: ...

    def controller_id(self) -> int: ...

    def coordinator(self, key: str, key_type: int = 0) -> Peer | None: ...


class Cluster(Topology, Protocol):
    """What handlers ask of the shared log's cluster beyond its topology: the requests
    that cross to another broker."""

    @property
    def spreads_coordinators(self) -> bool:
        """Coordinator shards where the shared log places their partitions (else all
        with the controller)."""

    def leader(self, topic: str, topic_id: uuid.UUID, partition: int) -> tuple[int, int]: ...

    def durable(self) -> Awaitable[None] | None: ...

    def follow_now(self, timeout_s: float) -> Coroutine[Any, Any, None]: ...

    def forward(self, ctx: RequestContext, request: Any) -> Coroutine[Any, Any, bytes]: ...

    def end_offsets(self, partitions: list[tuple[str, uuid.UUID, int]],
                    timeout_s: float = ...) -> Coroutine[Any, Any, dict[tuple[str, int], int]]:
        ...

    def asks_to_hold(self, client_id: str | None) -> bool: ...

    def asks_to_confirm(self, client_id: str | None) -> bool: ...

    def asks_to_recover_share(self, client_id: str | None) -> bool: ...

    def hold_marker(self, topic: str, partition: int, producer_id: int,
                    producer_epoch: int, commit: bool, coordinator_epoch: int,
                    transaction_version: int) -> int | Awaitable[int]: ...

    def confirm_marker(self, topic: str, partition: int, producer_id: int,
                       producer_epoch: int, commit: bool, timeout_s: float
                       ) -> Coroutine[Any, Any, int]: ...


class HasCluster(Protocol):
    """This broker's place in a cluster: its topology (on one node too), the shared
    log's cluster (None on one node) and the live brokers."""

    @property
    def topology(self) -> Topology: ...

    @property
    def cluster(self) -> Cluster | None: ...

    def broker_ids(self) -> list[int]: ...


class HasListeners(Protocol):
    @property
    def listeners(self) -> list[Listener]: ...

    @property
    def servers(self) -> list[KafkaServer]: ...


class HasInterBroker(Protocol):
    @property
    def inter_broker(self) -> Listener:
        """The listener the other brokers of a cluster reach this one on."""


class HasClock(Protocol):
    @property
    def now_ms(self) -> Callable[[], int]: ...


class HasPartitions(Protocol):
    """The partitions this broker serves."""

    def partition(self, topic: str, partition: int) -> Partition | None: ...

    def absent_error(self, topic: str, partition: int) -> int: ...


class HasStore(Protocol):
    @property
    def store(self) -> PartitionStore: ...


class HasDataDir(Protocol):
    @property
    def data_dir(self) -> Path: ...


class HasTopicCreation(Protocol):
    """Topics made elsewhere (auto-creation on another broker) and waited for."""

    def auto_create_elsewhere(self, ctx: RequestContext, names: list[str]) -> None: ...

    def partitions_ready(self, topics: Iterable[str], timeout_s: float
                         ) -> Awaitable[None] | None: ...


class HasQuotas(Protocol):
    @property
    def quotas(self) -> ClientQuotas: ...


class HasFetch(Protocol):
    @property
    def fetch(self) -> FetchService: ...


class HasProduce(Protocol):
    @property
    def produce(self) -> ProduceService: ...


class HasGroups(Protocol):
    @property
    def groups(self) -> GroupCoordinator: ...


class HasTransactions(Protocol):
    @property
    def transactions(self) -> TransactionCoordinator: ...

    @property
    def txn_offsets(self) -> TxnOffsetCommitter[PartitionCommit]: ...


class HasProducerIds(Protocol):
    @property
    def producer_ids(self) -> ProducerIds: ...


class HasShareGroups(Protocol):
    """Share groups' partitions, fetch service and admin."""

    @property
    def share_partitions(self) -> SharePartitionManager: ...

    @property
    def share_fetch(self) -> ShareFetchService: ...

    @property
    def share_admin(self) -> ShareAdmin: ...


class HasShareCoordinator(Protocol):
    @property
    def share_coordinator(self) -> ShareCoordinator: ...


class HasCoordinators(Protocol):
    """The coordinator key types FindCoordinator serves, and their runtimes."""

    @property
    def coordinator_key_types(self) -> set[int]: ...

    def coordinator_runtimes(self) -> list[CoordinatorRuntime]: ...
