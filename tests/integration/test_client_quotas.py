"""Client quotas: `kafka-configs` against headwater and the Kafka 4.4.0 reference gives the
same answers; byte-rate quotas throttle producers and consumers as Kafka does (the
client is told `throttle_time_ms` and the connection is muted); quotas survive a
restart."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from headwater.wire.client import encode_request
from tests.integration.test_share_fetch import Member
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_reference import (
    KafkaReference,
    reference_fixture,
    run_tool,
    side_by_side,
)
from tests.support.wire import RawClient

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def kafka_ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaReference]:
    """A reference of this module's own, not the session's: its quotas are cluster-wide
    and fixed (a default user quota of 4 kB/s that would throttle every later producer,
    clients c1 / c2 / mutator, 127.0.0.9), `--describe --entity-type clients` lists every
    client's, and the mutation scenario creates topics a, b, c and e."""
    yield from reference_fixture(tmp_path_factory.mktemp("kafka-ref"))


# Each a kafka-configs invocation (after --bootstrap-server); run in order on both.
SCENARIO = [
    ["--alter", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048",
     "--entity-type", "clients", "--entity-name", "c1"],
    ["--alter", "--add-config", "producer_byte_rate=4096", "--entity-type", "users",
     "--entity-default"],
    ["--alter", "--add-config", "request_percentage=12.5", "--entity-type", "users",
     "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "c1"],
    ["--alter", "--add-config", "connection_creation_rate=10", "--entity-type", "ips",
     "--entity-name", "127.0.0.9"],
    ["--describe", "--entity-type", "clients", "--entity-name", "c1"],
    ["--describe", "--entity-type", "users", "--entity-default"],
    ["--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type",
     "clients"],
    ["--describe", "--entity-type", "clients"],
    ["--describe", "--entity-type", "ips"],
    ["--alter", "--add-config", "producer_byte_rate=1.5", "--entity-type", "clients",
     "--entity-name", "c2"],
    ["--alter", "--add-config", "connection_creation_rate=1.5", "--entity-type", "ips",
     "--entity-name", "127.0.0.9"],
    ["--alter", "--delete-config", "consumer_byte_rate", "--entity-type", "clients",
     "--entity-name", "c1"],
    ["--describe", "--entity-type", "clients", "--entity-name", "c1"],
    ["--alter", "--delete-config", "consumer_byte_rate", "--entity-type", "clients",
     "--entity-name", "nobody"],
]


def configs(bootstrap: str, *args: str) -> tuple[int, str]:
    out = run_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap,
                   *args, check=False)
    text = out.stdout + out.stderr
    # The first line names the error; the rest is the tool's stack trace and the port.
    first = [line for line in text.splitlines() if line and not line.startswith("\tat ")]
    return out.returncode, "\n".join(first).replace(bootstrap, "BOOTSTRAP")


def test_kafka_configs_quotas_answer_as_kafka(broker: BrokerProcess,
                                              kafka_ref: KafkaReference) -> None:
    for args in SCENARIO:
        ours, theirs = side_by_side(configs, broker.bootstrap, kafka_ref.bootstrap, *args)
        assert ours == theirs, args
    assert configs(broker.bootstrap, "--describe", "--entity-type", "clients",
                   "--entity-name", "c1") == (
        0, "Quota configs for client-id 'c1' are producer_byte_rate=1024.0")


def alter(port: int, entries: list[dict], validate_only: bool = False) -> list:
    client = RawClient("127.0.0.1", port)
    try:
        resp = client.request(49, 1, {"entries": entries, "validate_only": validate_only})
    finally:
        client.close()
    return [(int(e.error_code), e.error_message) for e in resp.entries]


def entity(*pairs: tuple[str, str | None]) -> list[dict]:
    return [{"entity_type": t, "entity_name": n} for t, n in pairs]


def op(key: str, value: float = 0.0, remove: bool = False) -> dict:
    return {"key": key, "value": value, "remove": remove}


