"""Share-group administration (issue 11): DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets and DeleteGroups against real clients, with Kafka 4.4.0's own
kafka-share-groups (ShareGroupCommand) as the judge, and `headwater share-groups`.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import AcknowledgeType

from headwater.cli import main as cli_main
from tests.integration.test_share_consumer import (
    consumer,
    poll_until,
    produce_batches,
    queue,  # noqa: F401  fixture
    set_group_configs,
)
from tests.integration.test_share_fetch import make_topic
from tests.support.kafka_reference import run_tool
from tests.support.wire import RawClient

pytestmark = pytest.mark.timeout(180)

SHARE_TOOL = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUEST = 42


def tool(bootstrap: str, *args: str, check: bool = True) -> str:
    proc = run_tool(SHARE_TOOL, "--bootstrap-server", bootstrap, *args, check=check)
    return proc.stdout + proc.stderr


def table(out: str, first: str) -> list[list[str]]:
    """Rows of a tool's table whose first column is `first` (the group)."""
    return [line.split() for line in out.splitlines() if line.split()[:1] == [first]]


def offsets(bootstrap: str, group: str) -> dict[tuple[str, int], tuple[int, int]]:
    """DescribeShareGroupOffsets v1, all topics: (topic, partition) -> (start, lag), asked
    of the group's coordinator (FindCoordinator through the first bootstrap address)."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    client = RawClient(host, int(port))
    try:
        found = client.request(10, 4, {"key_type": 0, "coordinator_keys": [group]})
    finally:
        client.close()
    coordinator = found.coordinators[0]
    client = RawClient(coordinator.host, int(coordinator.port))
    try:
        g = client.request(90, 1, {"groups": [{"group_id": group, "topics": None}]}).groups[0]
    finally:
        client.close()
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag)
            for t in g.topics for p in t.partitions}


def consume_accepting(bootstrap: str, group: str, topic: str, total: int, accept: int) -> None:
    """Read `total` records; accept values below `accept`, release the rest; leave."""
    c = consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    seen: list[int] = []

    def ack(msg: object) -> None:
        value = int(msg.value())
        seen.append(value)
        c.acknowledge(msg, AcknowledgeType.ACCEPT if value < accept
                      else AcknowledgeType.RELEASE)

    poll_until(c, lambda: len(seen) >= total, on_message=ack)
    c.commit_sync(15)
    c.close()
    assert sorted(seen)[:total] == list(range(total))


def test_kafka_tool_describe_lag_reset_and_a_consumer_starts_there(broker, queue):  # noqa: F811
    topic, group, _ = queue
    produce_batches(broker.bootstrap, topic, batches=2, per_batch=5)
    consume_accepting(broker.bootstrap, group, topic, total=10, accept=4)

    # Kafka's tool: start offset 4 (0-3 accepted), lag 10 - 4 - 0 = 6.
    out = tool(broker.bootstrap, "--describe", "--group", group, "--offsets")
    assert table(out, group) == [[group, topic, "0", "4", "6"]], out
    out = tool(broker.bootstrap, "--describe", "--group", group, "--state")
    assert "Empty" in out and "0" in table(out, group)[0], out
    assert group in tool(broker.bootstrap, "--list").split()

    # Dry run: shown, nothing changed.
    out = tool(broker.bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
               "--to-earliest", "--dry-run")
    assert table(out, group) == [[group, topic, "0", "0"]], out
    assert offsets(broker.bootstrap, group) == {(topic, 0): (4, 6)}

    # --execute: the share coordinator's start offset is 0, lag 10.
    tool(broker.bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
         "--to-earliest", "--execute")
    assert offsets(broker.bootstrap, group) == {(topic, 0): (0, 10)}
    out = tool(broker.bootstrap, "--describe", "--group", group)
    assert table(out, group) == [[group, topic, "0", "0", "10"]], out

    # A consumer then starts at the reset offset: 0..9 again, 0-3 included.
    c = consumer(broker.bootstrap, group, topic)
    seen: list[int] = []
    try:
        poll_until(c, lambda: len(seen) >= 10, on_message=lambda m: seen.append(int(m.value())))
    finally:
        c.close()
    assert sorted(seen) == list(range(10))


def test_reset_to_a_later_offset_with_the_headwater_cli(broker, queue, capsys):  # noqa: F811
    topic, group, _ = queue
    produce_batches(broker.bootstrap, topic, batches=2, per_batch=5)
    consume_accepting(broker.bootstrap, group, topic, total=10, accept=2)
    b = ["share-groups", "--bootstrap-server", broker.bootstrap]

    assert cli_main([*b, "describe", group, "--offsets"]) == 0
    out = capsys.readouterr().out
    assert f"Share group {group} is Empty" in out
    assert table(out, group) == [[group, topic, "0", "2", "8"]], out

    assert cli_main([*b, "reset-offsets", group, "--topic", topic, "--to-offset", "7"]) == 0
    out = capsys.readouterr().out
    assert table(out, group) == [[group, topic, "0", "7"]] and "dry run" in out
    assert offsets(broker.bootstrap, group) == {(topic, 0): (2, 8)}
    assert cli_main([*b, "reset-offsets", group, "--topic", topic, "--to-offset", "7",
                     "--execute"]) == 0
    capsys.readouterr()
    assert cli_main([*b, "--json", "describe", group]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"group": group, "topic": topic, "partition": 0, "start_offset": 7, "lag": 3}]

    c = consumer(broker.bootstrap, group, topic)
    seen: list[int] = []
    try:
        poll_until(c, lambda: len(seen) >= 3, on_message=lambda m: seen.append(int(m.value())))
        assert cli_main([*b, "describe", group, "--members"]) == 0
        members = table(capsys.readouterr().out, group)
        assert len(members) == 1 and members[0][-1] == f"{topic}:0"
        # Not empty: refused by the broker.
        assert cli_main([*b, "reset-offsets", group, "--topic", topic, "--to-earliest",
                         "--execute"]) == 1
        assert "non_empty_group" in capsys.readouterr().err
    finally:
        c.close()
    assert sorted(seen) == [7, 8, 9]

    assert cli_main([*b, "--json", "list"]) == 0
    assert {"group": group, "state": "Empty"} in json.loads(capsys.readouterr().out)
    assert cli_main([*b, "delete-offsets", group, "--topic", topic]) == 0
    assert table(capsys.readouterr().out, topic) == [[topic, "Successful"]]
    assert offsets(broker.bootstrap, group) == {}
    assert cli_main([*b, "delete", group]) == 0
    assert capsys.readouterr().out.strip() == f"Deleted share group {group}"
    assert cli_main([*b, "describe", group]) == 1
    assert "group_id_not_found" in capsys.readouterr().err


def test_non_empty_unknown_and_bad_input_get_kafkas_errors(broker, queue):  # noqa: F811
    topic, group, open_consumer = queue
    produce_batches(broker.bootstrap, topic, batches=1, per_batch=3)
    c = open_consumer()
    seen: list[int] = []
    poll_until(c, lambda: len(seen) >= 3, on_message=lambda m: seen.append(int(m.value())))
    before = offsets(broker.bootstrap, group)
    client = RawClient("127.0.0.1", broker.port)
    try:
        alter = {"group_id": group, "topics": [{"topic_name": topic, "partitions": [
            {"partition_index": 0, "start_offset": 0}]}]}
        resp = client.request(91, 0, alter)
        assert int(resp.error_code) == NON_EMPTY_GROUP
        resp = client.request(92, 0, {"group_id": group, "topics": [{"topic_name": topic}]})
        assert int(resp.error_code) == NON_EMPTY_GROUP
        resp = client.request(42, 2, {"groups_names": [group]})
        assert int(resp.results[0].error_code) == NON_EMPTY_GROUP
        assert offsets(broker.bootstrap, group) == before

        # Alter creates a group nobody used (Kafka; test_group_admin_create_vs_kafka.py).
        resp = client.request(91, 0, {**alter, "group_id": "altered-new-group"})
        assert int(resp.error_code) == 0
        assert offsets(broker.bootstrap, "altered-new-group") == {(topic, 0): (0, 3)}
        resp = client.request(92, 0, {"group_id": "no-such-group", "topics": []})
        assert int(resp.error_code) == GROUP_ID_NOT_FOUND
    finally:
        c.close()
    try:
        resp = client.request(91, 0, {"group_id": group, "topics": [
            {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": -5},
                                                 {"partition_index": 9, "start_offset": 1}]},
            {"topic_name": "no-such-topic", "partitions": [
                {"partition_index": 0, "start_offset": 1}]}]})
        assert int(resp.error_code) == 0
        codes = {(t.topic_name, p.partition_index): int(p.error_code)
                 for t in resp.responses for p in t.partitions}
        assert codes == {(topic, 0): INVALID_REQUEST, (topic, 9): UNKNOWN_TOPIC_OR_PARTITION,
                         ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
        assert offsets(broker.bootstrap, group) == before
        # Describe of an unknown topic: no data, not an error (Kafka).
        g = client.request(90, 1, {"groups": [{"group_id": group, "topics": [
            {"topic_name": "no-such-topic", "partitions": [0]}]}]}).groups[0]
        p = g.topics[0].partitions[0]
        assert (int(g.error_code), p.start_offset, p.lag) == (0, -1, -1)
    finally:
        client.close()


def test_kafka_tool_delete_offsets_and_delete(broker, queue):  # noqa: F811
    topic, group, _ = queue
    produce_batches(broker.bootstrap, topic, batches=1, per_batch=4)
    consume_accepting(broker.bootstrap, group, topic, total=4, accept=4)
    assert offsets(broker.bootstrap, group) == {(topic, 0): (4, 0)}

    out = tool(broker.bootstrap, "--delete-offsets", "--group", group, "--topic", topic)
    assert [topic, "Successful"] in [line.split() for line in out.splitlines()], out
    assert "has no offset information" in tool(broker.bootstrap, "--describe", "--group",
                                               group)
    out = tool(broker.bootstrap, "--delete", "--group", group)
    assert "was successful" in out, out
    assert group not in tool(broker.bootstrap, "--list").split()
    # The state went with the group: a new group of that name starts from earliest.
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    c = consumer(broker.bootstrap, group, topic)
    seen: list[int] = []
    try:
        poll_until(c, lambda: len(seen) >= 4, on_message=lambda m: seen.append(int(m.value())))
    finally:
        c.close()
    assert sorted(seen) == [0, 1, 2, 3]


@pytest.mark.local_storage(
    "the fault exits right after the pending-deletion record is appended, before the "
    "shared log commits it: there the deletion never started (and was never answered)")
def test_crash_between_deletion_steps_is_finished_on_load(broker_factory, tmp_path,
                                                          topic_name):
    data = tmp_path / "crash"
    b = broker_factory("--override", "headwater.share.crash.after.pending.deletion=true",
                       data_dir=data)
    group = "crash-group"
    topic_id = make_topic(b, topic_name)
    set_group_configs(b.bootstrap, group, share_auto_offset_reset="earliest")
    produce_batches(b.bootstrap, topic_name, batches=1, per_batch=3)
    consume_accepting(b.bootstrap, group, topic_name, total=3, accept=2)
    assert offsets(b.bootstrap, group) == {(topic_name, 0): (2, 1)}
    client = RawClient("127.0.0.1", b.port)
    with pytest.raises(Exception):  # noqa: B017  the broker exits mid-request
        client.request(92, 0, {"group_id": group, "topics": [{"topic_name": topic_name}]})
    client.close()
    deadline = time.monotonic() + 20
    while b.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert b.proc.poll() == 1

    # Restarted without the hook: the pending deletion is finished (state tombstones,
    # then the completing record), so the share-partition is gone from the group.
    b2 = broker_factory(data_dir=data)

    def state_start() -> int | None:
        """The share coordinator's start offset (-1: no state), None while loading."""
        c2 = RawClient("127.0.0.1", b2.port)
        try:
            part = c2.request(87, 1, {"group_id": group, "topics": [{
                "topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": 0}]}]}
            ).results[0].partitions[0]
        finally:
            c2.close()
        return part.start_offset if int(part.error_code) == 0 else None

    # The group drops the topic with the pending record, before load; the share
    # coordinator's state goes when finish_pending runs after load: wait for that, not
    # for the describe (which is empty at once), before a consumer may read the state.
    deadline = time.monotonic() + 30
    while state_start() != -1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert state_start() == -1
    assert offsets(b2.bootstrap, group) == {}
    # A consumer starts over from earliest: the old state (start offset 2) is gone.
    c = consumer(b2.bootstrap, group, topic_name)
    seen: list[int] = []
    try:
        poll_until(c, lambda: len(seen) >= 3, on_message=lambda m: seen.append(int(m.value())))
    finally:
        c.close()
    assert sorted(seen) == [0, 1, 2]


