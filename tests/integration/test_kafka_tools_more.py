"""More of Apache Kafka 4.4.0's command-line tools, each run against the reference Kafka
(`kafka_ref`) and against headwater with the same arguments: the exit status and the
essential output must be the same, once the values that differ by nature (cluster ids,
ports, data directories, timestamps, metadata offsets) are normalized.

kafka-groups, kafka-cluster, kafka-metadata-quorum, kafka-leader-election,
kafka-reassign-partitions, kafka-client-metrics, kafka-e2e-latency,
kafka-streams-application-reset, kafka-delegation-tokens, kafka-replica-verification.
Deliberate differences are in docs/differences.md.

Each tool is a JVM start (~1-2 s of CPU); the two runs of a comparison go in parallel.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess
from tests.support.kafka_reference import (
    TOOLS,
    KafkaReference,
    run_tool,
    tool_command,
)
from tests.support.wire import RawClient

pytestmark = pytest.mark.timeout(240)

Broker = BrokerProcess | KafkaReference


@pytest.fixture(scope="module")
def pair(kafka_ref: KafkaReference, broker: BrokerProcess) -> tuple[Broker, Broker]:
    return kafka_ref, broker


def normalize(text: str, b: Broker) -> str:
    """Replace what differs by nature between two brokers."""
    text = re.sub(r"^\[\d{4}-\d\d-\d\d [^\]]*\] ", "", text, flags=re.M)  # log4j time
    text = text.replace(str(b.data_dir), "DATADIR")
    for port in b.node_ports.values():  # every broker's (one, or a cluster's)
        text = re.sub(rf"\b{port}\b", "PORT", text)
    text = re.sub(r"\b1\d{12}\b", "TIMESTAMP", text)
    text = re.sub(r"(Cluster ?I[Dd]:\s*)\S+", r"\1CLUSTER", text)
    return text


def leaders(text: str, b: Broker) -> str:
    """kafka-topics' "Leader: L<tab>Replicas: R<tab>Isr: I" with the leader, where it is
    one of `b`'s brokers, as LEADER (in the replica lists too): Kafka's reference has
    one broker, which leads everything; a cluster's partitions are led by any of its
    brokers. What stays compared is that a broker of `b` leads and the lists are its."""
    def one(m: re.Match[str]) -> str:
        leader = m.group(1)
        if int(leader) not in b.node_ids:
            return m.group(0)
        names = [",".join("LEADER" if r == leader else r for r in m.group(i).split(","))
                 for i in (2, 3)]
        return f"Leader: LEADER\tReplicas: {names[0]}\tIsr: {names[1]}"
    return re.sub(r"Leader: (\d+)\tReplicas: ([\d,]*)\tIsr: ([\d,]*)", one, text)


def tool(b: Broker, name: str, *args: str, bootstrap: str = "--bootstrap-server",
         timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """`name` against `b`; '{B}' in an argument is the bootstrap address, and
    `bootstrap` (unless empty) is prepended with it."""
    argv = [a.replace("{B}", b.bootstrap).replace("{DATADIR}", str(b.data_dir))
            for a in args]
    if bootstrap:
        argv = [bootstrap, b.bootstrap, *argv]
    return run_tool(name, *argv, timeout=timeout, check=False)


def both(pair: tuple[Broker, Broker], name: str, *args: str,
         **kw: object) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    """The tool against Kafka and headwater in parallel: (exit status, normalized stdout,
    normalized stderr) of each."""
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda b: tool(b, name, *args, **kw), pair))  # type: ignore[arg-type]
    return tuple((p.returncode, normalize(p.stdout, b), normalize(p.stderr, b))  # type: ignore[return-value]
                 for p, b in zip(runs, pair, strict=True))


def same(pair: tuple[Broker, Broker], name: str, *args: str, **kw: object) -> tuple[int, str]:
    """Assert Kafka and headwater give the same exit status and stdout; returns them."""
    k, h = both(pair, name, *args, **kw)
    assert (k[0], k[1]) == (h[0], h[1]), f"\nkafka: {k}\nheadwater: {h}"
    return k[0], k[1]


def first_error(stderr: str) -> str:
    """The first exception line a tool printed (its stack trace left out)."""
    for line in stderr.splitlines():
        line = line.removeprefix("ERROR ")  # the tool's own log line
        if re.match(r"[\w.$]+(Exception|Error)\b", line):
            return line
    return ""


def on_both(pair: tuple[Broker, Broker], fn: Callable[[Broker], object]) -> None:
    for b in pair:
        fn(b)


def create_topic(b: Broker, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    wait_for(lambda: name in admin.list_topics(timeout=10).topics, f"topic {name}")


def produce(b: Broker, topic: str, count: int, partitions: int = 1,
            first_timestamp: int | None = None) -> None:
    """`count` records round-robin over `partitions`; record i at `first_timestamp` + i
    when given (so the records' order by time is the same on every broker)."""
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, value=str(i).encode(), partition=i % partitions,
                  timestamp=0 if first_timestamp is None else first_timestamp + i)
    assert p.flush(30) == 0