def test_bad_quota_alterations_get_kafkas_errors(broker: BrokerProcess,
                                                 kafka_ref: KafkaReference) -> None:
    """What kafka-configs checks before sending, sent anyway: both brokers answer alike."""
    name = f"bad-{uuid.uuid4().hex[:6]}"
    entries = [
        {"entity": entity(("client-id", name)), "ops": [op("bogus_rate", 5)]},
        {"entity": entity(("client-id", name), ("ip", "127.0.0.1")),
         "ops": [op("producer_byte_rate", 5)]},
        {"entity": [], "ops": [op("producer_byte_rate", 5)]},
        {"entity": entity(("group", name)), "ops": [op("producer_byte_rate", 5)]},
        {"entity": entity(("user", "")), "ops": [op("producer_byte_rate", 5)]},
        {"entity": entity(("user", name + "-dup")),
         "ops": [op("producer_byte_rate", 5), op("producer_byte_rate", 6)]},
        {"entity": entity(("ip", "not a host name")), "ops": [op("connection_creation_rate", 5)]},
    ]
    ours = alter(broker.port, entries)
    theirs = alter(kafka_ref.port, entries)
    assert [code for code, _ in ours] == [code for code, _ in theirs]
    assert [code for code, _ in ours[1:]] == [42] * 6
    # Nothing of the refused entries was stored.
    code, text = configs(broker.bootstrap, "--describe", "--entity-type", "clients",
                         "--entity-name", name)
    assert code == 0 and "are" not in text


def throttled_produce(bootstrap: str, client_id: str, topic: str, records: int,
                      size: int) -> tuple[float, list[int]]:
    throttles: list[int] = []
    # Batches of at most 64 kB: a fetch returns at least one whole batch (KIP-74), and
    # a batch larger than the quota times the window could never be read.
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                  "batch.size": 65_536,
                  "throttle_cb": lambda ev: throttles.append(int(ev.throttle_time * 1000))})
    payload = b"q" * size
    start = time.monotonic()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0
    elapsed = time.monotonic() - start
    p.poll(0.5)  # throttle callbacks still queued
    return elapsed, throttles


def test_byte_rate_quotas_throttle_producer_and_consumer(broker_factory) -> None:
    # Short quota windows (2 x 1 s) so the test sees throttling within seconds.
    broker = broker_factory("--override", "quota.window.num=2", "--override",
                            "quota.window.size.seconds=1")
    assert configs(broker.bootstrap, "--alter", "--add-config",
                   "producer_byte_rate=400000,consumer_byte_rate=400000",
                   "--entity-type", "clients", "--entity-name", "slow")[0] == 0
    records, size = 2_000, 1_000  # 2 MB: five seconds' worth of the quota
    elapsed, throttles = throttled_produce(broker.bootstrap, "slow", "quota-topic",
                                           records, size)
    assert throttles and max(throttles) > 0, "the producer was never told to slow down"
    assert records * size / elapsed < 2 * 400_000, f"{records * size / elapsed:,.0f} B/s"
    # A client without a quota is never throttled.
    _, others = throttled_produce(broker.bootstrap, "fast", "quota-topic", 500, size)
    assert not any(others)

    throttles: list[int] = []
    c = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "slow",
                  "group.id": "quota-readers", "auto.offset.reset": "earliest",
                  "throttle_cb": lambda ev: throttles.append(int(ev.throttle_time * 1000))})
    c.subscribe(["quota-topic"])
    got = 0
    start = time.monotonic()
    deadline = start + 60
    while got < records + 500 and time.monotonic() < deadline:
        for m in c.consume(500, 0.5):
            if m.error() is None:
                got += 1
    elapsed = time.monotonic() - start
    c.close()
    assert got == records + 500  # throttled, never lost
    assert throttles and max(throttles) > 0
    assert got * size / elapsed < 2 * 400_000, f"{got * size / elapsed:,.0f} B/s"

    broker.restart()
    assert configs(broker.bootstrap, "--describe", "--entity-type", "clients",
                   "--entity-name", "slow") == (
        0, "Quota configs for client-id 'slow' are consumer_byte_rate=400000.0, "
           "producer_byte_rate=400000.0")


