"""Record the fuzzing seeds: real requests from confluent-kafka, kafka-python and aiokafka.

A broker is started with its advertised listener pointing at a recording proxy, so every
connection a client makes (bootstrap, leader, coordinator) goes through it. Each client
runs the flows users run: admin, idempotent and compressed produce, group consumption
with commits (classic and KIP-848), transactions, offsets. Every request frame is kept,
at most a few per (client, api key, version), in `seeds/<client>.jsonl`.

    .venv/bin/python -m tests.fuzz.record_seeds      # rewrites tests/fuzz/seeds/
"""

from __future__ import annotations

import asyncio
import json
import struct
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from tests.support.broker_process import BrokerProcess, free_port

SEEDS = Path(__file__).parent / "seeds"
PER_KEY = 4  # frames kept per (client, api key, version): different sizes preferred


class RecordingProxy:
    """Forwards bytes both ways; splits the client's stream into request frames."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.frames: list[bytes] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.ready = threading.Event()

    def start(self) -> RecordingProxy:
        self.thread.start()
        self.ready.wait(10)
        return self

    def take(self) -> list[bytes]:
        frames, self.frames = self.frames, []
        return frames

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._client, "127.0.0.1", self.port))
        self.ready.set()
        self.loop.run_forever()
        server.close()

    async def _client(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def requests() -> None:
            try:
                while True:
                    size = await reader.readexactly(4)
                    frame = size + await reader.readexactly(struct.unpack(">i", size)[0])
                    self.frames.append(frame)
                    up_writer.write(frame)
            except (asyncio.IncompleteReadError, ConnectionError):
                up_writer.close()

        async def responses() -> None:
            try:
                while data := await up_reader.read(1 << 16):
                    writer.write(data)
                    await writer.drain()
            except ConnectionError:
                pass
            writer.close()

        await asyncio.gather(requests(), responses())


def confluent_flows(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic("seed-ck", 2, 1, config={"retention.ms": "600000"}),
              NewTopic("seed-ck-compact", 1, 1, config={"cleanup.policy": "compact"}),
              NewTopic("seed-ck-gone", 1, 1)]
    for f in admin.create_topics(topics).values():
        f.result(15)
    for f in admin.describe_configs([ConfigResource("topic", "seed-ck")]).values():
        f.result(10)
    for f in admin.create_partitions([NewPartitions("seed-ck-gone", 2)]).values():
        f.result(15)
    for codec in ("none", "lz4", "zstd", "gzip", "snappy"):
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                      "compression.type": codec, "linger.ms": 5})
        for i in range(200):
            p.produce("seed-ck", key=f"k{i}".encode(), value=b"v" * (i % 50),
                      headers=[("h", b"x")] if i % 3 == 0 else None)
        p.produce("seed-ck-compact", key=b"k", value=b"v")
        p.flush(15)
    for protocol in ("classic", "consumer"):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"seed-ck-{protocol}",
                      "group.protocol": protocol, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe(["seed-ck"])
        got, deadline = 0, time.monotonic() + 20
        while got < 100 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
                if got % 25 == 0:
                    c.commit(m, asynchronous=False)
        c.committed([TopicPartition("seed-ck", 0)], timeout=10)
        c.close()
    tp = Producer({"bootstrap.servers": bootstrap, "transactional.id": "seed-ck-txn"})
    tp.init_transactions(15)
    tc = Consumer({"bootstrap.servers": bootstrap, "group.id": "seed-ck-txn-group",
                   "enable.auto.commit": False, "isolation.level": "read_committed",
                   "auto.offset.reset": "earliest"})
    tc.assign([TopicPartition("seed-ck", 0, 0)])
    m = None
    deadline = time.monotonic() + 10
    while m is None and time.monotonic() < deadline:
        m = tc.poll(0.5)
    tp.begin_transaction()
    tp.produce("seed-ck", key=b"t", value=b"txn")
    tp.send_offsets_to_transaction([TopicPartition("seed-ck", 0, 5)],
                                   tc.consumer_group_metadata(), 10)
    tp.commit_transaction(15)
    tp.begin_transaction()
    tp.produce("seed-ck", key=b"t", value=b"aborted")
    tp.abort_transaction(15)
    tc.close()
    offsets = admin.list_offsets({TopicPartition("seed-ck", 0): OffsetSpec.latest(),
                                  TopicPartition("seed-ck", 1): OffsetSpec.earliest()})
    for f in offsets.values():
        f.result(10)
    admin.list_consumer_groups().result(10)
    for f in admin.describe_consumer_groups(["seed-ck-classic", "seed-ck-consumer"]).values():
        f.result(10)
    for f in admin.delete_records([TopicPartition("seed-ck", 1, 1)]).values():
        f.result(10)
    for f in admin.delete_topics(["seed-ck-gone"]).values():
        f.result(15)


def kafka_python_flows(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("seed-kp", 2, 1)])
    admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "seed-kp")])
    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", linger_ms=5)
    for i in range(100):
        p.send("seed-kp", key=f"k{i}".encode(), value=b"v" * i, headers=[("h", b"1")])
    p.flush(15)
    p.close()
    c = KafkaConsumer("seed-kp", bootstrap_servers=bootstrap, group_id="seed-kp-group",
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=5000)
    got = 0
    for _ in c:
        got += 1
        if got >= 50:
            break
    c.commit()
    c.end_offsets([TopicPartition("seed-kp", 0)])
    c.close()
    admin.list_groups()
    admin.describe_groups(["seed-kp-group"])
    admin.list_group_offsets("seed-kp-group")
    admin.describe_topics(["seed-kp"])
    admin.describe_cluster()
    admin.describe_log_dirs()
    admin.list_transactions()
    admin.describe_producers([TopicPartition("seed-kp", 0)])
    admin.delete_topics(["seed-kp"])
    admin.close()


def aiokafka_flows(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True,
                             compression_type="lz4")
        await p.start()
        for i in range(100):
            await p.send("seed-ck", key=f"a{i}".encode(), value=b"w" * i)
        await p.flush()
        await p.stop()
        tp = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="seed-aio-txn")
        await tp.start()
        async with tp.transaction():
            await tp.send("seed-ck", key=b"t", value=b"aio-txn")
        await tp.stop()
        c = AIOKafkaConsumer("seed-ck", bootstrap_servers=bootstrap, group_id="seed-aio",
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        got = 0
        deadline = time.monotonic() + 20
        while got < 50 and time.monotonic() < deadline:
            batch = await c.getmany(timeout_ms=500)
            got += sum(len(v) for v in batch.values())
        await c.commit()
        await c.stop()

    asyncio.run(run())


def share_flows(bootstrap: str) -> None:
    """confluent-kafka's ShareConsumer: heartbeats, fetches, explicit and implicit acks."""
    from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("seed-share", 2, 1)]).values():
        f.result(15)
    entry = ConfigEntry("share.auto.offset.reset", "earliest",
                        incremental_operation=AlterConfigOpType.SET)
    for f in admin.incremental_alter_configs(
            [ConfigResource("group", "seed-share", incremental_configs=[entry])]).values():
        f.result(15)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(60):
        p.produce("seed-share", str(i).encode(), partition=i % 2)
    p.flush(15)
    for mode in ("explicit", "implicit"):
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "seed-share",
                           "share.acknowledgement.mode": mode})
        c.subscribe(["seed-share"])
        got, deadline = 0, time.monotonic() + 15
        while got < 20 and time.monotonic() < deadline:
            batch = c.poll(0.5)
            for m in batch:
                if m.error() is None:
                    got += 1
                    if mode == "explicit":
                        c.acknowledge(m, (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE,
                                          AcknowledgeType.REJECT)[got % 3])
            if batch and mode == "explicit":
                c.commit_sync(10)
        c.close()


