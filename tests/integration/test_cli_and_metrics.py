"""`headwater groups ...` and the Prometheus endpoint against a running broker."""

from __future__ import annotations

import json
import subprocess
import sys

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.test_clients_round_trip import create_topic
from tests.support.broker_process import free_port


def cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "headwater.cli", "groups",
                           "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=60)
    if done.returncode and "delete" not in args:
        raise AssertionError(f"headwater groups {args} failed: {done.stderr}")
    return done


def test_groups_cli_and_metrics(broker_factory, topic_name):
    metrics_port = free_port()
    b = broker_factory("--metrics-listen", f"127.0.0.1:{metrics_port}")
    create_topic(b.bootstrap, topic_name, partitions=2)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(10):
        p.produce(topic_name, f"v{i}".encode(), partition=i % 2)
    assert p.flush(10) == 0
    group = "cli-group"
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic_name, 0, 2), TopicPartition(topic_name, 1, 5)],
             asynchronous=False)
    c.close()

    listed = json.loads(cli(b.bootstrap, "--json", "list").stdout)
    assert {"group": group, "type": "classic", "state": "Empty",
            "protocol_type": ""} in listed

    described = cli(b.bootstrap, "--json", "describe", group)
    rows = json.loads(described.stdout)
    assert [(r["partition"], r["current_offset"], r["log_end_offset"], r["lag"])
            for r in rows] == [(0, 2, 5, 3), (1, 5, 5, 0)]
    table = cli(b.bootstrap, "describe", group).stdout
    assert "LOG-END-OFFSET" in table and "Group cli-group is Empty" in table

    body = b.metrics()  # on a cluster, the three brokers' series added up
    assert (f'headwater_consumer_group_lag{{group="{group}",partition="0",'
            f'topic="{topic_name}"}} 3.0') in body
    assert f'headwater_log_end_offset{{partition="1",topic="{topic_name}"}} 5.0' in body
    assert 'headwater_group_count{protocol="classic"}' in body
    assert "headwater_partition_load_time_max_ms" in body

    dry = cli(b.bootstrap, "reset-offsets", group, "--topic", topic_name, "--to-earliest")
    assert "dry run" in dry.stdout and dry.returncode == 0
    rows = json.loads(cli(b.bootstrap, "--json", "describe", group).stdout)
    assert rows[0]["current_offset"] == 2  # unchanged by the dry run
    done = cli(b.bootstrap, "reset-offsets", group, "--topic", topic_name, "--to-latest",
               "--execute")
    assert done.returncode == 0, done.stderr
    rows = json.loads(cli(b.bootstrap, "--json", "describe", group).stdout)
    assert [r["lag"] for r in rows] == [0, 0]

    assert cli(b.bootstrap, "delete", group).returncode == 0
    listed = json.loads(cli(b.bootstrap, "--json", "list").stdout)
    assert group not in [g["group"] for g in listed]
    missing = cli(b.bootstrap, "delete", group)
    assert missing.returncode == 1 and "GROUP_ID_NOT_FOUND" in missing.stderr.upper()
