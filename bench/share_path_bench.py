"""Broker CPU per record on the share-group path, without a client's costs in the way.

A headwater broker is started; 200,000 x 100 B records are produced in batches of 500;
then one share-group member speaking the wire protocol by hand (pre-built requests, so
the client costs almost nothing) runs ShareFetch (MaxRecords 500) -> ShareAcknowledge
(ACCEPT of what was acquired) cycles, as librdkafka does with commit_sync, until every
record is acknowledged. The broker's CPU time (utime + stime from /proc) over the cycles,
divided by the records, is the figure: it is what bench/share_bench.py's share-vs-classic
floor is most sensitive to on a 2-core machine, and it is stable where end-to-end msgs/s
is not.

    python bench/share_path_bench.py [--records N] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import broker_bench as bb
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

if str(bb.PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(bb.PROJECT_ROOT))

from tests.support.wire import RawClient  # noqa: E402

ACCEPT = 1


def produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 500,
                  "queue.buffering.max.messages": 2_000_000})
    payload = b"x" * 100
    for i in range(n):
        p.produce(topic, payload, partition=0)
        if i % 10_000 == 0:
            p.poll(0)
    if p.flush(60) != 0:
        raise RuntimeError("records left unacknowledged")


def earliest_group(bootstrap: str) -> str:
    group = f"path-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry("share.auto.offset.reset", "earliest",
                        incremental_operation=AlterConfigOpType.SET)
    for fut in admin.incremental_alter_configs(
            [ConfigResource("group", group, incremental_configs=[entry])]).values():
        fut.result(30)
    return group


def run_member(broker: bb.Broker, topic: str, topic_id: uuid.UUID, total: int) -> dict:
    host, port = broker.bootstrap.rsplit(":", 1)
    client = RawClient(host, int(port), timeout=30)
    group, member = earliest_group(broker.bootstrap), uuid.uuid4().hex
    joined = client.request(76, 1, {"group_id": group, "member_id": member, "member_epoch": 0,
                                    "rack_id": None, "subscribed_topic_names": [topic]})
    assert joined.error_code == 0, joined
    epoch, done, cycles = 0, 0, 0
    acks: list[tuple[int, int]] = []
    fetch_s: list[float] = []
    ack_s: list[float] = []
    cpu0, t0 = broker.cpu_seconds(), time.monotonic()
    deadline = t0 + 120
    while done < total and time.monotonic() < deadline:
        parts = [{"partition_index": 0, "acknowledgement_batches": []}] if epoch == 0 else []
        t_req = time.perf_counter()
        resp = client.request(78, 1, {
            "group_id": group, "member_id": member, "share_session_epoch": epoch,
            "max_wait": 500, "min_bytes": 1, "max_bytes": 52_428_800, "max_records": 500,
            "batch_size": 500, "forgotten_topics_data": [],
            "topics": [{"topic_id": topic_id, "partitions": parts}] if parts else []})
        fetch_s.append(time.perf_counter() - t_req)
        assert resp.error_code == 0, resp
        epoch += 1
        acks = [(r.first_offset, r.last_offset) for t in resp.responses
                for p in t.partitions for r in p.acquired_records]
        if not acks:
            continue
        t_req = time.perf_counter()
        ack = client.request(79, 1, {
            "group_id": group, "member_id": member, "share_session_epoch": epoch,
            "topics": [{"topic_id": topic_id, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": f, "last_offset": last, "acknowledge_types": [ACCEPT]}
                    for f, last in acks]}]}]})
        ack_s.append(time.perf_counter() - t_req)
        assert ack.error_code == 0, ack
        epoch += 1
        cycles += 1
        done += sum(last - f + 1 for f, last in acks)
    elapsed = time.monotonic() - t0
    cpu = broker.cpu_seconds() - cpu0
    client.close()
    if done < total:
        raise RuntimeError(f"only {done:,} of {total:,} acknowledged")
    return {"records": done, "cycles": cycles, "seconds": elapsed,
            "cpu_us_per_record": cpu / done * 1e6, "cpu_us_per_cycle": cpu / cycles * 1e6,
            "records_per_s": done / elapsed,
            "fetch_rtt_us": statistics.median(fetch_s) * 1e6,
            "ack_rtt_us": statistics.median(ack_s) * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="share-path-") as tmp:
        broker = bb.make_broker("headwater", None, Path(tmp))
        broker.start(60)
        try:
            topic = bb.create_topic(broker.bootstrap, "share-path", 1)
            produce(broker.bootstrap, topic, args.records)
            client = RawClient(*broker.bootstrap.rsplit(":", 1)[0:1],
                               int(broker.bootstrap.rsplit(":", 1)[1]))
            meta = client.request(3, 12, {"topics": [{"name": topic, "topic_id": None}],
                                          "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
            client.close()
            topic_id = meta.topics[0].topic_id
            for i in range(args.rounds):
                row = run_member(broker, topic, topic_id, args.records)
                rows.append(row)
                print(f"round {i + 1}: {row['cpu_us_per_record']:.3f} us broker CPU per "
                      f"record, {row['cpu_us_per_cycle']:.0f} us per fetch+ack cycle "
                      f"({row['cycles']} cycles), {row['records_per_s']:,.0f} records/s "
                      f"one member; median round trip ShareFetch {row['fetch_rtt_us']:.0f} us, "
                      f"ShareAcknowledge {row['ack_rtt_us']:.0f} us (client decode included)",
                      flush=True)
        finally:
            broker.stop()
    print(f"median: {statistics.median(r['cpu_us_per_record'] for r in rows):.3f} us broker "
          f"CPU per acknowledged record, "
          f"{statistics.median(r['cpu_us_per_cycle'] for r in rows):.0f} us per cycle")


if __name__ == "__main__":
    main()