def commit(b: Broker, group: str, offsets: list[TopicPartition]) -> None:
    """Commit `offsets` for `group`, retried while a fresh Kafka creates
    __consumer_offsets (NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE /
    COORDINATOR_LOAD_IN_PROGRESS meanwhile: seen in a loaded full run)."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                  "enable.auto.commit": False})

    def attempt() -> bool:
        try:
            c.commit(offsets=offsets, asynchronous=False)
            return True
        except KafkaException as exc:
            if not exc.args[0].retriable() and exc.args[0].code() not in (
                    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                    KafkaError.COORDINATOR_LOAD_IN_PROGRESS):
                raise
            return False

    try:
        wait_for(attempt, f"commit for {group}")
    finally:
        c.close()


def controller_of(b: Broker) -> int:
    """The active controller's id, as Metadata names it (1 on one node and on Kafka's
    reference; on a cluster, the holder of the controller lease)."""
    return int(AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(
        timeout=10).controller_id)


def wait_for(check: Callable[[], object], what: str, timeout: float = 30.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached in {timeout}s")


# --- kafka-groups, kafka-cluster ----------------------------------------------------


def test_tools_are_in_the_table() -> None:
    for name in ("kafka-groups", "kafka-cluster", "kafka-metadata-quorum",
                 "kafka-leader-election", "kafka-reassign-partitions", "kafka-client-metrics",
                 "kafka-e2e-latency", "kafka-streams-application-reset",
                 "kafka-delegation-tokens", "kafka-replica-verification"):
        assert name in TOOLS


def test_kafka_groups_list(pair: tuple[Broker, Broker], topic_name: str) -> None:
    group = f"g-{topic_name}"
    on_both(pair, lambda b: create_topic(b, topic_name))
    on_both(pair, lambda b: commit(b, group, [TopicPartition(topic_name, 0, 0)]))

    def ours(out: str) -> list[str]:
        return [line.split() for line in out.splitlines()[:1]] + [
            line.split() for line in out.splitlines() if line.startswith(group)]

    for args in ([], ["--consumer"], ["--protocol", "classic"], ["--share"]):
        k, h = both(pair, "kafka-groups", "--list", *args)
        assert (k[0], ours(k[1])) == (h[0], ours(h[1])), (args, k, h)
    assert ours(k[1]) == [["GROUP", "TYPE", "PROTOCOL"]]  # --share: not a share group


def test_kafka_cluster(pair: tuple[Broker, Broker]) -> None:
    status, out = same(pair, "kafka-cluster", "cluster-id", "--bootstrap-server", "{B}",
                       bootstrap="")
    assert (status, out) == (0, "Cluster ID: CLUSTER\n")
    k, h = both(pair, "kafka-cluster", "list-endpoints", "--bootstrap-server", "{B}",
                "--include-fenced-brokers", bootstrap="")
    row = r"^{}\s+127\.0\.0\.1\s+PORT\s+null\s+unfenced\s+broker\s*$"
    assert k[0] == h[0] == 0 and re.search(row.format(1), k[1], re.M), k
    # Kafka's one broker's row, then as many as headwater has brokers: what Kafka
    # prints for that many (its header, a row per broker)
    header = [line for line in k[1].splitlines() if not re.match(row.format(1), line)]
    rows = [line for line in h[1].splitlines() if line not in header]
    assert [line for line in h[1].splitlines() if line in header] == header, (k, h)
    assert len(rows) == len(pair[1].node_ids) and all(
        re.match(row.format(n), line) for n, line in zip(pair[1].node_ids, rows, strict=True)
    ), (k, h)
    # An id never registered; unregistering the live broker itself is not tried on Kafka
    # (it leaves the one-node cluster without a broker), see docs/differences.md.
    k, h = both(pair, "kafka-cluster", "unregister", "--bootstrap-server", "{B}", "--id", "5",
                bootstrap="")
    assert k[0] == h[0] == 1
    assert first_error(k[2]) == first_error(h[2]) == (
        "org.apache.kafka.common.errors.BrokerIdNotRegisteredException: "
        "Broker ID 5 is not currently registered")
    own = tool(pair[1], "kafka-cluster", "unregister", "--bootstrap-server", "{B}",
               "--id", "1", bootstrap="")
    assert own.returncode == 1
    why = "the only broker" if len(pair[1].node_ids) == 1 else "running"
    assert first_error(own.stderr).startswith(
        f"org.apache.kafka.common.errors.InvalidRequestException: Broker 1 is {why}"), own


# --- kafka-metadata-quorum, kafka-leader-election ------------------------------------


def test_kafka_metadata_quorum(pair: tuple[Broker, Broker]) -> None:
    k, h = both(pair, "kafka-metadata-quorum", "describe", "--status")
    assert k[0] == h[0] == 0, (k, h)

    def status(out: str) -> dict[str, str]:
        fields = dict(re.findall(r"^(\w+):\s+(.*)$", out, re.M))
        assert int(fields.pop("HighWatermark")) > 0
        fields.pop("LeaderEpoch")  # Kafka: 1 + elections; headwater: 0 (no Raft)
        return fields

    ks, hs = status(k[1]), status(h[1])
    # The voter's endpoint: Kafka's CONTROLLER listener, headwater's own listener. The
    # leader is the active controller, whichever broker answered (Kafka's brokers
    # forward DescribeQuorum to it): node 1 on one node, on a cluster the lease holder's.
    leader = controller_of(pair[1])
    assert re.fullmatch(r'\[\{"id": 1, "endpoints": \["CONTROLLER://127\.0\.0\.1:\d+"\]\}\]',
                        ks.pop("CurrentVoters"))
    assert hs.pop("CurrentVoters") == \
        f'[{{"id": {leader}, "endpoints": ["PLAINTEXT://127.0.0.1:PORT"]}}]'
    assert hs.pop("LeaderId") == str(leader) and ks.pop("LeaderId") == "1"
    assert ks == hs == {"ClusterId": "CLUSTER", "MaxFollowerLag": "0",
                        "MaxFollowerLagTimeMs": "0", "CurrentObservers": "[]"}

    k, h = both(pair, "kafka-metadata-quorum", "describe", "--replication")
    assert k[0] == h[0] == 0

    def rows(out: str) -> list[list[str]]:
        table = [line.split() for line in out.splitlines() if line.strip()]
        for row in table[1:]:
            assert int(row[2]) > 0
            row[2] = "LEO"
        return table

    def leading(node: int) -> list[list[str]]:
        return [["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                 "LastCaughtUpTimestamp", "Status"],
                [str(node), "AAAAAAAAAAAAAAAAAAAAAA", "LEO", "0", "TIMESTAMP", "TIMESTAMP",
                 "Leader"]]

    assert rows(k[1]) == leading(1) and rows(h[1]) == leading(leader), (k, h)


def test_kafka_leader_election(pair: tuple[Broker, Broker], topic_name: str) -> None:
    on_both(pair, lambda b: create_topic(b, topic_name, 2))
    assert same(pair, "kafka-leader-election", "--election-type", "preferred",
                "--all-topic-partitions") == (0, "")
    assert same(pair, "kafka-leader-election", "--election-type", "unclean", "--topic",
                topic_name, "--partition", "1") == (
        0, f"Valid replica already elected for partitions {topic_name}-1\n")
    status, out = same(pair, "kafka-leader-election", "--election-type", "preferred",
                       "--topic", f"{topic_name}-nope", "--partition", "0")
    assert status == 1 and "UnknownTopicOrPartitionException: No such topic as" in out


def test_elect_leaders_wire(pair: tuple[Broker, Broker], topic_name: str) -> None:
    """ElectLeaders v2 answers as Kafka's controller does for each partition."""
    on_both(pair, lambda b: create_topic(b, topic_name, 1))
    request = {"election_type": 0, "timeout": 30000, "topic_partitions": [
        {"topic": topic_name, "partitions": [0, 7]}, {"topic": "nope-x", "partitions": [0]}]}
    answers = []
    for b in pair:
        client = RawClient("127.0.0.1", b.port, timeout=10)
        try:
            answers.append(client.request(43, 2, request))
        finally:
            client.close()
    assert answers[0] == answers[1]
    assert [p.error_message for r in answers[1].replica_election_results
            for p in r.partition_result] == [
        "Leader election not needed for topic partition.", f"No such partition as {topic_name}-7",
        "No such topic as nope-x"]


