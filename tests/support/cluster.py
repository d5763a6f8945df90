"""Three brokers on one shared log (a private PostgreSQL and versitygw), for the cluster
tests: the brokers, their bootstrap lists, what Metadata says about placement, and a
verifier over everything an idempotent producer had acknowledged."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncpg
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from headwater.shared.cluster import balanced, rendezvous

from .broker_process import BrokerProcess, free_port
from .engines import PostgresServer, VersityGateway, secrets_from_file, shared_broker_args
from .toxiproxy import Toxiproxy

LEASE_MS = 3000
#: How long a broker of a cluster may take to serve (broker_trio.py's too).
START_TIMEOUT_S = 60.0
#: The coordinators' topics and their FindCoordinator key types.
TOPICS = {"__consumer_offsets": 0, "__transaction_state": 1, "__share_group_state": 2}


class Cluster:
    def __init__(self, base: Path, shared: list[str], dsn: str,
                 overrides: tuple[str, ...] = ()) -> None:
        self.base = base
        self.shared = shared
        self.dsn = dsn
        self.overrides = overrides  # broker configs ("key=value") of every start
        self.ports = {n: free_port() for n in (1, 2, 3)}
        self.brokers: dict[int, BrokerProcess] = {}
        self.postgres: PostgresServer
        self.gateway: VersityGateway
        #: Broker configs of one node's every start (its proxies to the services).
        self.per_node: dict[int, tuple[str, ...]] = {}
        #: The fault proxy between the brokers and the services, if they go through one.
        self.proxies: Toxiproxy | None = None
        #: Behind proxies: each node's INTERNAL (inter-broker) listener's own port.
        self.inter_ports: dict[int, int] = {}

    def start(self, node: int, *extra: str) -> BrokerProcess:
        """Broker `node`, with `extra` arguments (say, a fault point's override)."""
        proc = BrokerProcess(self.base / f"broker-{node}", *self.shared, *extra,
                             "--override", f"node.id={node}",
                             "--override", f"headwater.shared.lease.ms={LEASE_MS}",
                             # every window to the object store (inline windows are
                             # test_shared_broker's), so its outage is felt
                             "--override", "headwater.shared.inline.max.bytes=0",
                             *(a for o in (*self.overrides, *self.per_node.get(node, ()))
                               for a in ("--override", o)),
                             port=self.ports[node])
        self.brokers[node] = proc  # before it is ready: a start that times out is still
        # this node's process, stopped with the others; 60 s as the trio's (a broker
        # joining serves once the others handed its shards over and it loaded them)
        return proc.start(START_TIMEOUT_S)

    def bootstrap(self, *nodes: int) -> str:
        return ",".join(f"127.0.0.1:{self.ports[n]}" for n in (nodes or self.ports))

    def fetch(self, query: str, *args: object) -> list[asyncpg.Record]:
        async def run() -> list[asyncpg.Record]:
            conn = await asyncpg.connect(self.dsn)
            try:
                return list(await conn.fetch(query, *args))
            finally:
                await conn.close()
        return asyncio.run(run())

    def fetchval(self, query: str, *args: object) -> object:
        async def run() -> object:
            conn = await asyncpg.connect(self.dsn)
            try:
                return await conn.fetchval(query, *args)
            finally:
                await conn.close()
        return asyncio.run(run())


def wait_listed(bootstrap: str, nodes: list[int], timeout: float = 30.0) -> None:
    """Until the broker at `bootstrap` lists exactly `nodes` as live brokers."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while (listed := sorted(admin.list_topics(timeout=10).brokers)) != nodes:
        assert time.monotonic() < deadline, f"{bootstrap} lists {listed}, not {nodes}"
        time.sleep(0.1)


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the answer
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def leaders(bootstrap: str, topic: str, partitions: int, live: set[int],
            timeout: float = 30.0) -> tuple[dict[int, int], int]:
    """Partition -> leader as `bootstrap` reports it, once every partition has a live
    leader; and the controller id."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            got = {p: v.leader for p, v in t.partitions.items()}
            if set(got.values()) <= live:
                return got, md.controller_id
        assert time.monotonic() < deadline, f"{topic} not served by {live} via {bootstrap}"
        time.sleep(0.2)


def settled_leaders(cluster: Cluster, topic: str, partitions: int,
                    live: tuple[int, ...] = (1, 2, 3), timeout: float = 30.0) -> dict[int, int]:
    """Partition -> leader once every partition is led by its owner among `live` (the
    topic spread evenly, `balanced`): the placement that stays while no broker joins or leaves (right after a
    broker rejoins, a new topic may be taken first by a broker that has not seen it
    yet, then handed over)."""
    topic_id = topic_id_of(cluster, topic)
    want = dict(enumerate(balanced(topic_id, partitions, tuple(sorted(live)))))
    deadline = time.monotonic() + timeout
    while True:
        got, _controller = leaders(cluster.bootstrap(*live), topic, partitions, set(live),
                                   timeout=max(deadline - time.monotonic(), 1.0))
        if got == want:
            return got
        assert time.monotonic() < deadline, f"{topic} led by {got}, not yet by {want}"
        time.sleep(0.2)


def read_all(bootstrap: str, topic: str, partitions: int, want: int,
             timeout: float = 60.0) -> dict[int, list[tuple[int, bytes]]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verifier",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout
    try:
        while sum(map(len, got.values())) < want and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            value = msg.value()
            assert value is not None
            got[msg.partition()].append((msg.offset(), value))
    finally:
        consumer.close()
    return got


def _debug() -> dict[str, object]:
    """With RDKAFKA_DEBUG_LOG=path, the load's librdkafka debug log (eos, msg, protocol,
    broker, topic) goes to that file: how a stalled producer was found stranded by a
    leader epoch that went backwards."""
    path = os.environ.get("RDKAFKA_DEBUG_LOG")
    if not path:
        return {}
    logger = logging.getLogger("rdkafka-debug")
    if not logger.handlers:
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    return {"debug": "eos,msg,protocol,broker,topic", "logger": logger}


class Load:
    """An idempotent acks=all producer writing numbered records until stopped; what was
    acknowledged, with its partition and offset."""

    def __init__(self, bootstrap: str, topic: str, **config: object) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "acks": "all", "linger.ms": 5,
                                  "message.timeout.ms": 120_000, **config,
                                  **_debug()})
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.sent = 0

    def _delivered(self, err: object, msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))
            return
        self.acked[msg.value()] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, key=str(self.sent % 13).encode(),
                                      value=f"r{self.sent:08d}".encode(),
                                      on_delivery=self._delivered)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.001 if self.sent % 20 else 0.01)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def wait_acked(self, n: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < n:
            assert time.monotonic() < deadline, f"only {len(self.acked)} acknowledged"
            time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.producer.flush(120) == 0, "records still unacknowledged"


def _disorder(cluster: Cluster, topic: str, partition: int,
              records: list[tuple[int, bytes]]) -> str:
    """Where a partition's records leave producer order, whether the record out of
    place is a duplicate (a batch written twice reads as out of order first), the batch
    rows around it (producer id, epoch, sequence) and what the brokers logged of the
    partition: all CI keeps of a rare failure is this message."""
    first = next(i for i in range(1, len(records)) if records[i][1] < records[i - 1][1])
    offset, value = records[first]
    earlier = [o for o, v in records[:first] if v == value]
    around = [(o, v.decode()) for o, v in records[max(first - 3, 0):first + 3]]
    rows = cluster.fetch(
        "SELECT b.base_offset, b.last_offset, b.producer_id, b.producer_epoch, "
        "b.base_sequence FROM batches b WHERE b.topic_id = $1 AND b.partition = $2 AND "
        "b.last_offset >= $3 - 60 AND b.base_offset <= $3 + 30 ORDER BY b.base_offset",
        topic_id_of(cluster, topic), partition, offset)
    logged = [f"{n}: {line}" for n, proc in sorted(cluster.brokers.items())
              for line in proc.log_path.read_text(errors="replace").splitlines()
              if f"{topic}-{partition}" in line or "commit of" in line][-30:]
    return "\n".join([
        f"partition {partition} out of producer order at offset {offset}: {around}; "
        + (f"a duplicate of offset {earlier[0]}" if earlier else "not a duplicate"),
        "batches (base, last, producer id, epoch, base sequence):",
        *(str(tuple(r)) for r in rows), "brokers logged:", *logged])


def verify(cluster: Cluster, load: Load, partitions: int, *nodes: int) -> None:
    """Everything acknowledged is read back once, at its offset; no offset hole; each
    partition's records in the order they were produced."""
    assert not load.errors, load.errors[:5]
    got = read_all(cluster.bootstrap(*nodes), load.topic, partitions, len(load.acked))
    seen: dict[bytes, tuple[int, int]] = {}
    for partition, records in got.items():
        offsets = [o for o, _v in records]
        if offsets:
            assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), \
                f"offset hole in partition {partition}"
        values = [v for _o, v in records]
        assert values == sorted(values), _disorder(cluster, load.topic, partition, records)
        for offset, value in records:
            assert value not in seen, f"{value!r} duplicated"
            seen[value] = (partition, offset)
    missing = [v for v in load.acked if v not in seen]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"
    moved = [v for v, at in load.acked.items() if seen[v] != at]
    assert not moved, ("records read at other (partition, offset)s than acknowledged: "
                       f"{[(v, load.acked[v], seen[v]) for v in moved[:5]]} of {len(moved)}")


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int,
                      timeout: float = 60.0) -> dict[int, int]:
    """The group's committed offsets, asked again while its coordinator moves (librdkafka
    retries an OffsetFetch that answers NOT_COORDINATOR on the same broker, then gives
    up: an application asks again)."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "enable.auto.commit": False})
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                got = reader.committed([TopicPartition(topic, p) for p in range(partitions)],
                                       timeout=5)
                if all(tp.error is None for tp in got):
                    return {tp.partition: tp.offset for tp in got}
            except Exception:  # the coordinator is moving
                pass
            assert time.monotonic() < deadline, f"no coordinator served {group}"
            time.sleep(0.1)
    finally:
        reader.close()


def served_topic(cluster: Cluster, prefix: str) -> str:
    """A new 6-partition topic, once every partition has a live leader."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create(cluster.bootstrap(1), topic, 6)
    leaders(cluster.bootstrap(), topic, 6, {1, 2, 3})
    return topic


