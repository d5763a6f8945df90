"""The APIs and versions Apache Kafka 4.4.0's clients and tools use that headwater
gained with 4.4 as the reference: DescribeTopicPartitions (75) with its cursor paging,
ListOffsets v11, Fetch v18, DescribeLogDirs v5, ApiVersions v5, DeleteGroups v3,
UpdateFeatures (57) and the feature levels (share.version 2; the share-group and
consumer-group APIs gated by their features). Each is run with Kafka's own tool (or the
same raw request) against the reference Kafka and headwater, and the answers compared.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.integration.test_kafka_tools_more import (
    Broker,
    both,
    controller_of,
    create_topic,
    first_error,
    leaders,
    normalize,
    produce,
    same,
    tool,
)
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_reference import KafkaReference, reference_fixture
from tests.support.wire import RawClient

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def kafka_ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaReference]:
    """A reference of this module's own, not the session's: it downgrades and disables
    share.version and group.version (cluster-wide features, whose refusals may depend on
    the groups other modules left), and its DescribeTopicPartitions cases use fixed
    topic names."""
    yield from reference_fixture(tmp_path_factory.mktemp("kafka-ref"))


@pytest.fixture(scope="module")
def pair(kafka_ref: KafkaReference, broker: BrokerProcess) -> tuple[Broker, Broker]:
    return kafka_ref, broker


def request(b: Broker, api_key: int, version: int, body: dict) -> Any:
    host, port = b.bootstrap.rsplit(":", 1)
    client = RawClient(host, int(port), timeout=15)
    try:
        return client.request(api_key, version, body)
    finally:
        client.close()


def on_pair(pair: tuple[Broker, Broker], fn: Callable[[Broker], object]) -> list[object]:
    return [fn(b) for b in pair]


# --- DescribeTopicPartitions (75) ----------------------------------------------------


def dtp(b: Broker, topics: list[str], limit: int = 2000,
        cursor: tuple[str, int] | None = None) -> tuple[list[tuple], tuple | None]:
    """A DescribeTopicPartitions v0 answer without what differs by nature (topic ids are
    reduced to zero / non-zero)."""
    resp = request(b, 75, 0, {
        "topics": [{"name": t} for t in topics], "response_partition_limit": limit,
        "cursor": None if cursor is None else {"topic_name": cursor[0],
                                               "partition_index": cursor[1]}})
    def led(node: int, leader: int) -> object:
        # Kafka's reference has one broker, which leads everything; a cluster's
        # partitions are led by any of its brokers: the leader, one of b's, as LEADER
        return "LEADER" if node == leader and leader in b.node_ids else node

    out = [(t.name, int(t.error_code), t.is_internal, t.topic_id not in (None, 0)
            and t.topic_id.int != 0, t.topic_authorized_operations,
            [(p.partition_index, int(p.error_code), led(p.leader_id, p.leader_id),
              p.leader_epoch, tuple(led(r, p.leader_id) for r in p.replica_nodes),
              tuple(led(r, p.leader_id) for r in p.isr_nodes), p.eligible_leader_replicas,
              p.last_known_elr, p.offline_replicas) for p in t.partitions])
           for t in resp.topics]
    nxt = resp.next_cursor
    return out, None if nxt is None else (nxt.topic_name, nxt.partition_index)


def test_describe_topic_partitions_paging_and_errors(pair: tuple[Broker, Broker]) -> None:
    """The same answers from both brokers: whole topics, pages cut inside a topic and at
    a topic's end (NextCursor), a cursor into a topic, past its last partition, limits of
    0 and below (Kafka serves at least one partition), unknown and illegal names, the
    cursor's own errors (INVALID_REQUEST for every topic), all topics from a cursor."""
    a, b_, c = "dtpq-a", "dtpq-b", "dtpq-c"
    for b in pair:
        create_topic(b, a, 3)
        create_topic(b, b_, 1)
        create_topic(b, c, 5)
    cases: list[tuple[list[str], int, tuple[str, int] | None]] = [
        ([a, b_, c], 2000, None),
        ([a, b_, c], 4, None),            # page ends with b: the cursor is c:0
        ([a, b_, c], 3, None),            # page ends exactly with a
        ([a, b_, c], 2, (a, 2)),
        ([a, b_, c], 2, (c, 4)),
        ([a, b_, c], 2, (c, 9)),          # past the last partition: no partitions
        ([a, b_], 2, ("dtpq-x", 0)),      # cursor topic not requested: INVALID_REQUEST
        ([a, b_], 2, (a, -1)),            # malformed cursor: INVALID_REQUEST
        ([c, a], 0, None),                # a limit below 1 serves 1
        ([c, a], -5, None),
        ([], 3, (b_, 0)),                 # all topics from b on
        ([], 3, ("dtpq-aa", 0)),          # a cursor topic that does not exist
        ([], 3, (a, -1)),                 # malformed cursor, no topics: empty answer
        (["dtpq-nope", b_, "bad/name", a], 2000, None),
        (["dtpq-nope", b_, "bad/name", a], 1, None),
        (["zzz-dtpq", b_], 1, None),      # the next page starts at an unknown topic
        ([b_, b_], 2000, None),
        ([""], 2000, None),
    ]
    for topics, limit, cursor in cases:
        k, h = on_pair(pair, lambda b, t=topics, lim=limit, cur=cursor: dtp(b, t, lim, cur))
        if not topics:  # all topics: other tests' topics sort after ours, cut them off
            k, h = ([e for e in k[0] if e[0].startswith("dtpq-")], k[1]), (
                [e for e in h[0] if e[0].startswith("dtpq-")], h[1])
        assert k == h, f"{topics} {limit} {cursor}\nkafka: {k}\nheadwater: {h}"
    # the cursor walk: pages of 2 partitions through 9 partitions
    for b in pair:
        seen, cursor = [], None
        while True:
            topics, cursor = dtp(b, [a, b_, c], 2, cursor)
            seen += [(t[0], p[0]) for t in topics for p in t[5]]
            if cursor is None:
                break
        assert seen == [(a, 0), (a, 1), (a, 2), (b_, 0)] + [(c, i) for i in range(5)]