# --- kafka-reassign-partitions ---------------------------------------------------------


@pytest.mark.one_node(
    "the one-node reassignment story side by side with Kafka's one node: every plan "
    "keeps the replicas on node 1 and in its one log dir, and broker 2 is unknown; on "
    "a cluster replicas follow the partitions' leases over the live brokers, so the "
    "same plans mean a move between brokers (api/reassignments.py)")
def test_kafka_reassign_partitions(pair: tuple[Broker, Broker], topic_name: str,
                                   tmp_path: Path) -> None:
    on_both(pair, lambda b: create_topic(b, topic_name, 2))
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": topic_name}]}))
    status, out = same(pair, "kafka-reassign-partitions", "--generate",
                       "--topics-to-move-json-file", str(topics), "--broker-list", "1")
    assert status == 0 and "Proposed partition reassignment configuration" in out

    def plan(name: str, replicas: list[int], log_dirs: bool = False) -> str:
        path = tmp_path / name
        parts = [{"topic": topic_name, "partition": p, "replicas": replicas,
                  **({"log_dirs": ["{DATADIR}"]} if log_dirs else {})} for p in (0, 1)]
        path.write_text(json.dumps({"version": 1, "partitions": parts}))
        return str(path)

    keep = plan("keep.json", [1])
    status, out = same(pair, "kafka-reassign-partitions", "--execute",
                       "--reassignment-json-file", keep)
    assert status == 0 and f"Successfully started partition reassignments for " \
        f"{topic_name}-0,{topic_name}-1" in out
    status, out = same(pair, "kafka-reassign-partitions", "--verify",
                       "--reassignment-json-file", keep)
    assert status == 0 and f"Reassignment of partition {topic_name}-1 is completed." in out
    assert same(pair, "kafka-reassign-partitions", "--list") == (
        0, "No partition reassignments found.\n")
    status, out = same(pair, "kafka-reassign-partitions", "--cancel",
                       "--reassignment-json-file", keep)
    assert status == 0 and "None of the specified partition reassignments are active." in out

    # The plan kafka-reassign-partitions --generate prints as current: with log dirs
    # (AlterReplicaLogDirs to the directory the replica is already in).
    for action, expected in (
            ("--execute", f"Successfully started moving log directory to DATADIR for replica "
                          f"{topic_name}-1 with broker 1"),
            ("--verify", f"Reassignment of replica {topic_name}-1-1 completed successfully.")):
        runs = []
        for b in pair:
            in_dir = Path(plan(f"dirs-{b.port}.json", [1], log_dirs=True))
            in_dir.write_text(in_dir.read_text().replace("{DATADIR}", str(b.data_dir)))
            p = tool(b, "kafka-reassign-partitions", action, "--reassignment-json-file",
                     str(in_dir))
            runs.append((p.returncode, normalize(p.stdout, b)))
        assert runs[0] == runs[1], runs
        assert runs[1][0] == 0 and expected in runs[1][1], runs[1]

    # Another broker: the tool refuses before asking; the broker's own answer is below.
    status, out = same(pair, "kafka-reassign-partitions", "--execute",
                       "--reassignment-json-file", plan("other.json", [2]))
    assert status == 1 and "Unknown broker id 2" in out


