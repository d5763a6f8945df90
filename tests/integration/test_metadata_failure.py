"""KIP-868 metadata transactions against a real broker: a kill in the middle rolls the
change back and nothing else; clients never see part of a change."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from headwater.metadata import codec
from headwater.metadata import records as R
from headwater.records.batch import decode_records, iter_batches
from tests.support.wire import RawClient

pytestmark = pytest.mark.timeout(180)


def create(bootstrap: str, name: str, partitions: int, timeout: float = 60) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=60)[name].result(
        timeout)


def metadata_records(data_dir) -> list[object]:
    out = []
    for seg in sorted((data_dir / "__cluster_metadata-0").glob("*.log")):
        data = seg.read_bytes()
        for pos, h in iter_batches(data):
            out += [codec.decode(r.key, r.value) for r in decode_records(data[pos:pos + h.size])]
    return out


@pytest.mark.local_storage("on the shared log a metadata change is pushed once written "
                           "whole: a transaction cut by a kill never reaches PostgreSQL, "
                           "so there is nothing to roll back")
def test_a_kill_inside_a_metadata_transaction_rolls_back_only_it(broker_factory):
    broker = broker_factory("--override", "headwater.test.metadata.fault=kill-after-begin")
    create(broker.bootstrap, "before", 2)
    with pytest.raises(Exception):  # noqa: B017  the broker dies under the request
        create(broker.bootstrap, "wide", 2_000, timeout=20)
    deadline = time.monotonic() + 30
    while broker.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert broker.proc.returncode == -9
    again = broker_factory(data_dir=broker.data_dir)  # without the fault
    topics = AdminClient({"bootstrap.servers": again.bootstrap}).list_topics(timeout=30).topics
    assert "before" in topics and "wide" not in topics
    assert len(topics["before"].partitions) == 2
    aborts = [r for r in metadata_records(again.data_dir)
              if isinstance(r, R.AbortTransactionRecord)]
    assert [a.reason for a in aborts] == ["open at startup"]
    create(again.bootstrap, "wide", 2_000)
    assert len(AdminClient({"bootstrap.servers": again.bootstrap}).list_topics(
        timeout=30).topics["wide"].partitions) == 2_000


def test_a_failed_append_then_more_changes_then_a_restart(broker_factory):
    broker = broker_factory("--override",
                            "headwater.test.metadata.fault=fail-append-after-begin")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    future = admin.create_topics([NewTopic("wide", 1_500, 1)], operation_timeout=60)["wide"]
    with pytest.raises(Exception, match="metadata log refused"):
        future.result(60)
    create(broker.bootstrap, "after", 1)
    broker.restart()
    topics = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30).topics
    assert "after" in topics and "wide" not in topics
    broker.stop()
    # `headwater metadata` reads the stopped broker's log: the failed transaction's
    # records are marked aborted, and the image is what the broker rebuilt.
    log = json.loads(cli("metadata", "--data-dir", str(broker.data_dir), "--json", "log"))
    aborted = [r for r in log if r["transaction"] == "aborted"]
    assert len(aborted) == 500  # the Begin batch's: TopicRecord wide, 499 partitions
    assert [r["transaction"] for r in log].count("begin, aborted") == 1
    assert aborted[0]["record"] == "TopicRecord" and "name=wide" in aborted[0]["data"]
    abort = next(r for r in log if r["record"] == "AbortTransactionRecord")
    assert "No space left" in abort["data"] and abort["transaction"] == "abort"
    image = json.loads(cli("metadata", "--data-dir", str(broker.data_dir), "--json",
                           "image"))
    names = {r["name"] for r in image if r["kind"] == "topic"}
    assert "after" in names and "wide" not in names
    assert {"kind": "feature", "name": "metadata.version",
            "value": str(R.METADATA_VERSION)} in image


def cli(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "headwater.cli", *args], capture_output=True,
                         text=True, timeout=60, check=True)
    return out.stdout


def test_metadata_never_shows_part_of_a_topic(broker):
    """A client polling Metadata while a 3,000-partition CreateTopics is written (six
    batches in one metadata transaction) sees the topic whole or not at all."""
    seen: list[int] = []
    stop = threading.Event()

    def poll() -> None:
        client = RawClient("127.0.0.1", broker.port)
        try:
            while not stop.is_set():
                resp = client.request(3, 12, {
                    "topics": [{"name": "visible", "topic_id": None}],
                    "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False})
                t = resp.topics[0]
                seen.append(len(t.partitions) if int(t.error_code) == 0 else 0)
        finally:
            client.close()
    thread = threading.Thread(target=poll)
    thread.start()
    try:
        create(broker.bootstrap, "visible", 3_000)
        deadline = time.monotonic() + 30
        while (not seen or seen[-1] != 3_000) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join(10)
    assert seen and seen[-1] == 3_000
    assert set(seen) <= {0, 3_000}, sorted(set(seen))