def _describe_out(text: str, b: Broker) -> str:
    text = leaders(re.sub(r"TopicId: \S+", "TopicId: ID", text), b)
    # Kafka's storage format writes a cluster-level min.insync.replicas (docs/differences.md)
    return text.replace("Configs: min.insync.replicas=1", "Configs: ")


def test_kafka_topics_describe_uses_describe_topic_partitions(
        pair: tuple[Broker, Broker], topic_name: str) -> None:
    """kafka-topics --describe (Kafka 4.4's admin client describes topics with
    DescribeTopicPartitions once the broker advertises it: Elr / LastKnownElr columns),
    one page of 2 partitions at a time (--partition-size-limit-per-response) over a
    topic of 5 partitions and one of 1; an unknown topic fails the same way."""
    for b in pair:
        create_topic(b, f"{topic_name}-p5", 5)
        create_topic(b, f"{topic_name}-p1", 1)
    k, h = both(pair, "kafka-topics", "--describe", "--topic", f"{topic_name}-.*",
                "--partition-size-limit-per-response", "2")
    assert k[0] == h[0] == 0, (k, h)
    assert _describe_out(k[1], pair[0]) == _describe_out(h[1], pair[1]), \
        f"\nkafka: {k}\nheadwater: {h}"
    assert h[1].count("\tElr: ") == 6 and "Partition: 4" in h[1], h[1]
    k, h = both(pair, "kafka-topics", "--describe", "--topic", f"{topic_name}-p5")
    assert _describe_out(k[1], pair[0]) == _describe_out(h[1], pair[1]), \
        f"\nkafka: {k}\nheadwater: {h}"
    code, out = same(pair, "kafka-topics", "--describe", "--topic", f"{topic_name}-nope")
    assert code == 1 and "does not exist" in out, out


# --- ListOffsets v11, Fetch v18 ----------------------------------------------------


def _versions(out: str, *apis: str) -> dict[str, str]:
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\w+)\((\d+)\): (.*?),?$", line)
        if m and m.group(1) in apis:
            found[m.group(1)] = m.group(3)
    return found


def test_api_versions_of_kafka_44(pair: tuple[Broker, Broker]) -> None:
    """kafka-broker-api-versions: the APIs this work added are advertised with the
    versions Kafka 4.4 advertises (and its tools use them: usable = the maximum)."""
    k, h = both(pair, "kafka-broker-api-versions")
    apis = ("Fetch", "ListOffsets", "DescribeTopicPartitions", "UpdateFeatures",
            "DescribeLogDirs", "ApiVersions", "DeleteGroups", "AddRaftVoter",
            "RemoveRaftVoter", "UnregisterController", "StreamsGroupHeartbeat",
            "StreamsGroupDescribe")
    assert _versions(k[1], *apis) == _versions(h[1], *apis), f"\nkafka: {k}\nheadwater: {h}"
    assert _versions(h[1], *apis) == {
        "Fetch": "4 to 18 [usable: 18]", "ListOffsets": "1 to 11 [usable: 11]",
        "DescribeTopicPartitions": "0 [usable: 0]", "UpdateFeatures": "0 to 2 [usable: 2]",
        "DescribeLogDirs": "1 to 5 [usable: 5]", "ApiVersions": "0 to 5 [usable: 5]",
        "DeleteGroups": "0 to 3 [usable: 3]", "AddRaftVoter": "0 to 1 [usable: 1]",
        "RemoveRaftVoter": "0 [usable: 0]", "UnregisterController": "0 [usable: 0]",
        "StreamsGroupHeartbeat": "0 to 1 [usable: 1]",
        "StreamsGroupDescribe": "0 to 1 [usable: 1]"}, h[1]
    # DescribeLogDirs v5 (KIP-1066): the log dir is not cordoned on either
    k, h = on_pair(pair, lambda b: [(int(r.error_code), r.is_cordoned) for r in request(
        b, 35, 5, {"topics": []}).results])
    assert k == h == [(0, False)], (k, h)


def test_list_offsets_v11_earliest_pending_upload(pair: tuple[Broker, Broker],
                                                  topic_name: str) -> None:
    """kafka-get-offsets --time -6 (earliest-pending-upload, KIP-1023) needs ListOffsets
    v11: without tiered storage both brokers answer no offset; the special times below
    their version get UNSUPPORTED_VERSION for the partition, as Kafka's ReplicaManager."""
    first = int(time.time() * 1000) - 60_000
    for b in pair:  # one timestamp per record: the max-timestamp offset is the same on both
        create_topic(b, topic_name, 2)
        produce(b, topic_name, 10, partitions=2, first_timestamp=first)
    for t in ("-6", "earliest-pending-upload", "-5", "-4", "-1"):
        code, out = same(pair, "kafka-get-offsets", "--topic", topic_name, "--time", t)
        assert code == 0, out
    assert same(pair, "kafka-get-offsets", "--topic", topic_name, "--time", "-1")[1] == (
        f"{topic_name}:0:5\n{topic_name}:1:5\n")

    def ask(b: Broker, version: int, ts: int) -> tuple:
        body = {"replica_id": -1, "isolation_level": 0, "timeout": 1000, "topics": [{
            "name": topic_name, "partitions": [{"partition_index": 0,
                                                "current_leader_epoch": -1,
                                                "timestamp": ts}]}]}
        p = request(b, 2, version, body).topics[0].partitions[0]
        # a record's timestamp (max-timestamp) differs by nature
        return int(p.error_code), "T" if p.timestamp > 0 else p.timestamp, p.offset, \
            p.leader_epoch
    for version in (6, 7, 8, 9, 10, 11):
        for ts in (-1, -2, -3, -4, -5, -6, -7):
            k, h = on_pair(pair, lambda b, v=version, t=ts: ask(b, v, t))
            assert k == h, f"v{version} {ts}: kafka {k} headwater {h}"
    assert ask(pair[1], 11, -6) == (0, -1, -1, -1)
    assert ask(pair[1], 10, -6)[0] == 35  # UNSUPPORTED_VERSION