def test_alter_partition_reassignments_wire(pair: tuple[Broker, Broker],
                                            topic_name: str) -> None:
    """AlterPartitionReassignments v1 refuses what Kafka's controller refuses, with its
    messages; ListPartitionReassignments finds nothing in progress."""
    on_both(pair, lambda b: create_topic(b, topic_name, 2))

    def request(unknown: int) -> dict:
        """`unknown`: a broker id no broker has (2 beside one node)."""
        return {"timeout": 30000, "allow_replication_factor_change": False, "topics": [
            {"name": topic_name, "partitions": [
                {"partition_index": 0, "replicas": [unknown]},
                {"partition_index": 1, "replicas": None},
                {"partition_index": 7, "replicas": [1]},
                {"partition_index": 0, "replicas": [1, 1]},
                {"partition_index": 0, "replicas": []},
                {"partition_index": 1, "replicas": [1]}]},
            {"name": f"{topic_name}-nope", "partitions": [
                {"partition_index": 0, "replicas": [1]}]}]}
    answers = []
    for b in pair:
        unknown = max(b.node_ids) + 1
        client = RawClient("127.0.0.1", b.port, timeout=10)
        try:
            alter = client.request(45, 1, request(unknown))
            listed = client.request(46, 0, {"timeout": 30000, "topics": None})
        finally:
            client.close()
        answers.append(([(t.name, [(p.partition_index, p.error_code, p.error_message and
                                    p.error_message.replace(f"broker {unknown},", "broker X,"))
                                   for p in t.partitions]) for t in alter.responses],
                        (int(alter.error_code), alter.error_message), listed))
    assert answers[0] == answers[1]
    codes = [code for _t, parts in answers[1][0] for _p, code, _m in parts]
    assert codes == [39, 85, 3, 39, 39, 0, 3]
    assert answers[1][2].topics == ()


