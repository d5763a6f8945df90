"""Placement: which broker should serve a partition of the shared log, and who follows
the partitions this broker takes and loses.

Brokers heartbeat into PostgreSQL (`cluster.py`); each reads the cluster's view (live
brokers, the controller, leases) every `refresh_s` and places every partition on its
rendezvous owner among the live brokers, except the topics placed with the controller
(`headwater.shared.coordinators=controller`: the coordinators' topics follow the
controller lease). The store takes what is placed here and hands over what is not
(`store.py`); `Ownership` tells those who follow a topic's partitions (the coordinator
runtimes) when this broker takes one and when it loses it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable

from . import cluster
from .cluster import BrokerInfo, ClusterView
from .schema import Connection

Key = tuple[str, int]

#: How long a taken or renewed lease is served by this broker's own clock, as a fraction
#: of what the database gives it: a little less, for clocks that run apart.
LOCAL_LEASE_FRACTION = 0.9


class Placement:
    """This broker's view of the cluster, and where it places each partition.

    `topic_id` names a partition's topic id (None while the partition is unknown here);
    `with_controller` are the topics placed with the controller, served here while
    `controller_active()`."""

    def __init__(self, node_id: int, advertised: BrokerInfo, *, lease_ms: int,
                 listed_ms: int, topic_id: Callable[[Key], uuid.UUID | None],
                 with_controller: Iterable[str] = (),
                 controller_active: Callable[[], bool] = lambda: False,
                 topic_size: Callable[[uuid.UUID], int | None] = lambda _topic_id: None
                 ) -> None:
        self.node_id = node_id
        #: Where clients reach this broker, as registered in `brokers`.
        self.advertised = advertised
        self.lease_ms = lease_ms
        #: How long a broker not heard from stays in Metadata (`ClusterView.listed`).
        self.listed_ms = listed_ms
        #: How often the view is refreshed (a quarter of the lease time, at most 1 s).
        self.refresh_s = min(1.0, lease_ms / 4000)
        self.lease_s = lease_ms / 1000 * LOCAL_LEASE_FRACTION
        #: A topic's partition count (the metadata image's): topics are placed evenly.
        self._topic_size = topic_size
        #: The cluster as of the last refresh.
        self.view = ClusterView(sizes=topic_size)
        self._view_at = float("-inf")  # monotonic time `view` was read
        self._topic_id = topic_id
        self.with_controller = frozenset(with_controller)
        self._controller_active = controller_active

    async def refresh(self, conn: Connection, register: bool = True) -> ClusterView:
        """Heartbeat (register this broker), then read the cluster's state; only read it
        with `register=False` (a starting broker, not yet known to be one the others
        accept)."""
        if register:
            await cluster.register(conn, self.advertised)
        self.view = await cluster.read_view(conn, self.lease_ms, self.listed_ms)
        self.view.sizes = self._topic_size
        self._view_at = time.monotonic()
        return self.view

    def sees_itself(self) -> bool:
        """This broker's own heartbeat is in the view (else it changes nothing)."""
        return self.node_id in self.view.brokers

    def should_own(self, key: Key) -> bool:
        """This broker is the one that should serve the partition now."""
        topic_id = self._topic_id(key)
        if topic_id is None:
            return False
        if key[0] in self.with_controller:
            return self._controller_active()
        return self.view.owner_of(topic_id, key[1]) == self.node_id

    def fresh(self) -> bool:
        """The view was read within the lease time (a broker cut off from PostgreSQL
        does not go on claiming what its last view placed on it)."""
        return time.monotonic() - self._view_at < self.lease_s

    def owner_name(self, topic: str, topic_id: uuid.UUID, partition: int) -> str:
        """Whom a partition goes to, for log lines."""
        if topic in self.with_controller:
            return "the controller"
        return f"broker {self.view.owner_of(topic_id, partition)}"


class Ownership:
    """Who follows which topic's partitions as this broker takes and loses them (the
    coordinator runtimes: a shard loads when its partition is taken here and is dropped
    when the partition is handed over or its lease lost)."""

    def __init__(self) -> None:
        self._followers: dict[str, tuple[Callable[[int], None], Callable[[int], None]]] = {}

    def follow(self, topic: str, taken: Callable[[int], None],
               lost: Callable[[int], None], held: Iterable[Key] = ()) -> Callable[[], None]:
        """`taken(p)` when this broker starts taking a partition of `topic` (at once for
        those in `held`), `lost(p)` when it hands one over or loses it (then `taken`
        again if it takes it back: the shard is replayed afresh). Returns the
        unsubscribe handle."""
        follower = (taken, lost)
        self._followers[topic] = follower
        for key in held:
            if key[0] == topic:
                taken(key[1])

        def unfollow() -> None:
            if self._followers.get(topic) is follower:
                del self._followers[topic]
        return unfollow

    def taken(self, key: Key) -> None:
        follower = self._followers.get(key[0])
        if follower is not None:
            follower[0](key[1])

    def lost(self, key: Key) -> None:
        follower = self._followers.get(key[0])
        if follower is not None:
            follower[1](key[1])