def test_fetch_v18_java_consumer_and_raw(pair: tuple[Broker, Broker],
                                         topic_name: str) -> None:
    """Fetch v18 (KIP-1166): the Java consumer of 4.4 fetches with v18 from both brokers
    (the usable version above); a v18 fetch carrying a follower's high watermark (the new
    tagged field) is answered as by Kafka (headwater has no followers: ignored)."""
    for b in pair:
        create_topic(b, topic_name, 1)
        produce(b, topic_name, 5)
    code, out = same(pair, "kafka-console-consumer", "--topic", topic_name,
                     "--from-beginning", "--max-messages", "5", "--timeout-ms", "30000")
    assert code == 0 and out.split() == ["0", "1", "2", "3", "4"], out

    def fetch(b: Broker) -> tuple:
        meta = request(b, 3, 12, {"topics": [{"name": topic_name, "topic_id": None}],
                                  "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False})
        topic_id = meta.topics[0].topic_id
        resp = request(b, 1, 18, {
            "replica_id": -1, "replica_state": {"replica_id": -1, "replica_epoch": -1},
            "max_wait": 100, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{
                "topic_id": topic_id, "partitions": [{
                    "partition": 0, "current_leader_epoch": -1, "fetch_offset": 2,
                    "last_fetched_epoch": -1, "log_start_offset": -1,
                    "partition_max_bytes": 1 << 20, "replica_directory_id": None,
                    "high_watermark": 5}]}],
            "forgotten_topics_data": (), "rack_id": ""})
        p = resp.responses[0].partitions[0]
        return (int(resp.error_code), int(p.error_code), p.high_watermark,
                p.last_stable_offset, p.log_start_offset, len(p.records or b"") > 0)
    k, h = on_pair(pair, fetch)
    assert k == h == (0, 0, 5, 5, 0, True), f"kafka {k} headwater {h}"


# --- UpdateFeatures (57), kafka-features -------------------------------------------


def _feature_lines(out: str, *names: str) -> dict[str, str]:
    """kafka-features describe's line of each feature in `names`, without its epoch (the
    offset of the metadata image: differs by nature)."""
    found = {}
    for line in out.splitlines():
        m = re.match(r"Feature: (\S+)\s+(.*?)\s+Epoch: \d+$", line)
        if m and m.group(1) in names:
            found[m.group(1)] = re.sub(r"\s+", " ", m.group(2))
    return found


def test_kafka_features_upgrade_downgrade_side_by_side(pair: tuple[Broker, Broker]) -> None:
    """kafka-features upgrade / downgrade / disable, dry runs and refusals (unknown
    feature, a level out of range, a downgrade asked as an upgrade, a negative level), then
    a real downgrade of share.version to 1 and the upgrade back: the same output and
    exit status from Kafka 4.4 and headwater, and describe shows the same levels."""
    features = ("share.version", "group.version")
    k, h = both(pair, "kafka-features", "describe")
    assert _feature_lines(k[1], *features) == _feature_lines(h[1], *features), (k, h)
    assert _feature_lines(h[1], "share.version") == {"share.version": (
        "SupportedMinVersion: 0 SupportedMaxVersion: 2 FinalizedVersionLevel: 2")}, h[1]
    for args, code in [
        (("upgrade", "--feature", "share.version=2", "--dry-run"), 0),
        (("downgrade", "--feature", "share.version=1", "--dry-run"), 0),
        (("disable", "--feature", "group.version", "--dry-run"), 0),
        (("upgrade", "--feature", "share.version=1", "--dry-run"), 1),
        (("upgrade", "--feature", "foo.version=1", "--dry-run"), 1),
        (("upgrade", "--feature", "share.version=5", "--dry-run"), 1),
        (("downgrade", "--feature", "share.version=3", "--dry-run"), 1),
        (("upgrade", "--feature", "share.version=-1", "--dry-run"), 1),
        (("upgrade", "--feature", "group.version=1", "--feature", "share.version=9",
          "--dry-run"), 1),
        (("upgrade", "--feature", "group.version=5", "--feature", "foo.version=1",
          "--feature", "share.version=7", "--dry-run"), 1),
    ]:
        got, out = same(pair, "kafka-features", *args)
        assert got == code, (args, out)
    try:
        code, out = same(pair, "kafka-features", "downgrade", "--feature", "share.version=1")
        assert code == 0 and out == "share.version was downgraded to 1.\n", out
        k, h = both(pair, "kafka-features", "describe")
        assert _feature_lines(k[1], *features) == _feature_lines(h[1], *features), (k, h)
        assert "FinalizedVersionLevel: 1" in _feature_lines(h[1], "share.version")[
            "share.version"]
    finally:
        code, out = same(pair, "kafka-features", "upgrade", "--feature", "share.version=2")
    assert code == 0 and out == "share.version was upgraded to 2.\n", out
    k, h = both(pair, "kafka-features", "describe")
    assert _feature_lines(k[1], *features) == _feature_lines(h[1], *features), (k, h)


def update_features(b: Broker, version: int, updates: list[tuple],
                    validate_only: bool = True) -> tuple:
    """UpdateFeatures `version`: (feature, level[, upgrade type or v0 allow_downgrade])."""
    keys = []
    for u in updates:
        key = {"feature": u[0], "max_version_level": u[1]}
        if version == 0:
            key["allow_downgrade"] = u[2] if len(u) > 2 else False
        else:
            key["upgrade_type"] = u[2] if len(u) > 2 else 1
        keys.append(key)
    resp = request(b, 57, version, {"timeout": 60000, "feature_updates": keys,
                                    "validate_only": validate_only})
    return (int(resp.error_code), resp.error_message,
            [(r.feature, int(r.error_code), r.error_message)
             for r in getattr(resp, "results", ())])


def test_update_features_wire_errors(pair: tuple[Broker, Broker]) -> None:
    """Raw UpdateFeatures v0-v2, validate-only: Kafka's codes and messages for a negative
    level, an unknown upgrade type, an unknown feature (at level 1 and at 0), a level out
    of range, a downgrade without the downgrade type, an upgrade with it, kraft.version,
    several features at once (the first error in Kafka's map order fails them all), a
    feature named twice, none; v0/v1's per-feature results."""
    cases: list[tuple[int, list[tuple]]] = [
        (2, [("share.version", -1, 1)]),
        (2, [("share.version", -1, 2)]),
        (2, [("share.version", 1, 7)]),
        (2, [("share.version", 1, 0)]),
        (2, [("foo.version", 1, 1)]),
        (2, [("foo.version", 0, 1)]),
        (2, [("", 1)]),
        (2, [("share.version", 5, 1)]),
        (2, [("share.version", 1, 1)]),
        (2, [("share.version", 1, 2)]),
        (2, [("share.version", 1, 3)]),
        (2, [("share.version", 2, 2)]),
        (2, [("group.version", 0, 1)]),
        (2, [("group.version", 0, 2)]),
        (2, [("kraft.version", 0, 1)]),
        (2, [("a.version", 1), ("b.version", 1), ("group.version", 5),
             ("share.version", 7), ("zz", 1)]),
        (2, [("share.version", 1, 2), ("share.version", 2, 1)]),
        (2, []),
        (1, [("share.version", 1, 2), ("group.version", 1)]),
        (1, [("share.version", 1, 1), ("group.version", 1)]),
        (1, []),
        (0, [("share.version", 1, True)]),
        (0, [("share.version", 2, False)]),
    ]
    for version, updates in cases:
        k, h = on_pair(pair, lambda b, v=version, u=updates: update_features(b, v, u))
        assert k == h, f"v{version} {updates}\nkafka: {k}\nheadwater: {h}"
    k = update_features(pair[1], 2, [("share.version", -1, 1)])
    assert k[0] == 95 and "A feature version cannot be less than 0." in k[1]


def test_metadata_version_rules_on_headwater(broker_factory: Any) -> None:
    """metadata.version as Kafka's FeatureControlManager rules it, on headwater's range
    (3.3-IV3 to 4.2-IV1; Kafka 4.4 finalizes 4.4-IV2, from which no downgrade is safe, so
    the real downgrade is shown here alone): 4.2-IV1 -> 4.0-IV3 ... 4.0-IV1 are safe (no
    metadata change in between), 4.0-IV0 crosses 4.0-IV1's change and is refused, an
    unsafe one too; above the range is refused; the real downgrade and the feature levels
    are records in the metadata log and survive a restart."""
    b = broker_factory()
    assert update_features(b, 2, [("metadata.version", 22, 2)]) == (
        95, "The update failed for all features since the following feature had an error: "
            "Unsupported metadata.version downgrade from 29 to 22. Refusing to perform the "
            "requested downgrade because it might delete metadata information.", [])
    assert update_features(b, 2, [("metadata.version", 22, 3)])[1].endswith(
        "Unsafe metadata downgrade is not supported in this version.")
    # The controller that answers names itself: node 1 alone, any of three on a cluster.
    assert re.search(r"Invalid update version 33 for feature metadata\.version\. Local "
                     r"controller [123] only supports versions 7-29$",
                     update_features(b, 2, [("metadata.version", 33, 1)])[1])
    assert update_features(b, 2, [("metadata.version", 23, 2)]) == (0, None, [])
    code, out = run_tool_out(b, "downgrade", "--metadata", "4.0-IV3")
    assert code == 0 and "metadata.version was downgraded to 25." in out, out
    code, out = run_tool_out(b, "downgrade", "--feature", "group.version=0")
    assert code == 0 and "group.version was downgraded to 0." in out, out
    code, out = run_tool_out(b, "downgrade", "--feature", "share.version=1")
    assert code == 0, out
    expected = {"metadata.version": "SupportedMinVersion: 3.3-IV3 SupportedMaxVersion: "
                                    "4.2-IV1 FinalizedVersionLevel: 4.0-IV3",
                "group.version": "SupportedMinVersion: 0 SupportedMaxVersion: 1 "
                                 "FinalizedVersionLevel: 0",
                "share.version": "SupportedMinVersion: 0 SupportedMaxVersion: 2 "
                                 "FinalizedVersionLevel: 1"}
    names = tuple(expected)
    assert _feature_lines(run_tool_out(b, "describe")[1], *names) == expected
    b.restart()
    assert _feature_lines(run_tool_out(b, "describe")[1], *names) == expected
    code, out = run_tool_out(b, "upgrade", "--metadata", "4.2-IV1", "--feature",
                             "group.version=1", "--feature", "share.version=2")
    assert code == 0, out
    b.restart()
    out = run_tool_out(b, "describe")[1]
    assert "FinalizedVersionLevel: 4.2-IV1" in out and _feature_lines(
        out, "group.version", "share.version") == {
        "group.version": "SupportedMinVersion: 0 SupportedMaxVersion: 1 "
                         "FinalizedVersionLevel: 1",
        "share.version": "SupportedMinVersion: 0 SupportedMaxVersion: 2 "
                         "FinalizedVersionLevel: 2"}, out


def run_tool_out(b: Broker, *args: str) -> tuple[int, str]:
    from tests.support.kafka_reference import run_tool
    proc = run_tool("kafka-features", "--bootstrap-server", b.bootstrap, *args, check=False)
    return proc.returncode, proc.stdout + proc.stderr


GATED_REQUESTS = {
    (76, 1): {"group_id": "gated", "member_id": "m" * 22, "member_epoch": 0,
              "rack_id": None, "subscribed_topic_names": ["t"]},
    (77, 1): {"group_ids": ["gated", "other"], "include_authorized_operations": False},
    (78, 1): {"group_id": "gated", "member_id": "m", "share_session_epoch": 0,
              "max_wait": 100, "min_bytes": 1, "max_bytes": 1000, "max_records": 10,
              "batch_size": 10, "topics": [], "forgotten_topics_data": []},
    (79, 1): {"group_id": "gated", "member_id": "m", "share_session_epoch": 1,
              "topics": []},
    (90, 1): {"groups": [{"group_id": "gated", "topics": None}]},
    (91, 0): {"group_id": "gated", "topics": [{"topic_name": "t", "partitions": [
        {"partition_index": 0, "start_offset": 0}]}]},
    (92, 0): {"group_id": "gated", "topics": [{"topic_name": "t"}]},
    (68, 1): {"group_id": "gated", "member_id": "m" * 22, "member_epoch": 0,
              "instance_id": None, "rack_id": None, "rebalance_timeout": 30000,
              "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
              "server_assignor": None, "topic_partitions": []},
    (69, 1): {"group_ids": ["gated", "other"], "include_authorized_operations": False},
}


def test_disabled_share_and_group_versions_refuse_their_apis(
        pair: tuple[Broker, Broker]) -> None:
    """share.version 0 (kafka-features disable): the share-group APIs (ShareGroupHeartbeat,
    ShareGroupDescribe, ShareFetch, ShareAcknowledge, Describe/Alter/DeleteShareGroupOffsets)
    answer UNSUPPORTED_VERSION, as Kafka 4.4's KafkaApis; group.version 0 likewise
    ConsumerGroupHeartbeat / ConsumerGroupDescribe (KIP-848). They stay advertised. Both
    brokers give the same answers; the levels are restored after."""
    try:
        for feature in ("share.version", "group.version"):
            code, out = same(pair, "kafka-features", "disable", "--feature", feature)
            assert code == 0 and out == f"{feature} was disabled.\n", out
        for (key, version), body in GATED_REQUESTS.items():
            k, h = on_pair(pair, lambda b, a=key, v=version, d=body: request(b, a, v, d))
            assert k == h, f"{key} v{version}\nkafka: {k}\nheadwater: {h}"
            assert "unsupported_version" in repr(h), h
        k, h = both(pair, "kafka-broker-api-versions")
        assert _versions(h[1], "ShareFetch", "ConsumerGroupHeartbeat") == {
            "ShareFetch": "1 to 2 [usable: 2]", "ConsumerGroupHeartbeat": "0 to 1 [usable: 1]"}
    finally:
        code, out = same(pair, "kafka-features", "upgrade", "--feature", "share.version=2",
                         "--feature", "group.version=1")
    assert code == 0, out


def test_api_versions_v5_and_delete_groups_v3(pair: tuple[Broker, Broker]) -> None:
    """ApiVersions v5 (KIP-1242, every 4.4 Java client's first request): the cluster id
    and node id the client expects, both or neither (else INVALID_REQUEST), and this
    broker's (else REBOOTSTRAP_REQUIRED); the v3+ software name / version checks.
    DeleteGroups v3: per-group error messages, null for these errors on both."""
    def cluster_id(b: Broker) -> str:
        return request(b, 60, 0, {"include_cluster_authorized_operations": False}).cluster_id

    def api_versions(b: Broker, version: int, name: str = "java", software: str = "4.4.0",
                     expect: tuple[str | None, int] | None = None,
                     own: bool = False) -> tuple:
        body: dict = {"client_software_name": name, "client_software_version": software}
        if version >= 5:
            cid, node = (cluster_id(b), 1) if own else (expect or (None, -1))
            body.update(cluster_id=cid, node_id=node)
        resp = request(b, 18, version, body)
        return int(resp.error_code), [(k.min_version, k.max_version) for k in resp.api_keys
                                      if k.api_key == 18]
    cases: list[tuple[int, dict]] = [
        (5, {}), (5, {"own": True}), (5, {"expect": ("other-cluster", 1)}),
        (5, {"expect": (None, 1)}), (5, {"name": "bad name!"}), (4, {"name": "bad name!"}),
        (4, {"software": ""}), (3, {"software": "-x"}), (4, {}),
    ]
    for version, kw in cases:
        k, h = on_pair(pair, lambda b, v=version, a=kw: api_versions(b, v, **a))
        assert k == h, f"v{version} {kw}\nkafka: {k}\nheadwater: {h}"
    for b in pair:
        wrong_node = request(b, 18, 5, {"client_software_name": "java",
                                        "client_software_version": "4.4.0",
                                        "cluster_id": cluster_id(b), "node_id": 2})
        wrong_cluster_only = request(b, 18, 5, {"client_software_name": "java",
                                                "client_software_version": "4.4.0",
                                                "cluster_id": cluster_id(b), "node_id": -1})
        assert (int(wrong_node.error_code), int(wrong_cluster_only.error_code)) == (129, 42)
    assert api_versions(pair[1], 5, own=True) == (0, [(0, 5)])

    def delete_groups(b: Broker) -> set:
        deadline = time.monotonic() + 60
        # a fresh Kafka creates __consumer_offsets at the first FindCoordinator
        request(b, 10, 4, {"key_type": 0, "coordinator_keys": ["dg-missing"]})
        while True:
            resp = request(b, 42, 3, {"groups_names": ["dg-missing", ""]})
            got = {(r.group_id, int(r.error_code), r.error_message) for r in resp.results}
            if not {code for _g, code, _m in got} & {14, 15, 16} or \
                    time.monotonic() > deadline:
                return got
            time.sleep(0.2)
    k, h = on_pair(pair, delete_groups)
    assert k == h == {("dg-missing", 69, None), ("", 69, None)}, (k, h)


def test_raft_voter_changes_refused_as_a_static_quorum(pair: tuple[Broker, Broker]) -> None:
    """kafka-metadata-quorum remove-controller (RemoveRaftVoter) and AddRaftVoter: a
    single node with kraft.version 0, like the reference (a static controller.quorum.voters
    quorum): the same errors, in Kafka's order (cluster id, a valid voter, an endpoint,
    then UNSUPPORTED_VERSION: the voter set cannot change)."""
    import uuid

    directory = uuid.UUID("e5873efa-687f-4e74-81e2-bcdd95cbca82")
    endpoint = [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 9999}]

    def cluster_id(b: Broker) -> str:
        return request(b, 60, 0, {"include_cluster_authorized_operations": False}).cluster_id

    def change(b: Broker, key: int, version: int, own: bool = True, cid: str | None = None,
               **body: Any) -> tuple:
        body = {"cluster_id": cluster_id(b) if own else cid, "voter_id": 2,
                "voter_directory_id": directory, **body}
        if key == 80:
            body.setdefault("listeners", endpoint)
            body.update(timeout=30000, ack_when_committed=True)
        resp = request(b, key, version, body)
        return int(resp.error_code), resp.error_message
    cases: list[tuple[int, int, dict]] = [
        (81, 0, {}), (81, 0, {"own": False}), (81, 0, {"voter_directory_id": None}),
        (81, 0, {"voter_id": -1}), (80, 1, {}), (80, 0, {}), (80, 1, {"own": False}),
        (80, 1, {"voter_directory_id": None}), (80, 1, {"voter_id": -3}),
    ]
    for key, version, kw in cases:
        k, h = on_pair(pair, lambda b, a=key, v=version, x=kw: change(b, a, v, **x))
        assert k == h, f"{key} v{version} {kw}\nkafka: {k}\nheadwater: {h}"
    for b in pair:  # the cluster id in the message is each broker's own
        assert change(b, 81, 0, own=False, cid="other") == (
            104, f'The given id "other" doesn\'t match the cluster id "{cluster_id(b)}"')
    assert change(pair[1], 80, 1, listeners=[])[0] == 42
    assert change(pair[1], 81, 0) == (
        35, "Cluster doesn't support removing voter because the kraft.version feature is 0")
    for directory_id in ("5Yc-vmh_TnSB4rzdlcvK8g", "AAAAAAAAAAAAAAAAAAAAAA"):
        k, h = both(pair, "kafka-metadata-quorum", "remove-controller", "--controller-id",
                    "1", "--controller-directory-id", directory_id)
        first = [next((line for line in out[2].splitlines() if "Exception:" in line), "")
                 for out in (k, h)]
        assert k[0] == h[0] == 1 and first[0] == first[1] != "", (k, h)


