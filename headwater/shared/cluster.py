"""The cluster as a shared broker sees it: the live brokers (registered in `brokers`, with a
heartbeat), the controller (the holder of the `controller` lease) and who serves each
partition (the holders of the partition leases), refreshed from PostgreSQL.

Placement needs no coordinator: every broker computes the same owner of a partition over
the same live brokers (`owner_of`), takes the partitions it should own when their leases
are free or expired, and gives up those another live broker should own. Leases make
ownership exclusive; the placement only spreads it. A topic whose partition count is
known (every topic but the coordinators') is placed **evenly** (`balanced`: each broker leads its share, as Kafka's
round-robin assignment does; a hash alone put 6, 3 and 3 of 12 partitions on three
brokers, and the busiest one limited the cluster), each partition on the first broker of
its **rendezvous** order that has room, so a broker's death or arrival moves few
partitions besides its own. Metadata reports the
lease holder as leader (or, while none holds it, the broker that will take it) and the
lease epoch as `leader_epoch`, so clients move as they do with Kafka.
"""

from __future__ import annotations

import functools
import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from .leases import partition_resource
from .schema import Connection

CONTROLLER = "controller"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker. `host`/`port` are where the other brokers reach it (its
    inter-broker listener, Kafka's `inter.broker.listener.name`); `endpoints` are all
    its listeners, (name, advertised host, port), so that a client is told each broker's
    address on the listener the client itself came in on, as Kafka does."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def address(self, listener: str | None) -> tuple[str, int]:
        """The broker's address on `listener` (by name); its inter-broker address when
        it has no listener of that name (a broker registered by an older headwater)."""
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return self.host, self.port


def _endpoints_json(node: BrokerInfo) -> str:
    return json.dumps([list(e) for e in node.endpoints])


def _endpoints(text: str) -> tuple[tuple[str, str, int], ...]:
    if not text:
        return ()
    return tuple((str(n), str(h), int(p)) for n, h, p in json.loads(text))


@dataclass(slots=True)
class ClusterView:
    """A snapshot of the cluster's state, as of the last `refresh`."""

    #: Live brokers (heartbeat within the lease time), by node id: placement's.
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    #: The brokers clients are told of (heartbeat within `broker.session.timeout.ms`,
    #: at least the lease time), by node id: as Kafka lists a broker until its session
    #: times out and it is fenced, so a pause or a restart shorter than that does not
    #: make clients forget the broker (librdkafka decommissions a broker missing from
    #: Metadata, and one decommissioned under an OffsetForLeaderEpoch in flight
    #: deadlocked its main thread: librdkafka #5476, every campaign reader stuck).
    listed: dict[int, BrokerInfo] = field(default_factory=dict)
    #: The controller lease's holder (-1: none live).
    controller: int = -1
    #: Partition leases: resource -> (owner or -1 when expired, epoch).
    leases: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: A topic's partition count, from the metadata image (None: not known here).
    sizes: Callable[[uuid.UUID], int | None] = field(default=lambda _topic_id: None)

    def owner_of(self, topic_id: uuid.UUID, partition: int) -> int:
        """The live broker that should serve the partition (-1: none live): its place in
        the topic's even placement, or its rendezvous owner while the topic's size is
        not known."""
        size = self.sizes(topic_id)
        if size is not None and 0 <= partition < size and self.brokers:
            return balanced(topic_id, size, tuple(sorted(self.brokers)))[partition]
        return rendezvous(f"{topic_id}:{partition}", self.brokers)

    def leader(self, topic_id: uuid.UUID, partition: int) -> tuple[int, int]:
        """(leader, leader epoch) as Metadata reports it: the live lease holder; while
        no one holds the lease, the broker that will take it, with the epoch it will get
        (taking always bumps the epoch). The leader epoch is the lease epoch less one
        (Kafka's first leader has epoch 0).

        A lease still held by a broker whose heartbeat is not seen is reported as no
        leader (-1) at the holder's epoch, never as a predicted owner: the holder may
        renew it and go on reporting its own epoch, and a client that had cached the
        prediction's higher epoch would ignore every later answer as outdated and
        produce to the wrong broker for good (seen after a PostgreSQL restart)."""
        owner, epoch = self.leases.get(partition_resource(topic_id, partition), (-1, 0))
        if owner in self.brokers:
            return owner, epoch - 1
        if owner >= 0:
            return -1, epoch - 1
        return self.owner_of(topic_id, partition), epoch


@functools.lru_cache(maxsize=4096)
def balanced(topic_id: uuid.UUID, partitions: int, brokers: tuple[int, ...]
             ) -> tuple[int, ...]:
    """Each of a topic's partitions' broker, as even as can be: every broker leads
    partitions // brokers of them, and partitions % brokers of them one more. In
    partition order, each goes to the first broker of its rendezvous order with room,
    so the placement is the same on every broker, and a broker joining or leaving moves
    its own share and few others."""
    floor, extra = divmod(partitions, len(brokers))
    load = dict.fromkeys(brokers, 0)
    out = []
    for partition in range(partitions):
        key = f"{topic_id}:{partition}"
        for node in sorted(brokers, key=lambda n: (-_score(key, n), n)):
            if load[node] < floor or (load[node] == floor and extra > 0):
                if load[node] == floor:
                    extra -= 1
                load[node] += 1
                out.append(node)
                break
    return tuple(out)


def _score(key: str, node: int) -> int:
    return int.from_bytes(hashlib.blake2b(f"{key}/{node}".encode(), digest_size=8).digest(),
                          "big")


def rendezvous(key: str, brokers: dict[int, BrokerInfo] | list[int]) -> int:
    """The node with the highest hash of (key, node): stable while it lives, and only its
    keys move when it dies or another joins (blake2b: crc32 of keys differing in one
    character is far from uniform)."""
    best, best_score = -1, -1
    for node in brokers:
        score = _score(key, node)
        if score > best_score or (score == best_score and node < best):
            best, best_score = node, score
    return best


async def register(conn: Connection, node: BrokerInfo) -> None:
    await conn.execute(
        "INSERT INTO brokers (node_id, host, port, rack, endpoints, heartbeat_at) "
        "VALUES ($1, $2, $3, $4, $5, clock_timestamp()) ON CONFLICT (node_id) DO UPDATE "
        "SET host = EXCLUDED.host, port = EXCLUDED.port, rack = EXCLUDED.rack, "
        "endpoints = EXCLUDED.endpoints, heartbeat_at = EXCLUDED.heartbeat_at",
        node.node_id, node.host, node.port, node.rack, _endpoints_json(node))


async def deregister(conn: Connection, node_id: int) -> None:
    """A broker stopping cleanly: the others take its partitions at once."""
    await conn.execute("DELETE FROM brokers WHERE node_id = $1", node_id)


async def read_view(conn: Connection, session_ms: int, listed_ms: int = 0) -> ClusterView:
    """The live brokers (heard within `session_ms`), the listed ones (within `listed_ms`,
    at least the live), the controller and the partition leases, on the database
    clock."""
    view = ClusterView()
    for row in await conn.fetch(
            "SELECT node_id, host, port, rack, endpoints, heartbeat_at > clock_timestamp() "
            "- $1 * interval '1 millisecond' AS live FROM brokers WHERE heartbeat_at > "
            "clock_timestamp() - $2 * interval '1 millisecond'",
            session_ms, max(session_ms, listed_ms)):
        info = BrokerInfo(int(row["node_id"]), row["host"], int(row["port"]), row["rack"],
                          _endpoints(row["endpoints"]))
        view.listed[info.node_id] = info
        if row["live"]:
            view.brokers[info.node_id] = info
    for row in await conn.fetch(
            "SELECT resource, owner, epoch, expires_at > clock_timestamp() AS live "
            "FROM leases"):
        owner = int(row["owner"]) if row["live"] else -1
        if row["resource"] == CONTROLLER:
            view.controller = owner if owner in view.brokers else -1
        else:
            view.leases[row["resource"]] = (owner, int(row["epoch"]))
    return view


async def cluster_id(conn: Connection, proposed: str) -> str:
    """The cluster's id: the first broker's `proposed` one, kept by every other."""
    await conn.execute("INSERT INTO cluster (cluster_id) VALUES ($1) ON CONFLICT DO NOTHING",
                       proposed)
    return str(await conn.fetchval("SELECT cluster_id FROM cluster"))
