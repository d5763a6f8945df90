"""StreamsGroupHeartbeat (KIP-1071) raw, side by side with Apache Kafka 4.4: hostile
requests get Kafka's error codes and messages and the group keeps serving its members;
a join's statuses and the internal topics the broker creates; `headwater groups` shows
the group.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.kafka_reference import KafkaReference, create_topic
from tests.support.streams_app import set_group_configs
from tests.support.wire import RawClient

pytestmark = pytest.mark.timeout(180)

Broker = Any  # KafkaReference | BrokerProcess: both have .bootstrap


def heartbeat(b: Broker, version: int = 0, **fields: Any) -> Any:
    host, port = b.bootstrap.rsplit(":", 1)
    body = {"group_id": "g", "member_id": "m", "member_epoch": 0,
            "endpoint_information_epoch": 0, "rebalance_timeout": 30000,
            "topology": None, "active_tasks": [], "standby_tasks": [], "warmup_tasks": [],
            "process_id": "p", "user_endpoint": None, "client_tags": None,
            "task_offsets": None, "task_end_offsets": None, "shutdown_application": False}
    body.update(fields)
    deadline = time.monotonic() + 30
    while True:  # the group's coordinator may be loading (a new group, a new broker)
        client = RawClient(host, int(port), timeout=15)
        try:
            # FindCoordinator first, as clients do: Kafka creates __consumer_offsets then.
            client.request(10, 4, {"key_type": 0, "coordinator_keys": [body["group_id"]]})
            resp = client.request(88, version, body)
        finally:
            client.close()
        if int(resp.error_code) not in (14, 15, 16) or time.monotonic() > deadline:
            return resp
        time.sleep(0.2)


def until_tasks(b: Broker, group: str, member: str, epoch: int) -> Any:
    """Heartbeat as `member` (at `epoch`, then the epochs answered) until it is given
    active tasks: a new group's first assignment waits for the initial rebalance delay
    (3 s). The answer that gave them."""
    deadline = time.monotonic() + 30
    while True:
        resp = heartbeat(b, group_id=group, member_id=member, member_epoch=epoch,
                         active_tasks=None, standby_tasks=None, warmup_tasks=None)
        assert int(resp.error_code) == 0, answer(resp)
        epoch = resp.member_epoch
        if resp.active_tasks:
            return resp
        assert time.monotonic() < deadline, answer(resp)
        time.sleep(0.5)


def topology(*subtopologies: dict[str, Any], epoch: int = 0) -> dict[str, Any]:
    subs = []
    for s in subtopologies:
        sub = {"subtopology_id": "0", "source_topics": [], "source_topic_regex": [],
               "state_changelog_topics": [], "repartition_sink_topics": [],
               "repartition_source_topics": [], "copartition_groups": []}
        sub.update(s)
        subs.append(sub)
    return {"epoch": epoch, "subtopologies": subs}


def info(name: str, partitions: int = 0) -> dict[str, Any]:
    return {"name": name, "partitions": partitions, "replication_factor": 0,
            "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}


def answer(resp: Any) -> tuple[Any, ...]:
    return (int(resp.error_code), resp.error_message,
            [(int(s.status_code), s.status_detail) for s in resp.status or ()])


@pytest.fixture
def both(kafka_ref: KafkaReference, broker: BrokerProcess) -> tuple[Broker, Broker]:
    return kafka_ref, broker


def on_both(pair: tuple[Broker, Broker], fn: Callable[[Broker], Any]) -> list[Any]:
    return [fn(b) for b in pair]


def test_a_join_reports_missing_topics_and_the_broker_creates_the_internal_ones(
        both: tuple[Broker, Broker]) -> None:
    suffix = uuid.uuid4().hex[:8]
    source = f"src-{suffix}"
    changelog = f"app-{suffix}-store-changelog"
    group = f"app-{suffix}"
    stateful = topology({"source_topics": [source], "state_changelog_topics": [info(changelog)]})
    # No source topic yet: MISSING_SOURCE_TOPICS, nothing created.
    k, h = on_both(both, lambda b: answer(heartbeat(b, group_id=group, topology=stateful)))
    # A new group's first assignment also waits for the initial rebalance delay (3 s).
    assert k == h == (0, None, [(5, "Assignment delayed due to the configured initial "
                                    "rebalance delay."),
                                (1, f"Source topics {source} are missing.")]), (k, h)
    for b in both:
        create_topic(b.bootstrap, source, 3)

    def until_created(b: Broker) -> Any:
        deadline = time.monotonic() + 30
        seen = []
        while time.monotonic() < deadline:
            resp = heartbeat(b, group_id=group, member_id=f"m2-{suffix}", topology=stateful)
            seen.append(answer(resp))
            if int(resp.error_code) == 0 and not resp.status:
                return seen[0], [(t.subtopology_id, list(t.partitions))
                                 for t in resp.active_tasks or ()]
            time.sleep(0.5)
        raise AssertionError(seen[-3:])

    k, h = on_both(both, until_created)
    # First MISSING_INTERNAL_TOPICS (the broker creates it), then no status at all.
    missing = (3, f"Internal topics are missing: {changelog}")
    assert missing in k[0][2] and missing in h[0][2], (k, h)
    # Then tasks (which of the 3 the second member gets is the assignor's tie-break).
    assert [sid for sid, _ in k[1]] == [sid for sid, _ in h[1]] == ["0"], (k, h)


@pytest.mark.parametrize(("name", "fields"), [
    ("a changelog with a partition count", {"topology": topology(
        {"source_topics": ["t"], "state_changelog_topics": [info("c", 4)]})}),
    ("a regex source", {"topology": topology({"source_topic_regex": ["t.*"]})}),
    ("Kafka's internal topic as a source", {"topology": topology(
        {"source_topics": ["__consumer_offsets"]})}),
    ("an illegal topic name", {"topology": topology({"source_topics": ["bad name!"]})}),
    ("no rebalance timeout on joining", {"rebalance_timeout": -1,
                                        "topology": topology({"source_topics": ["t"]})}),
    ("tasks when joining", {"active_tasks": [{"subtopology_id": "0", "partitions": [0]}],
                            "topology": topology({"source_topics": ["t"]})}),
    ("no topology on joining", {}),
    ("a member epoch below -2", {"member_epoch": -3}),
    ("one task list without the others", {"member_epoch": 5, "standby_tasks": None,
                                         "warmup_tasks": None}),
    ("a topology after joining", {"member_epoch": 5,
                                  "topology": topology({"source_topics": ["t"]})}),
    ("an empty member id", {"member_id": " ", "topology": topology({"source_topics": ["t"]})}),
])
def test_hostile_heartbeats_get_kafkas_errors(both: tuple[Broker, Broker], name: str,
                                              fields: dict[str, Any]) -> None:
    group = f"hostile-{uuid.uuid4().hex[:8]}"
    k, h = on_both(both, lambda b: answer(heartbeat(b, group_id=group, **fields)))
    assert k[0] != 0, k
    assert k == h, f"{name}: kafka {k}, headwater {h}"


def test_a_member_from_the_future_and_absurd_tasks_leave_the_group_serving(
        both: tuple[Broker, Broker]) -> None:
    suffix = uuid.uuid4().hex[:8]
    source, group = f"src-{suffix}", f"app-{suffix}"
    for b in both:
        create_topic(b.bootstrap, source, 2)
    plain = topology({"source_topics": [source]})

    def story(b: Broker) -> list[Any]:
        joined = heartbeat(b, group_id=group, member_id="good", topology=plain)
        epoch = joined.member_epoch
        out = [answer(joined)[:2]]
        out.append(answer(heartbeat(b, group_id=group, member_id="good",
                                    member_epoch=epoch + 100, active_tasks=None,
                                    standby_tasks=None, warmup_tasks=None))[:2])
        out.append(answer(heartbeat(b, group_id=group, member_id="nobody", member_epoch=1,
                                    active_tasks=None, standby_tasks=None,
                                    warmup_tasks=None))[:2])
        # Wait for the first assignment (Kafka's initial rebalance delay), then report a
        # task that cannot exist.
        epoch = until_tasks(b, group, "good", epoch).member_epoch
        out.append(answer(heartbeat(b, group_id=group, member_id="good", member_epoch=epoch,
                                    active_tasks=[{"subtopology_id": "0",
                                                   "partitions": [1_000_000]}],
                                    standby_tasks=[], warmup_tasks=[]))[:2])
        # The good member carries on.
        again = heartbeat(b, group_id=group, member_id="good", member_epoch=epoch,
                          active_tasks=None, standby_tasks=None, warmup_tasks=None)
        out.append((int(again.error_code), again.member_epoch == epoch))
        return out

    k, h = on_both(both, story)
    assert k == h, (k, h)
    assert [code for code, *_ in k] == [0, 110, 25, 42, 0], k


def test_a_member_lacking_the_groups_rack_tags_is_told_so_at_v1(
        both: tuple[Broker, Broker]) -> None:
    suffix = uuid.uuid4().hex[:8]
    source, group = f"src-{suffix}", f"app-{suffix}"
    for b in both:
        create_topic(b.bootstrap, source, 2)
        set_group_configs(b.bootstrap, group,
                          {"streams.rack.aware.assignment.tags": "zone,rack"})
    plain = topology({"source_topics": [source]})

    def story(b: Broker) -> list[Any]:
        v1 = heartbeat(b, 1, group_id=group, member_id="tagged-zone", topology=plain,
                       client_tags=[{"key": "zone", "value": "a"}])
        v0 = heartbeat(b, 0, group_id=group, member_id="untagged", topology=plain)
        return [answer(v1), answer(v0)]

    k, h = on_both(both, story)
    assert k == h, (k, h)
    missing = (6, "Missing required client tags for rack-aware standby assignment: [rack]. "
                  "Configure them via 'client.tag.<tagKey>' in your Streams config.")
    assert missing in k[0][2] and all(code != 6 for code, _ in k[1][2]), k


def test_a_pushed_topology_description_is_refused_as_kafka_without_a_plugin(
        both: tuple[Broker, Broker]) -> None:
    """StreamsGroupTopologyDescriptionUpdate (93, KIP-1357): advertised at v0 by both,
    and answered UNSUPPORTED_VERSION naming the missing plugin (Kafka's default)."""
    node = {"name": "KSTREAM-SOURCE-0000000000", "node_type": 1, "source_topics": ["t"],
            "sink_topic": None, "stores": [], "successors": []}
    body = {"group_id": "g93", "member_id": "m", "topology_epoch": 0,
            "topology_description": {"subtopologies": [
                {"subtopology_id": "0", "nodes": [node]}], "global_stores": []}}

    def story(b: Broker) -> tuple[Any, ...]:
        host, port = b.bootstrap.rsplit(":", 1)
        client = RawClient(host, int(port), timeout=15)
        try:
            versions = client.request(18, 3, {"client_software_name": "t",
                                              "client_software_version": "1"})
            keys = sorted((int(k.api_key), int(k.min_version), int(k.max_version))
                          for k in versions.api_keys if int(k.api_key) in (88, 89, 93))
            resp = client.request(93, 0, body)
        finally:
            client.close()
        return keys, int(resp.error_code), resp.error_message

    k, h = on_both(both, story)
    assert k == h == ([(88, 0, 1), (89, 0, 1), (93, 0, 0)], 35, "The broker has no streams "
                      "group topology description plugin configured."), (k, h)


def test_headwater_groups_shows_a_streams_group(broker: BrokerProcess) -> None:
    suffix = uuid.uuid4().hex[:8]
    source, group = f"src-{suffix}", f"app-{suffix}"
    create_topic(broker.bootstrap, source, 2)
    epoch = heartbeat(broker, group_id=group, member_id="one",
                      topology=topology({"source_topics": [source]})).member_epoch

    def cli(*args: str) -> str:
        return subprocess.run([sys.executable, "-m", "headwater.cli", "groups", *args,
                               "--bootstrap-server", broker.bootstrap], check=True,
                              capture_output=True, text=True, timeout=60).stdout

    listed = cli("list")
    row = next(line.split() for line in listed.splitlines() if line.startswith(group))
    assert row[1] == "streams", listed
    described = cli("describe", group)
    assert f"Group {group} is " in described, described

    # The console's group page: the member's tasks, its input partitions and their ends.
    from headwater.console import groups as console_groups
    from headwater.console.connection import Target

    until_tasks(broker, group, "one", epoch)
    view = console_groups.describe(Target(broker.bootstrap), group)
    assert view.streams and view.state in ("Reconciling", "Stable"), view
    (one,) = view.members
    assert (one.member_id, one.tasks, sorted(one.partitions)) == (
        "one", {"active": ["0_0", "0_1"]}, [f"{source}-0", f"{source}-1"]), one
    assert [(p.partition, p.end, p.member) for p in view.partitions] == [
        (0, 0, "one"), (1, 0, "one")], view.partitions


def test_kafka_streams_groups_resets_deletes_offsets_and_deletes_the_group(
        both: tuple[Broker, Broker]) -> None:
    """kafka-streams-groups on an empty streams group (a member joined and left): reset
    its input offsets to the earliest, delete them, delete the group: the same output
    and exit status from Kafka 4.4 and headwater."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    from tests.support.kafka_reference import run_tool

    suffix = uuid.uuid4().hex[:8]
    source, group = f"src-{suffix}", f"app-{suffix}"

    def prepare(b: Broker) -> None:
        create_topic(b.bootstrap, source, 2)
        joined = heartbeat(b, group_id=group, member_id="m",
                           topology=topology({"source_topics": [source]}))
        assert int(joined.error_code) == 0, answer(joined)
        left = heartbeat(b, group_id=group, member_id="m", member_epoch=-1,
                         active_tasks=None, standby_tasks=None, warmup_tasks=None)
        assert int(left.error_code) == 0, answer(left)
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        done = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            group, [TopicPartition(source, 0, 5), TopicPartition(source, 1, 7)])])
        for future in done.values():
            future.result(30)

    def tool(b: Broker, *args: str) -> tuple[int, list[str]]:
        proc = run_tool("kafka-streams-groups", "--bootstrap-server", b.bootstrap, *args,
                        check=False, timeout=90)
        lines = [" ".join(line.split()) for line in (proc.stdout + proc.stderr).splitlines()
                 if line.strip() and "SLF4J" not in line]
        return proc.returncode, sorted(lines)

    on_both(both, prepare)
    for args in [("--describe", "--group", group, "--state"),
                 ("--reset-offsets", "--group", group, "--input-topic", source,
                  "--to-earliest", "--execute"),
                 ("--delete-offsets", "--group", group, "--input-topic", source),
                 ("--delete", "--group", group),
                 ("--describe", "--group", group)]:
        k, h = [tool(b, *args) for b in both]
        # The coordinator's address and id (any broker of a cluster) are not compared.
        k, h = ((code, [re.sub(r"\S+:\d+ \(\d+\)", "COORDINATOR", line) for line in lines])
                for code, lines in (k, h))
        assert k == h, f"{' '.join(args)}\nkafka: {k}\nheadwater: {h}"