def test_kafka_cluster_unregister_controller(pair: tuple[Broker, Broker]) -> None:
    """kafka-cluster unregister-controller (UnregisterController, new in Kafka 4.4): an
    unknown id is CONTROLLER_ID_NOT_REGISTERED, the active controller itself
    INVALID_REQUEST, with Kafka's messages; `kafka-cluster api-versions` lists it."""
    for controller_id, error in (("5", "ControllerIdNotRegisteredException: Controller ID 5 "
                                       "is not currently registered."),
                                 ("{C}", "InvalidRequestException: Controller cannot "
                                         "unregister itself while it is active.")):
        # {C}: each one's active controller (1 on Kafka's reference and on one node)
        k, h = [(p.returncode, normalize(p.stdout, b), normalize(p.stderr, b))
                for b in pair for p in [tool(
                    b, "kafka-cluster", "unregister-controller", "--bootstrap-server", "{B}",
                    "--id", controller_id.replace("{C}", str(controller_of(b))),
                    bootstrap="")]]
        first = [next((line for line in out[2].splitlines() if "Exception:" in line), "")
                 for out in (k, h)]
        assert k[0] == h[0] == 1 and first[0] == first[1] and error in first[1], (k, h)
    k, h = both(pair, "kafka-cluster", "api-versions", "--bootstrap-server", "{B}",
                bootstrap="")
    assert k[0] == h[0] == 0, (k, h)
    assert _versions(h[1], "UnregisterController") == _versions(
        k[1], "UnregisterController") == {"UnregisterController": "0 [usable: 0]"}