def victim(cluster: Cluster, topic: str, partitions: int) -> tuple[int, list[int]]:
    """A broker that is not the controller and leads partitions of `topic`."""
    placement, controller = leaders(cluster.bootstrap(), topic, partitions, {1, 2, 3})
    candidates = [n for n in (1, 2, 3) if n != controller
                  and any(leader == n for leader in placement.values())]
    assert candidates, f"no follower leads a partition: {placement}"
    node = candidates[0]
    return node, [p for p, leader in placement.items() if leader == node]


def topic_id_of(cluster: Cluster, topic: str, node: int = 1,
                timeout: float = 30.0) -> uuid.UUID:
    """The topic's id as broker `node` knows it, once it knows the topic (a broker that
    has not yet followed the topic's creation answers UNKNOWN_TOPIC_OR_PARTITION with
    the zero id: placement computed from that would never come)."""
    from tests.support.wire import RawClient

    deadline = time.monotonic() + timeout
    while True:
        client = RawClient("127.0.0.1", cluster.ports[node])
        try:
            md = client.request(3, 12, {"topics": [{"name": topic,
                                                    "topic_id": uuid.UUID(int=0)}],
                                        "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
        finally:
            client.close()
        found = md.topics[0]
        if not found.error_code and found.topic_id != uuid.UUID(int=0):
            return uuid.UUID(str(found.topic_id))
        assert time.monotonic() < deadline, f"broker {node} does not know {topic}"
        time.sleep(0.1)


def start_cluster(postgres: PostgresServer, versitygw: VersityGateway, base: Path,
                  overrides: tuple[str, ...] = (),
                  controller: tuple[str, ...] | None = None,
                  proxies: Toxiproxy | None = None,
                  configure: Callable[[Cluster], None] | None = None,
                  secrets: Path | None = None) -> Iterator[Cluster]:
    """The body of a module's `cluster` fixture: three brokers, each listing all three
    (`overrides`: broker configs, "key=value", of every broker). With `controller`
    (its extra arguments), broker 1 starts alone first, so it is the controller. With
    `proxies`, each broker reaches PostgreSQL through proxy `postgres-N` and the object
    store through `objects-N`, and the other brokers reach broker N (its INTERNAL
    inter-broker listener) through `peers-N`: network faults between one broker and
    one service, or the other brokers. `configure` sets each node's own configs
    (`Cluster.per_node`: its listeners, say) before any starts. With `secrets` (a
    properties file's path), the DSN and the S3 secret key are read from that file
    through a config provider, not given on the command line."""
    shared = shared_broker_args(postgres, versitygw, base / "shared")
    dsn = next(a.split("=", 1)[1] for a in shared if a.startswith("headwater.shared.database="))
    if secrets is not None:
        shared = secrets_from_file(shared, secrets)
    c = Cluster(base, shared, dsn, overrides)
    c.postgres, c.gateway, c.proxies = postgres, versitygw, proxies
    if proxies is not None:
        for node in (1, 2, 3):
            pg = proxies.proxy(f"postgres-{node}", postgres.port)
            s3 = proxies.proxy(f"objects-{node}", versitygw.port)
            inter = c.inter_ports[node] = free_port()
            peers = proxies.proxy(f"peers-{node}", inter)
            c.per_node[node] = (
                f"headwater.shared.database={dsn.replace(f':{postgres.port}/', f':{pg}/')}",
                f"headwater.shared.objects.endpoint=http://127.0.0.1:{s3}",
                # the other brokers reach this one on its INTERNAL listener, advertised
                # as proxy peers-N: a toxic there cuts what the others send to it
                f"listeners=PLAINTEXT://127.0.0.1:{c.ports[node]},"
                f"INTERNAL://127.0.0.1:{inter}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{c.ports[node]},"
                f"INTERNAL://127.0.0.1:{peers}",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                "inter.broker.listener.name=INTERNAL")
    if configure is not None:
        configure(c)
    try:  # a broker that does not start stops the others (left running, they took a
        # core from every later test of the worker: a CI run's next module failed on it)
        if controller is not None:
            c.start(1, *controller)
            wait_listed(c.bootstrap(1), [1])
        for node in (1, 2, 3):
            if node not in c.brokers:
                c.start(node)
        for node in (1, 2, 3):
            wait_listed(c.bootstrap(node), [1, 2, 3])
        yield c
    finally:
        for proc in c.brokers.values():
            proc.kill()


def coordinator_of(cluster: Cluster, key: str, key_type: int = 0) -> int:
    """The node FindCoordinator names for `key` (0 group, 1 transactional id, 2 share)."""
    from .wire import RawClient

    deadline = time.monotonic() + 30
    while True:
        for node in cluster.brokers:
            try:
                client = RawClient("127.0.0.1", cluster.ports[node])
            except OSError:
                continue
            try:
                found = client.request(10, 4, {"key_type": key_type,
                                               "coordinator_keys": [key]}).coordinators[0]
            except (OSError, ConnectionError):
                continue
            finally:
                client.close()
            if found.error_code == 0:
                return int(found.node_id)
        assert time.monotonic() < deadline, f"no coordinator for {key!r}"
        time.sleep(0.2)


def key_on(cluster: Cluster, node: int, prefix: str, key_type: int = 0) -> str:
    """A new key (group id, transactional id) whose coordinator is broker `node`, once
    the three brokers' coordinator shards are where they stay."""
    settled_coordinators(cluster)
    for i in range(10_000):
        key = f"{prefix}-{i}-{uuid.uuid4().hex[:6]}"
        if coordinator_of(cluster, key, key_type) == node:
            return key
    raise AssertionError(f"no {prefix} key coordinated by broker {node}")


Placement = dict[tuple[str, int], int]


def coordinator_placement(cluster: Cluster, *nodes: int) -> Placement:
    """(coordinator topic, partition) -> leader, as Metadata reports it."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(*nodes)})
    md = admin.list_topics(timeout=10)
    found: Placement = {}
    for name in TOPICS:
        topic = md.topics.get(name)
        assert topic is not None and topic.error is None, f"{name}: {topic}"
        for p, meta in topic.partitions.items():
            found[(name, p)] = meta.leader
    return found


def rendezvous_placement(cluster: Cluster, live: tuple[int, ...]) -> Placement:
    """Where the shards belong with `live` brokers (every broker computes the same: the
    coordinator topics are placed by rendezvous alone, so that only a dead broker's
    shards move)."""
    now = coordinator_placement(cluster, *live)
    ids = {name: topic_id_of(cluster, name, node=live[0]) for name in TOPICS}
    return {(t, p): rendezvous(f"{ids[t]}:{p}", list(live)) for t, p in now}


def settled_coordinators(cluster: Cluster, live: tuple[int, ...] = (1, 2, 3),
                         timeout: float = 60.0) -> Placement:
    """Once every live broker reports each coordinator shard at its rendezvous owner."""
    want = rendezvous_placement(cluster, live)
    deadline = time.monotonic() + timeout
    while not all(coordinator_placement(cluster, n) == want for n in live):
        assert time.monotonic() < deadline, "coordinator shards never settled"
        time.sleep(0.2)
    return want