def test_headwater_cli_resets_to_latest_datetime_and_duration(broker, queue, capsys):  # noqa: F811
    topic, group, _ = queue
    produce_batches(broker.bootstrap, topic, batches=1, per_batch=5)
    mid_ms = int(time.time() * 1000)
    while int(time.time() * 1000) <= mid_ms + 5:
        time.sleep(0.005)  # the second batch's timestamps come after `mid`
    mid = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(mid_ms / 1000)) + \
        f".{mid_ms % 1000:03d}+00:00"
    produce_batches(broker.bootstrap, topic, batches=1, per_batch=5, start=5)
    consume_accepting(broker.bootstrap, group, topic, total=10, accept=10)
    assert offsets(broker.bootstrap, group) == {(topic, 0): (10, 0)}
    b = ["share-groups", "--bootstrap-server", broker.bootstrap]

    def reset(*how: str) -> tuple[int, str, str]:
        code = cli_main([*b, "reset-offsets", group, "--topic", topic, *how])
        out, err = capsys.readouterr()
        return code, out, err

    code, out, _ = reset("--to-datetime", mid)
    assert code == 0 and table(out, group) == [[group, topic, "0", "5"]] and "dry run" in out
    assert offsets(broker.bootstrap, group) == {(topic, 0): (10, 0)}
    assert reset("--to-datetime", mid, "--execute")[0] == 0
    assert offsets(broker.bootstrap, group) == {(topic, 0): (5, 5)}
    assert reset("--by-duration", "P1D", "--execute")[0] == 0
    assert offsets(broker.bootstrap, group) == {(topic, 0): (0, 10)}
    assert reset("--to-latest", "--execute")[0] == 0
    assert offsets(broker.bootstrap, group) == {(topic, 0): (10, 0)}
    # A duration reaching no record: the log end, as Kafka's tool does.
    code, out, _ = reset("--by-duration", "PT0S")
    assert code == 0 and table(out, group) == [[group, topic, "0", "10"]]

    # Bad input: a clear error, exit 1, nothing changed.
    for how, message in ((("--by-duration", "an hour"), "invalid duration"),
                         (("--to-datetime", "yesterday"), "invalid datetime"),
                         (("--to-offset", "-3"), "invalid offset")):
        code, _out, err = reset(*how, "--execute")
        assert code == 1 and message in err, (how, err)
    code = cli_main([*b, "reset-offsets", group, "--topic", "no-such-topic", "--to-earliest",
                     "--execute"])
    assert code == 1 and "unknown_topic_or_partition" in capsys.readouterr().err
    # A group nobody used is created with those offsets, as Kafka's kafka-share-groups
    # --reset-offsets --execute does (AlterShareGroupOffsets creates it).
    code = cli_main([*b, "reset-offsets", "new-reset-group", "--topic", topic,
                     "--to-earliest", "--execute"])
    assert code == 0, capsys.readouterr()
    assert offsets(broker.bootstrap, "new-reset-group") == {(topic, 0): (0, 10)}
    assert offsets(broker.bootstrap, group) == {(topic, 0): (10, 0)}