# --- StreamsGroupHeartbeat (88) / StreamsGroupDescribe (89) v0-1 ---------------------

COORDINATOR_BUSY = {14, 15, 16}  # loading, not available, not the coordinator
GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID = 69, 25
NOT_REQUESTED, NOT_STORED = 0, 1


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000)


def _coordinated(b: Broker, group: str, api_key: int, version: int, body: dict) -> Any:
    """The answer once the group's coordinator is ready (a fresh Kafka creates
    __consumer_offsets at the first FindCoordinator and loads it)."""
    deadline = time.monotonic() + 60
    request(b, 10, 4, {"key_type": 0, "coordinator_keys": [group]})
    while True:
        resp = request(b, api_key, version, body)
        code = int(resp.error_code if api_key == 88 else resp.groups[0].error_code)
        if code not in COORDINATOR_BUSY or time.monotonic() > deadline:
            return resp
        time.sleep(0.2)


def streams_heartbeat(b: Broker, version: int, group: str, member: str, epoch: int,
                      topic: str | None = None, process: str | None = None) -> Any:
    """A StreamsGroupHeartbeat: joining (epoch 0) with a topology of one subtopology
    reading `topic`, else only the member's epoch (the rest unchanged: null)."""
    body: dict[str, Any] = {"group_id": group, "member_id": member, "member_epoch": epoch,
                            "endpoint_information_epoch": 0}
    if epoch == 0:
        body.update(
            rebalance_timeout=30000, process_id=process, client_tags=[],
            active_tasks=[], standby_tasks=[], warmup_tasks=[],
            topology={"epoch": 0, "subtopologies": [{
                "subtopology_id": "0", "source_topics": [topic], "source_topic_regex": [],
                "state_changelog_topics": [], "repartition_sink_topics": [],
                "repartition_source_topics": [], "copartition_groups": []}]})
    return _coordinated(b, group, 88, version, body)