@pytest.mark.timeout(120)
def test_request_percentage_throttles_a_client_that_keeps_the_broker_busy(
        broker_factory) -> None:
    """`request_percentage` (percent of one thread's time): a client sending requests
    back to back gets a throttle time and is muted; another client id is not."""
    broker = broker_factory("--override", "quota.window.num=2", "--override",
                            "quota.window.size.seconds=1")
    # raw-test is the raw client's client id
    assert alter(broker.port, [{"entity": entity(("client-id", "raw-test")),
                                "ops": [op("request_percentage", 1.0)]}]) == [(0, None)]
    body = {"topics": None, "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}
    client = RawClient("127.0.0.1", broker.port)
    throttles = []
    try:
        deadline = time.monotonic() + 60
        while not any(throttles) and time.monotonic() < deadline:
            throttles.append(int(client.request(3, 12, body).throttle_time.total_seconds()
                                 * 1000))
    finally:
        client.close()
    assert any(throttles), f"{len(throttles)} requests and never a throttle time"
    assert 0 < max(throttles) <= 2_000  # at most the quota's whole window
    assert alter(broker.port, [{"entity": entity(("client-id", "raw-test")),
                                "ops": [op("request_percentage", remove=True)]}]) == [
        (0, None)]
    client = RawClient("127.0.0.1", broker.port)
    try:
        after = [client.request(3, 12, body).throttle_time.total_seconds() for _ in range(50)]
    finally:
        client.close()
    assert not any(after)


def test_request_percentage_charges_a_fetch_its_work_not_its_wait(broker_factory) -> None:
    """A handler that awaits (Fetch) is charged the time its steps run: fetching data back
    to back under a 1% quota is throttled, while long polls that mostly wait are not,
    under a quota their waits alone would exceed many times over."""
    broker = broker_factory("--override", "quota.window.num=2", "--override",
                            "quota.window.size.seconds=1")
    topic = f"rp-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(200):
        producer.produce(topic, b"x" * 1000, partition=0)
    assert producer.flush(30) == 0

    def fetch(client: RawClient, offset: int, max_wait: int) -> tuple[int, int]:
        resp = client.request(1, 12, {
            "replica_id": -1, "max_wait": max_wait, "min_bytes": 1, "max_bytes": 50 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        part = resp.responses[0].partitions[0]
        assert int(part.error_code) == 0
        return int(resp.throttle_time.total_seconds() * 1000), len(part.records or b"")

    assert alter(broker.port, [{"entity": entity(("client-id", "raw-test")),
                                "ops": [op("request_percentage", 1.0)]}]) == [(0, None)]
    client = RawClient("127.0.0.1", broker.port)
    try:
        throttled, deadline = 0, time.monotonic() + 60
        while not throttled and time.monotonic() < deadline:
            throttled, size = fetch(client, 0, 0)
            assert size > 0
    finally:
        client.close()
    assert 0 < throttled <= 2_000, "back-to-back fetches were never throttled"

    # 30%: 6 long polls of 400 ms over 2.4 s would be 100% if their waits were charged.
    assert alter(broker.port, [{"entity": entity(("client-id", "raw-test")),
                                "ops": [op("request_percentage", 30.0)]}]) == [(0, None)]
    client = RawClient("127.0.0.1", broker.port, timeout=10)
    try:
        polls = [fetch(client, 200, 400) for _ in range(6)]
    finally:
        client.close()
    assert polls == [(0, 0)] * 6


def mutation_scenario(port: int) -> list[tuple[str, int, list[tuple[str, int]], float]]:
    """controller_mutation_rate=10 (a burst of 110 partitions) for client `mutator`: each
    step's (step, throttle ms, [(topic, error code)], seconds until answered)."""
    admin = RawClient("127.0.0.1", port)
    assert alter(port, [{"entity": entity(("client-id", "mutator")),
                         "ops": [op("controller_mutation_rate", 10.0)]}]) == [(0, None)]
    admin.close()
    c = RawClient("127.0.0.1", port, timeout=30, client_id="mutator")
    steps = []

    def create(step: str, topics: list[tuple[str, int]], version: int = 7) -> None:
        t0 = time.monotonic()
        r = c.request(19, version, {"topics": [
            {"name": n, "num_partitions": p, "replication_factor": 1, "assignments": [],
             "configs": []} for n, p in topics], "timeout": 10_000, "validate_only": False})
        steps.append((step, int(r.throttle_time.total_seconds() * 1000),
                      sorted((t.name, int(t.error_code)) for t in r.topics),
                      time.monotonic() - t0))

    try:
        create("burst", [("a", 100)])  # 110 - 100 = 10 tokens left
        create("past zero, then refused", [("b", 20), ("c", 5)])
        create("invalid topics take nothing", [("a", 5), ("z", 0)])
        time.sleep(0.3)  # not synchronisation: the bucket refills 3 tokens
        t0 = time.monotonic()
        r = c.request(20, 6, {"topics": [{"name": n, "topic_id": None} for n in ("nope", "b")],
                              "timeout": 10_000})
        steps.append(("delete", int(r.throttle_time.total_seconds() * 1000),
                      sorted((t.name, int(t.error_code)) for t in r.responses),
                      time.monotonic() - t0))
        t0 = time.monotonic()
        r = c.request(37, 3, {"topics": [{"name": "a", "count": 110, "assignments": None}],
                              "timeout": 10_000, "validate_only": False})
        steps.append(("create partitions", int(r.throttle_time.total_seconds() * 1000),
                      sorted((t.name, int(t.error_code)) for t in r.results),
                      time.monotonic() - t0))
        create("old version: accepted, throttled", [("e", 10)], version=5)
    finally:
        c.close()
    return steps


def test_controller_mutation_rate_as_kafka(broker: BrokerProcess,
                                           kafka_ref: KafkaReference) -> None:
    """KIP-599 on the same steps against both brokers: the same topics refused with
    THROTTLING_QUOTA_EXCEEDED (89), the same throttle times (to a few hundred ms, they
    depend on timing), and a throttled connection muted until its time is over."""
    ours, theirs = mutation_scenario(broker.port), mutation_scenario(kafka_ref.port)
    assert [(s, codes) for s, _, codes, _ in ours] == [(s, codes) for s, _, codes, _ in theirs]
    assert ours[1][2] == [("b", 0), ("c", 89)]
    assert ours[3][2] == [("b", 0), ("nope", 3)]
    assert ours[4][2] == [("a", 89)]
    assert ours[5][2] == [("e", 0)]
    for (step, ms, _, _), (_, kafka_ms, _, _) in zip(ours, theirs, strict=True):
        assert (ms > 0) == (kafka_ms > 0), (step, ms, kafka_ms)
        assert abs(ms - kafka_ms) < 400, (step, ms, kafka_ms)
    # Refused at -17 tokens: 1.7 s throttle; the next request waits for it (muted).
    assert ours[4][1] > 1_200 and ours[5][3] > 1.0 and theirs[5][3] > 1.0


def connection_burst(port: int, count: int, source: str) -> list[tuple[bool, float]]:
    """`count` connections from `source` one after another, each sending ApiVersions:
    (answered, seconds until answered or closed) of each."""
    out = []
    for _ in range(count):
        with socket.create_connection(("127.0.0.1", port), timeout=15,
                                      source_address=(source, 0)) as s:
            s.sendall(encode_request(18, 3, {"client_software_name": "burst",
                                             "client_software_version": "1"}))
            t0 = time.monotonic()
            try:
                answered = len(s.recv(4)) == 4
            except ConnectionResetError:
                answered = False
            out.append((answered, time.monotonic() - t0))
    return out


def test_connection_creation_rate_as_kafka(broker: BrokerProcess,
                                           kafka_ref: KafkaReference) -> None:
    """KIP-612 on both brokers: connection_creation_rate=2 for one address allows a burst
    of 20 (2/s over the 10 s window), then a connection is accepted, never answered, and
    closed after the throttle time; another address is not limited. (Loopback addresses
    of their own: the rest of the module connects from 127.0.0.1.)"""
    limited = "127.0.0.3"
    quota = [{"entity": entity(("ip", limited)), "ops": [op("connection_creation_rate", 2.0)]}]
    results = {}
    for name, port in (("headwater", broker.port), ("kafka", kafka_ref.port)):
        assert alter(port, quota) == [(0, None)]
        try:
            results[name] = connection_burst(port, 26, limited)
            results[name, "other"] = connection_burst(port, 1, "127.0.0.4")[0][0]
        finally:
            assert alter(port, [{"entity": entity(("ip", limited)),
                                 "ops": [op("connection_creation_rate", remove=True)]}]) == [
                (0, None)]
    for name in ("headwater", "kafka"):
        burst = results[name]
        assert all(answered for answered, _ in burst[:20]), (name, burst)
        # The first refused connection: the 21st, or (Kafka under load, where the burst
        # spreads over more of its sample windows) one or two later. It is closed by the
        # broker after its throttle time: well after an immediate close (a few ms),
        # shorter the longer the burst itself took (under load 0.25 s was seen).
        first = next(i for i, (answered, _) in enumerate(burst) if not answered)
        assert first <= 22 and 0.1 < burst[first][1] < 1.5, (name, burst)
        refused = [s for answered, s in burst[20:] if not answered]
        assert len(refused) >= 3 and all(0.1 < s < 2.5 for s in refused), (name, burst)
        assert results[name, "other"], name


def test_consumer_byte_rate_counts_share_fetches(broker_factory) -> None:
    """A ShareFetch's records count against consumer_byte_rate, as in Kafka: past the
    quota the response carries a throttle time and the connection is muted; its records
    are delivered all the same (Kafka drops them and leaves them acquired until their
    locks expire, see docs/differences.md), so nothing is redelivered."""
    broker = broker_factory()
    topic, group = f"sq-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(2000):
        producer.produce(topic, b"x" * 1000, partition=0)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    reset = ConfigEntry("share.auto.offset.reset", "earliest",
                        incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs(
            [ConfigResource("group", group, incremental_configs=[reset])]).values():
        future.result(30)
    assert alter(broker.port, [{"entity": entity(("client-id", "raw-test")),
                                "ops": [op("consumer_byte_rate", 50_000.0)]}]) == [(0, None)]
    client = RawClient("127.0.0.1", broker.port)
    meta = client.request(3, 12, {"topics": [{"name": topic, "topic_id": None}],
                                  "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False})
    client.close()
    member = Member(broker.port, group, uuid.uuid4().hex, meta.topics[0].topic_id, join=topic)
    try:
        got: list[tuple[int, int, int]] = []
        throttle_ms, deadline = 0, time.monotonic() + 60
        t0 = time.monotonic()
        while not throttle_ms and time.monotonic() < deadline:
            resp = member.fetch(max_records=500, wait_ms=500)
            t0 = time.monotonic()  # the connection is muted from here (KIP-219)
            throttle_ms = int(resp.throttle_time.total_seconds() * 1000)
            ranges = [(r.first_offset, r.last_offset, r.delivery_count)
                      for t in resp.responses for p in t.partitions for r in p.acquired_records]
            assert ranges or not throttle_ms  # a throttled answer still has its records
            got += ranges
            if ranges:
                member.acknowledge({0: [(f, last, 1) for f, last, _ in ranges]})
        member.fetch(max_records=1, wait_ms=0)  # read once the mute is over (the
        # acknowledgement before it may be the request that waited)
        waited = time.monotonic() - t0
    finally:
        member.close()
    assert throttle_ms > 0, "share fetches were never throttled"
    assert all(count == 1 for _, _, count in got)
    assert waited > throttle_ms / 1000 * 0.5
