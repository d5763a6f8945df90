"""headwater's `__cluster_metadata` log in KRaft's layout, read by Kafka's own tools.

`kafka-dump-log --cluster-metadata-decoder` (DumpLogSegments) and
`kafka-metadata-shell` (MetadataShell, which replays the log into Kafka's own
MetadataImage) are the judges; a log written as JSON by an older headwater is
converted on start and read by them too.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from headwater.config import LogConfig
from headwater.log.partition_log import PartitionLog
from headwater.metadata import records as R
from headwater.records.batch import build_batch
from tests.support.kafka_reference import MetadataShell, run_tool

SEGMENT = "__cluster_metadata-0/00000000000000000000.log"


def dump_log(data_dir: Path) -> str:
    out = run_tool("org.apache.kafka.tools.DumpLogSegments", "--cluster-metadata-decoder",
                   "--files", str(data_dir / SEGMENT), timeout=120)
    assert "Exception" not in out.stdout + out.stderr, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def topics_in_dump(dump: str) -> set[str]:
    return set(re.findall(r'"type":"TOPIC_RECORD".*?"name":"([^"]+)"', dump))


@pytest.mark.timeout(240)
def test_kafkas_tools_read_headwaters_metadata_log(broker_factory):
    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic("orders", 3, 1, config={"retention.ms": "60000"}),
                                   NewTopic("wide", 1200, 1),  # a metadata transaction
                                   NewTopic("gone", 1, 1)], operation_timeout=30)
    for f in futures.values():
        f.result(60)
    for f in admin.delete_topics(["gone"], operation_timeout=30).values():
        f.result(60)
    broker.stop()

    dump = dump_log(broker.data_dir)
    assert '"type":"FEATURE_LEVEL_RECORD"' in dump and '"name":"metadata.version"' in dump
    assert {"orders", "wide", "gone", "__consumer_offsets"} <= topics_in_dump(dump)
    assert dump.count('"type":"BEGIN_TRANSACTION_RECORD"') == 1
    assert dump.count('"type":"END_TRANSACTION_RECORD"') == 1
    assert dump.count('"type":"REMOVE_TOPIC_RECORD"') == 1
    assert '"name":"retention.ms","value":"60000"' in dump
    assert dump.count('"type":"PARTITION_RECORD"') >= 1200 + 3 + 1

    shell = MetadataShell(broker.data_dir / SEGMENT)
    try:
        orders = shell.run("ls", "/image/topics/byName/orders",
                         until=lambda out: "name" in out.split())
        assert orders.split() == ["0", "1", "2", "id", "name"]
        wide = shell.run("ls", "/image/topics/byName/wide",
                         until=lambda out: len(out.split()) >= 1202)
        assert sorted(wide.split()) == sorted([str(i) for i in range(1200)] + ["id", "name"])
        # The topic deleted last: absent once the whole log is applied.
        found = shell.run("find", "/image/topics/byName",
                          until=lambda out: "byName/gone" not in out
                          and "byName/wide/1199" in out)
        assert "/image/topics/byName/__consumer_offsets/49" in found.split()
        configs = shell.run("tree", "/image/configs",
                            until=lambda out: "TOPIC:orders:" in out)
        after = configs.split("TOPIC:orders:", 1)[1].split()
        assert after[:2] == ["retention.ms:", "60000"]
        version = shell.run("cat", "/image/features/metadataVersion",
                            until=lambda out: "IV" in out)
        assert "4.2-IV1" in version
    finally:
        shell.close()

    broker.start()  # and the broker itself still reads it
    listed = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30)
    assert {"orders", "wide"} <= set(listed.topics) and "gone" not in listed.topics


def write_json_metadata_log(data_dir: Path, topic: str, topic_id: str) -> None:
    """The metadata log as an older headwater wrote it: key = type name, value = JSON."""
    plog = PartitionLog.open(data_dir / "__cluster_metadata-0", LogConfig(),
                             "__cluster_metadata", 0, 1_000)
    records = [R.TopicRecord(topic, topic_id),
               R.PartitionRecord(topic_id, 0, (1,), (1,), 1),
               R.PartitionRecord(topic_id, 1, (1,), (1,), 1),
               R.ConfigRecord(2, topic, "retention.ms", "123456")]
    entries = [(r.TYPE.encode(), R.encode_json(r), [], 1_000) for r in records]
    plog.append(build_batch(entries), 1_000)
    plog.close()


@pytest.mark.timeout(240)
@pytest.mark.local_storage("on the shared log the metadata log comes from PostgreSQL: "
                           "there is no local JSON log to convert")
def test_a_json_metadata_log_is_converted_on_start(broker_factory, tmp_path):
    data_dir = tmp_path / "old-data"
    write_json_metadata_log(data_dir, "legacy", str(uuid.uuid4()))
    broker = broker_factory(data_dir=data_dir)
    meta = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30)
    assert len(meta.topics["legacy"].partitions) == 2
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce("legacy", b"after conversion", partition=1)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "legacy-reader",
                  "auto.offset.reset": "earliest"})
    c.subscribe(["legacy"])
    got = None
    for _ in range(60):
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got = m.value()
            break
    c.close()
    assert got == b"after conversion"
    broker.stop()
    assert (data_dir / "__cluster_metadata-0.json-backup").is_dir()
    assert "converted from JSON" in broker.log_path.read_text()
    dump = dump_log(data_dir)
    assert "legacy" in topics_in_dump(dump) and '"value":"123456"' in dump
    assert "keySize: -1" in dump and "keySize: 11" not in dump  # no JSON keys left