def heartbeat_view(resp: Any, version: int) -> dict[str, Any]:
    """What two brokers must answer alike (the member id is the client's own)."""
    view = {"error": int(resp.error_code), "epoch": resp.member_epoch,
            "heartbeat_interval": _ms(resp.heartbeat_interval),
            "task_offset_interval": _ms(resp.task_offset_interval),
            "acceptable_recovery_lag": resp.acceptable_recovery_lag,
            "status": None if resp.status is None else sorted(
                int(s.status_code) for s in resp.status),
            "active": None if resp.active_tasks is None else sorted(
                (t.subtopology_id, tuple(t.partitions)) for t in resp.active_tasks),
            "endpoint_information_epoch": resp.endpoint_information_epoch}
    if version >= 1:
        view["topology_description_required"] = resp.topology_description_required
    else:
        assert not hasattr(resp, "topology_description_required")
    return view


def streams_describe(b: Broker, version: int, groups: list[str],
                     include_description: bool = False) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"group_ids": groups, "include_authorized_operations": False}
    if version >= 1:
        body["include_topology_description"] = include_description
    resp = _coordinated(b, groups[0], 89, version, body)
    out = []
    for g in resp.groups:
        topology = None if g.topology is None else (g.topology.epoch, [
            (s.subtopology_id, tuple(s.source_topics)) for s in g.topology.subtopologies or ()])
        view = {"group_id": g.group_id, "error": int(g.error_code), "state": g.group_state,
                "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
                "topology": topology, "members": [m.member_epoch for m in g.members]}
        if version >= 1:
            view.update(assignor_name=g.assignor_name,
                        topology_description_status=g.topology_description_status,
                        topology_description=g.topology_description)
        else:
            assert not hasattr(g, "assignor_name")
        out.append(view)
    return out