FLOWS = {"confluent-kafka": confluent_flows, "confluent-kafka-share": share_flows, "kafka-python": kafka_python_flows,
         "aiokafka": aiokafka_flows}


def keep(frames: list[bytes]) -> list[bytes]:
    """At most PER_KEY frames per (api key, version), spread over distinct sizes."""
    by_key: dict[tuple[int, int], dict[int, bytes]] = defaultdict(dict)
    for frame in frames:
        key, version = struct.unpack_from(">hh", frame, 4)
        by_key[(key, version)].setdefault(len(frame), frame)
    kept = []
    for sizes in by_key.values():
        ordered = [sizes[s] for s in sorted(sizes)]
        step = max(1, len(ordered) // PER_KEY)
        kept += ordered[::step][:PER_KEY]
    return kept


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proxy_port = free_port()
        broker = BrokerProcess(Path(tmp) / "data", "--advertised-listener",
                               f"127.0.0.1:{proxy_port}")
        broker.start()
        proxy = RecordingProxy(broker.port)
        proxy.port = proxy_port
        proxy.start()
        SEEDS.mkdir(exist_ok=True)
        try:
            for client, flow in FLOWS.items():
                flow(f"127.0.0.1:{proxy.port}")
                frames = keep(proxy.take())
                with open(SEEDS / f"{client}.jsonl", "w") as out:
                    for frame in frames:
                        key, version = struct.unpack_from(">hh", frame, 4)
                        out.write(json.dumps({"api_key": key, "version": version,
                                              "frame": frame.hex()}) + "\n")
                print(f"{client}: {len(frames)} seed frames")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