# --- kafka-client-metrics ----------------------------------------------------------------


def test_kafka_client_metrics(pair: tuple[Broker, Broker], topic_name: str) -> None:
    name = f"cm-{topic_name}"[:60]
    assert same(pair, "kafka-client-metrics", "--alter", "--name", name, "--metrics",
                "org.apache.kafka.consumer.,org.apache.kafka.producer", "--interval", "1000",
                "--match", "client_id=abc.*,client_software_name=foo") == (
        0, f"Altered client metrics config for {name}.\n")
    assert same(pair, "kafka-client-metrics", "--describe", "--name", name) == (0, (
        f"Client metrics configs for {name} are:\n  interval.ms=1000\n"
        "  match=client_id=abc.*,client_software_name=foo\n"
        "  metrics=org.apache.kafka.consumer.,org.apache.kafka.producer\n"))
    status, out = same(pair, "kafka-client-metrics", "--list")
    assert status == 0 and name in out.split()
    for bad in (["--interval", "5"], ["--match", "foo=bar"]):
        k, h = both(pair, "kafka-client-metrics", "--alter", "--name", name, *bad)
        assert (k[0], k[1]) == (h[0], h[1]) and k[0] == 1, (k, h)
        assert first_error(k[2]) == first_error(h[2]) != ""
    # An empty value resets the key to its default.
    assert same(pair, "kafka-client-metrics", "--alter", "--name", name, "--interval=")[0] == 0
    status, out = same(pair, "kafka-client-metrics", "--describe", "--name", name)
    assert "interval.ms=300000" in out
    assert same(pair, "kafka-client-metrics", "--delete", "--name", name) == (
        0, f"Deleted client metrics config for {name}.\n")
    assert same(pair, "kafka-client-metrics", "--describe", "--name", name) == (
        0, f"The client metric resource {name} doesn't exist and doesn't have dynamic "
           "config.\n")


# --- kafka-e2e-latency, kafka-streams-application-reset --------------------------------