MISSING_SOURCE_TOPICS = 1  # a StreamsGroupHeartbeat status code


def source_topic_seen(b: Broker, topic: str, timeout: float = 30.0) -> None:
    """Until a probe group's join no longer says MISSING_SOURCE_TOPICS: Kafka's group
    coordinator learns of a topic from the metadata image a moment after CreateTopics
    answers (a join right after it, in one CI run, got status [1, 5] and NotReady)."""
    deadline = time.monotonic() + timeout
    while True:
        group, member = f"{topic}-probe", str(uuid.uuid4())  # named alike on both
        joined = streams_heartbeat(b, 0, group, member, 0, topic, str(uuid.uuid4()))
        streams_heartbeat(b, 0, group, member, -1)
        codes = {int(st.status_code) for st in joined.status or ()}
        if MISSING_SOURCE_TOPICS not in codes:
            return
        assert time.monotonic() < deadline, f"{topic}: the coordinator never saw it"
        time.sleep(0.2)


def streams_round_trip(b: Broker, version: int, topic: str) -> dict[str, Any]:
    """Join a new streams group, describe it (with and without the topology
    description at v1) beside an unknown group, heartbeat as an unknown member, leave."""
    group = f"{topic}-v{version}"
    member, other = str(uuid.uuid4()), str(uuid.uuid4())
    joined = streams_heartbeat(b, version, group, member, 0, topic, str(uuid.uuid4()))
    assert joined.member_id == member
    out: dict[str, Any] = {"join": heartbeat_view(joined, version)}
    missing = f"{group}-missing"  # asked alone: on a cluster its coordinator may differ
    out["describe"] = [*streams_describe(b, version, [group]),
                       *streams_describe(b, version, [missing])]
    if version >= 1:
        out["describe_with_description"] = [
            *streams_describe(b, version, [group], include_description=True),
            *streams_describe(b, version, [missing], include_description=True)]
    out["unknown_member"] = heartbeat_view(
        streams_heartbeat(b, version, group, other, 1), version)
    left = streams_heartbeat(b, version, group, member, -1)
    assert left.member_id == member
    out["leave"] = heartbeat_view(left, version)
    return out