def test_kafka_e2e_latency(pair: tuple[Broker, Broker], topic_name: str) -> None:
    on_both(pair, lambda b: create_topic(b, topic_name))
    k, h = both(pair, "kafka-e2e-latency", "--topic", topic_name, "--num-records", "100",
                "--producer-acks", "1", "--record-size", "100")
    for status, out, _ in (k, h):
        assert status == 0
        assert re.search(r"^Avg latency: [\d.]+ ms$", out, re.M), out
        assert re.search(r"^Percentiles: 50th = \d+, 99th = \d+, 99\.9th = \d+$", out, re.M)


def test_kafka_streams_application_reset(pair: tuple[Broker, Broker],
                                         topic_name: str) -> None:
    app = f"app-{topic_name}"[:60]
    internal = f"{app}-store-changelog"

    def prepare(b: Broker) -> None:
        create_topic(b, topic_name, 2)
        create_topic(b, internal)
        produce(b, topic_name, 10, partitions=2)
        commit(b, app, [TopicPartition(topic_name, 0, 4), TopicPartition(topic_name, 1, 3)])

    on_both(pair, prepare)

    def sorted_lines(out: str) -> list[str]:
        return sorted(out.splitlines())

    k, h = both(pair, "kafka-streams-application-reset", "--application-id", app,
                "--input-topics", topic_name, "--to-earliest", "--dry-run")
    assert k[0] == h[0] == 0 and sorted_lines(k[1]) == sorted_lines(h[1]), (k, h)
    assert f"Deleting inferred internal topics [{internal}]" in h[1]
    k, h = both(pair, "kafka-streams-application-reset", "--application-id", app,
                "--input-topics", topic_name, "--to-earliest")
    assert k[0] == h[0] == 0 and sorted_lines(k[1]) == sorted_lines(h[1]), (k, h)
    assert f"Topic: {topic_name} Partition: 1 Offset: 0" in h[1]
    for b in pair:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        offsets = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(app)])[app].result(30)
        assert sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions) == [
            (0, 0), (1, 0)]
        wait_for(lambda: internal not in admin.list_topics(timeout=10).topics,  # noqa: B023
                 f"{internal} deleted")


# --- kafka-delegation-tokens, kafka-replica-verification -------------------------------


def test_kafka_delegation_tokens(pair: tuple[Broker, Broker], tmp_path: Path) -> None:
    """Without delegation tokens: Kafka's error on a PLAINTEXT listener, no hang."""
    config = tmp_path / "client.properties"
    config.write_text("")
    for action in (["--create", "--max-life-time-period", "-1", "--renewer-principal",
                    "User:r"], ["--describe"], ["--renew", "--renew-time-period", "-1",
                                                "--hmac", "abcd"]):
        k, h = both(pair, "kafka-delegation-tokens", "--command-config", str(config), *action)
        assert (k[0], k[1]) == (h[0], h[1]) and k[0] == 1, (k, h)
        assert first_error(k[2]) == first_error(h[2]) == (
            "org.apache.kafka.common.errors.UnsupportedByAuthenticationException: Delegation "
            "Token requests are not allowed on PLAINTEXT/1-way SSL channels and on "
            "delegation token authenticated channels.")


def test_kafka_replica_verification(pair: tuple[Broker, Broker], topic_name: str) -> None:
    """The deprecated tool sends Fetch v18 (not advertised by Kafka 4.3, but served)."""
    on_both(pair, lambda b: create_topic(b, topic_name))
    on_both(pair, lambda b: produce(b, topic_name, 5))
    wanted = f"max lag is 0 for partition {topic_name}-0 at offset 5 among 1 partitions"
    procs = []
    try:
        for b in pair:
            out = tempfile.TemporaryFile(mode="w+")
            proc = subprocess.Popen(tool_command(
                "kafka-replica-verification", "--broker-list", b.bootstrap,
                "--topics-include", re.escape(topic_name), "--report-interval-ms", "500"),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
            procs.append((proc, out))

        def reported(out: tempfile._TemporaryFileWrapper) -> bool:  # type: ignore[type-arg]
            out.seek(0)
            return wanted in out.read()

        for _proc, out in procs:
            wait_for(lambda: reported(out), wanted, timeout=60)  # noqa: B023
    finally:
        for proc, out in procs:
            proc.kill()
            proc.wait()
            out.close()