@pytest.mark.timeout(180)
def test_streams_group_apis_v0_v1_raw(pair: tuple[Broker, Broker], topic_name: str) -> None:
    """Raw StreamsGroupHeartbeat and StreamsGroupDescribe at v0 and v1: a member joins a
    new group with one subtopology reading a topic (error 0, epoch 1, the lag as the
    v1 int64 field and 0 in v0's legacy int32 field, no topology description wanted),
    describe v1 names the sticky assignor and answers NOT_STORED when the description is
    asked for, NOT_REQUESTED otherwise, an unknown group GROUP_ID_NOT_FOUND (no assignor),
    an unknown member UNKNOWN_MEMBER_ID with the error's defaults; the member leaves.
    Kafka 4.4 answers the same (its v1 answers decode with headwater's v1 schemas)."""
    for b in pair:
        create_topic(b, topic_name, 2)
        source_topic_seen(b, topic_name)
    for version in (0, 1):
        k, h = on_pair(pair, lambda b, v=version: streams_round_trip(b, v, topic_name))
        assert k == h, f"v{version}\nkafka: {k}\nheadwater: {h}"
        join, (described, missing) = h["join"], h["describe"]
        assert join["error"] == 0 and join["epoch"] == 1, h
        assert join["acceptable_recovery_lag"] == (10000 if version else 0), h
        assert join["task_offset_interval"] == 60000, h
        assert described["error"] == 0 and described["members"] == [1], h
        assert described["topology"] == (0, [("0", (topic_name,))]), h
        assert missing["error"] == GROUP_ID_NOT_FOUND, h
        unknown = h["unknown_member"]
        assert unknown["error"] == UNKNOWN_MEMBER_ID, h
        assert (unknown["task_offset_interval"], unknown["acceptable_recovery_lag"]) == (
            0, -1 if version else 0), h
        assert h["leave"]["error"] == 0 and h["leave"]["epoch"] == -1, h
        if version:
            assert join["topology_description_required"] is False, h
            assert (described["assignor_name"], described["topology_description_status"],
                    described["topology_description"]) == ("sticky", NOT_REQUESTED, None), h
            asked, missing_asked = h["describe_with_description"]
            assert (asked["assignor_name"], asked["topology_description_status"],
                    asked["topology_description"]) == ("sticky", NOT_STORED, None), h
            assert (missing["assignor_name"], missing["topology_description_status"]) == (
                None, NOT_REQUESTED), h
            assert (missing_asked["error"], missing_asked["assignor_name"],
                    missing_asked["topology_description_status"]) == (
                GROUP_ID_NOT_FOUND, None, NOT_REQUESTED), h


def _coordinator(text: str, b: Broker) -> str:
    """The COORDINATOR (ID) column with any of `b`'s brokers as C: on a cluster
    (`--storage=cluster`) the group's coordinator is any of its three."""
    return re.sub(r"(127\.0\.0\.1:PORT \()(\d)\)",
                  lambda m: f"{m.group(1)}C)" if int(m.group(2)) in b.node_ids else m.group(0),
                  text)


def test_kafka_streams_groups_describes_with_v1(pair: tuple[Broker, Broker],
                                                topic_name: str) -> None:
    """kafka-streams-groups (Kafka 4.4's admin client describes with StreamsGroupDescribe
    v1, whose AssignorName is the ASSIGNOR column): a member joined by raw heartbeats (the
    same member and process ids on both brokers) and given its tasks once the initial
    rebalance delay is over; --list, --describe with --state / --members, and an unknown
    group, the same output from Kafka 4.4 and headwater."""
    for b in pair:
        create_topic(b, topic_name, 2)
    group = f"{topic_name}-app"
    member, process = str(uuid.uuid4()), str(uuid.uuid4())
    for b in pair:
        joined = streams_heartbeat(b, 1, group, member, 0, topic_name, process)
        assert (int(joined.error_code), joined.member_epoch) == (0, 1), joined

    def assigned(b: Broker) -> dict[str, Any]:
        """The member's heartbeat once the group's first assignment is there."""
        deadline = time.monotonic() + 30
        while True:
            view = heartbeat_view(streams_heartbeat(b, 1, group, member, 1), 1)
            if view["active"] or time.monotonic() > deadline:
                return view
            time.sleep(0.5)
    k, h = on_pair(pair, assigned)
    assert k == h and h["active"] == [("0", (0, 1))] and h["epoch"] == 2, (k, h)
    outputs: dict[str, Any] = {}
    for name, args in (("list", ("--list",)),
                       ("state", ("--describe", "--group", group, "--state", "--verbose")),
                       ("members", ("--describe", "--group", group, "--members", "--verbose"))):
        k, h = both(pair, "kafka-streams-groups", *args)
        k, h = [(out[0], _coordinator(out[1], b), out[2]) for out, b in zip((k, h), pair,
                                                                           strict=True)]
        if name == "list":  # in each broker's ListGroups order (Kafka's: its hash maps')
            k, h = [(out[0], sorted(out[1].splitlines()), out[2]) for out in (k, h)]
        assert (k[0], k[1]) == (h[0], h[1]) and h[0] == 0, f"{args}\nkafka: {k}\nheadwater: {h}"
        assert group in h[1], h
        outputs[name] = h[1]
    assert re.search(r"\bsticky\s+Stable\s+2\s+2\s+1\b", outputs["state"]), outputs
    assert member in outputs["members"] and process in outputs["members"], outputs
    k, h = both(pair, "kafka-streams-groups", "--describe", "--group", f"{group}-nope")
    assert k[0] == h[0] == 1 and first_error(k[2]) == first_error(h[2]) != "", (k, h)
    assert "GroupIdNotFoundException" in first_error(h[2]), h
