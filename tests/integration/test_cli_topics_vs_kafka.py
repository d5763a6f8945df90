"""`headwater topic|produce|consume` run as a user runs them (subprocesses of the venv's
interpreter), against headwater and against Apache Kafka 4.4.0 (`kafka_ref`) with the
same assertions: the commands are plain Kafka clients, so both brokers must give the same
answers (timestamps aside)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.support.broker_process import BrokerProcess, free_port

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def headwater(tmp_path_factory: pytest.TempPathFactory,
              storage_args: Callable[[Path], list[str]]) -> Iterator[BrokerProcess]:
    """Headwater set up as `kafka_ref` is: no initial rebalance delay (Kafka's
    single-node setting), so a `consume --group` joins at once on both."""
    data_dir = tmp_path_factory.mktemp("broker") / "data"
    proc = BrokerProcess(data_dir, *storage_args(data_dir), "--override",
                         "group.initial.rebalance.delay.ms=0").start()
    yield proc
    proc.stop()


@pytest.fixture(params=["headwater", "kafka"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    server = request.getfixturevalue(request.param if request.param == "headwater"
                                     else "kafka_ref")
    return str(server.bootstrap)


def hw(bootstrap: str, *args: str, stdin: str | None = None, ok: bool = True,
       timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`headwater <command> <subcommand...> --bootstrap-server B <args>`."""
    done = subprocess.run([sys.executable, "-m", "headwater.cli", *args,
                           "--bootstrap-server", bootstrap], input=stdin,
                          capture_output=True, text=True, timeout=timeout)
    if ok and done.returncode:
        raise AssertionError(f"headwater {args} failed: {done.stderr}")
    return done


def name(prefix: str) -> str:
    return f"cli-{prefix}-{uuid.uuid4().hex[:8]}"


def records(out: str) -> list[dict[str, Any]]:
    got = [json.loads(line) for line in out.splitlines()]
    return sorted(got, key=lambda r: (r["partition"], r["offset"]))


def test_topic_create_describe_alter_add_partitions_delete(bootstrap: str) -> None:
    topic = name("life")
    assert hw(bootstrap, "topic", "create", topic, "-p", "2", "-r", "1",
              "-c", "retention.ms=3600000").stdout.strip() == f"created topic {topic}"
    desc = json.loads(hw(bootstrap, "topic", "describe", topic, "--json").stdout)
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"], p["earliest"], p["latest"])
            for p in desc["partitions"]] == [(0, 1, "1", "1", 0, 0), (1, 1, "1", "1", 0, 0)]
    configs = {c["config"]: (c["value"], c["source"]) for c in desc["configs"]}
    assert configs["retention.ms"] == ("3600000", "DYNAMIC_TOPIC")
    assert configs["cleanup.policy"] == ("delete", "DEFAULT")

    hw(bootstrap, "topic", "alter-config", topic, "--set", "cleanup.policy=compact",
       "--set", "segment.ms=600000", "--delete", "retention.ms")
    configs = {c["config"]: (c["value"], c["source"]) for c in json.loads(
        hw(bootstrap, "topic", "describe", topic, "--json").stdout)["configs"]}
    assert configs["cleanup.policy"] == ("compact", "DYNAMIC_TOPIC")
    assert configs["segment.ms"] == ("600000", "DYNAMIC_TOPIC")
    assert configs["retention.ms"][1] == "DEFAULT"

    assert hw(bootstrap, "topic", "add-partitions", topic, "--num", "1").stdout.strip() \
        == f"topic {topic}: 2 -> 3 partitions"
    listed = json.loads(hw(bootstrap, "topic", "list", "--json").stdout)
    assert {"topic": topic, "partitions": 3, "replicas": 1} in listed
    assert not [t for t in listed if t["topic"].startswith("__")]
    table = hw(bootstrap, "topic", "describe", topic).stdout
    assert table.startswith(f"Topic {topic}: 3 partitions") and "DYNAMIC_TOPIC" in table

    assert hw(bootstrap, "topic", "delete", topic).stdout.strip() == f"deleted topic {topic}"
    deadline = time.monotonic() + 30
    while topic in hw(bootstrap, "topic", "list").stdout:  # Kafka deletes asynchronously
        assert time.monotonic() < deadline, "deleted topic still listed"
        time.sleep(0.2)
    gone = hw(bootstrap, "topic", "describe", topic, ok=False)
    assert gone.returncode == 1 and "UNKNOWN_TOPIC_OR_PART" in gone.stderr


def test_produce_then_consume_json_format_offsets_timestamps(bootstrap: str) -> None:
    topic = name("rw")
    hw(bootstrap, "topic", "create", topic, "-p", "2")
    summary = json.loads(hw(bootstrap, "produce", topic, "--key-separator", ":",
                            "--header", "h1=x", "--header", "h2=y", "--partition", "1",
                            "--json", stdin="k1:one\nk2:two\nno key\n").stdout)
    assert summary == {"topic": topic, "records": 3, "partitions": [
        {"partition": 1, "first_offset": 0, "last_offset": 2}]}
    plain = hw(bootstrap, "produce", topic, "--partition", "0", "--compression", "gzip",
               stdin="zero\n")
    assert plain.stdout == "" and \
        plain.stderr.strip() == f"produced 1 records to {topic}: partition 0 offsets 0-0"

    got = records(hw(bootstrap, "consume", topic, "--json", "--num", "4").stdout)
    headers = [{"key": "h1", "value": "x"}, {"key": "h2", "value": "y"}]
    assert [(r["topic"], r["partition"], r["offset"], r["key"], r["value"], r["headers"])
            for r in got] == [(topic, 0, 0, None, "zero", headers[:0]),
                              (topic, 1, 0, "k1", "one", headers),
                              (topic, 1, 1, "k2", "two", headers),
                              (topic, 1, 2, None, "no key", headers)]
    assert all(r["timestamp"] > 1_600_000_000_000 for r in got)

    text = hw(bootstrap, "consume", topic, "--partition", "1", "--num", "3",
              "--format", r"%t|%p|%o|%k|%v|%h|%K|%S\n").stdout
    assert text == "".join(f"{topic}|1|{o}|{k}|{v}|h1=x,h2=y|{kl}|{vl}\n" for o, k, v, kl, vl in
                           [(0, "k1", "one", 2, 3), (1, "k2", "two", 2, 3),
                            (2, "", "no key", -1, 6)])

    assert hw(bootstrap, "consume", topic, "--partition", "1", "--from", "2", "--num", "1",
              "--format", r"%o %v\n").stdout == "2 no key\n"
    # kcat's own format string prints the same as kcat.
    kcat_format = r"%t|%p|%o|%k|%s|%K|%S\n"
    kcat = subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", topic, "-p", "1", "-e",
                           "-f", kcat_format], capture_output=True, text=True, timeout=60,
                          check=True).stdout
    assert hw(bootstrap, "consume", topic, "--partition", "1", "--num", "3",
              "--format", kcat_format).stdout == kcat != ""
    assert hw(bootstrap, "consume", topic, "--partition", "1", "--from", "-1", "--num", "1",
              "--format", r"%o\n").stdout == "2\n"
    assert hw(bootstrap, "consume", topic, "--partition", "1", "--from", "end",
              "--timeout-ms", "1500").stdout == ""

    after = max(r["timestamp"] for r in got) + 1
    while time.time() * 1000 <= after:  # the next records carry a later timestamp
        time.sleep(0.001)
    hw(bootstrap, "produce", topic, "--partition", "1", stdin="late\n")
    assert hw(bootstrap, "consume", topic, "--from", f"@{after}", "--timeout-ms", "2000",
              "--format", r"%p %o %v\n").stdout == "1 3 late\n"


def test_exit_at_end_stops_once_every_partition_is_read(bootstrap: str) -> None:
    topic = name("end")
    hw(bootstrap, "topic", "create", topic, "-p", "3")
    empty = hw(bootstrap, "consume", topic, "--exit-at-end")  # no --num, no --timeout-ms
    assert empty.returncode == 0 and empty.stdout == ""
    hw(bootstrap, "produce", topic, "--partition", "1", stdin="a\nb\nc\n")
    hw(bootstrap, "produce", topic, "--partition", "2", stdin="d\n")
    done = hw(bootstrap, "consume", topic, "-e", "--format", r"%p:%v\n")
    assert sorted(done.stdout.split()) == ["1:a", "1:b", "1:c", "2:d"]
    from_two = hw(bootstrap, "consume", topic, "-e", "--partition", "1", "--from", "2")
    assert from_two.stdout == "c\n"
    group = name("g")
    grouped = hw(bootstrap, "consume", topic, "-e", "--group", group)
    assert sorted(grouped.stdout.split()) == ["a", "b", "c", "d"]
    assert hw(bootstrap, "consume", topic, "-e", "--group", group).stdout == ""
    shared = hw(bootstrap, "consume", topic, "-e", "--share-group", group, ok=False)
    assert shared.returncode == 1 and "hint: --timeout-ms" in shared.stderr


def test_group_consume_commits_what_it_printed(bootstrap: str) -> None:
    topic, group = name("grp"), name("g")
    hw(bootstrap, "topic", "create", topic, "-p", "2")
    hw(bootstrap, "produce", topic, "--key-separator", ":", stdin="a:1\nb:2\nc:3\nd:4\n")
    first = hw(bootstrap, "consume", topic, "--group", group, "--num", "4", "--json")
    assert sorted(r["value"] for r in records(first.stdout)) == ["1", "2", "3", "4"]
    described = subprocess.run([sys.executable, "-m", "headwater.cli", "groups",
                                "--bootstrap-server", bootstrap, "--json", "describe", group],
                               capture_output=True, text=True, timeout=60)
    assert described.returncode == 0, described.stderr
    rows = json.loads(described.stdout)
    assert sum(r["current_offset"] for r in rows) == 4 and all(r["lag"] == 0 for r in rows)
    again = hw(bootstrap, "consume", topic, "--group", group, "--timeout-ms", "3000")
    assert again.stdout == ""
    hw(bootstrap, "produce", topic, stdin="e\n")
    assert hw(bootstrap, "consume", topic, "--group", group, "--num", "1").stdout == "e\n"


def test_read_committed_skips_an_aborted_transaction(bootstrap: str) -> None:
    topic = name("txn")
    hw(bootstrap, "topic", "create", topic, "-p", "1")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": name("tx")})
    producer.init_transactions(30)
    for value, commit in (("committed", True), ("aborted", False), ("after", True)):
        producer.begin_transaction()
        producer.produce(topic, value.encode())
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    committed = hw(bootstrap, "consume", topic, "--isolation", "read_committed",
                   "--num", "2").stdout
    assert committed == "committed\nafter\n"
    everything = hw(bootstrap, "consume", topic, "--isolation", "read_uncommitted",
                    "--num", "3").stdout
    assert everything == "committed\naborted\nafter\n"


def test_share_group_accepts_then_nothing_is_left(bootstrap: str) -> None:
    topic, group = name("share"), name("sg")
    hw(bootstrap, "topic", "create", topic, "-p", "1")
    hw(bootstrap, "produce", topic, stdin="s1\ns2\ns3\n")
    released = hw(bootstrap, "consume", topic, "--share-group", group, "--from", "beginning",
                  "--ack", "release", "--num", "1", "--format", r"%o\n")
    assert released.stdout == "0\n"
    got = hw(bootstrap, "consume", topic, "--share-group", group, "--ack", "accept",
             "--num", "3", "--json")
    assert [r["value"] for r in records(got.stdout)] == ["s1", "s2", "s3"]
    assert hw(bootstrap, "consume", topic, "--share-group", group,
              "--timeout-ms", "3000").stdout == ""


@pytest.mark.parametrize("args, expected", [
    (("topic", "create", "bad name!"), "INVALID_TOPIC_EXCEPTION"),
    (("topic", "describe", "cli-no-such-topic"), "UNKNOWN_TOPIC_OR_PART"),
    (("consume", "cli-no-such-topic", "--num", "1"), "UNKNOWN_TOPIC_OR_PART"),
    (("produce", "cli-no-such-topic"), "UNKNOWN_TOPIC_OR_PART"),
])
def test_errors_are_one_line_with_a_hint(bootstrap: str, args: tuple[str, ...],
                                         expected: str) -> None:
    start = time.monotonic()
    done = hw(bootstrap, *args, stdin="x\n", ok=False)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and expected in done.stderr and "hint:" in done.stderr
    assert time.monotonic() - start < 10


def test_an_unreachable_broker_fails_fast() -> None:
    unreachable = f"127.0.0.1:{free_port()}"
    for args in (("topic", "list"), ("consume", "t", "--num", "1"), ("produce", "t")):
        start = time.monotonic()
        done = hw(unreachable, *args, stdin="x\n", ok=False, timeout=30)
        assert time.monotonic() - start < 10, args
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert "cannot reach a broker" in done.stderr and "hint:" in done.stderr


def completer() -> Callable[..., list[str]]:
    """`complete(*words)`: what the bash completion script offers after `headwater
    words...` (the last word being completed), the venv's headwater on the line."""
    script = subprocess.run([sys.executable, "-m", "headwater.cli", "completion", "bash"],
                            capture_output=True, text=True, timeout=30, check=True).stdout
    command = str(Path(sys.executable).with_name("headwater"))

    def complete(*words: str) -> list[str]:
        line = " ".join(f"'{w}'" for w in words)
        probe = (f"{script}\nCOMP_WORDS=({command} {line}); COMP_CWORD={len(words)}\n"
                 '_headwater; echo "${COMPREPLY[@]}"')
        return subprocess.run(["bash", "-c", probe], capture_output=True, text=True,
                              timeout=60, check=True).stdout.split()
    return complete


def test_completion_completes_the_clusters_topic_and_group_names(bootstrap: str) -> None:
    topic, group = name("comp"), name("compgroup")
    hw(bootstrap, "topic", "create", topic, "-p", "1")
    hw(bootstrap, "produce", topic, stdin="x\n")
    hw(bootstrap, "consume", topic, "--group", group, "--num", "1")
    complete = completer()
    assert complete("topic", "describe", "--bootstrap-server", bootstrap, topic[:-3]) == \
        [topic]
    assert topic in complete("consume", "--bootstrap-server", bootstrap, "")
    assert complete("consume", topic, "--bootstrap-server", bootstrap, "--group",
                    group[:-2]) == [group]
    assert complete("groups", "describe", "--bootstrap-server", bootstrap, group) == [group]
    assert complete("topic", "create", "--bootstrap-server", bootstrap, topic) == []
    # the connection options after a Kafka-tool-style command's subcommand too
    listed = json.loads(hw(bootstrap, "groups", "list", "--json").stdout)
    assert group in {g["group"] for g in listed}


def test_completion_scripts_complete_subcommands_options_and_choices() -> None:
    complete = completer()

    assert complete("to") == ["topic"]
    assert complete("topic", "add") == ["add-partitions"]
    assert "--share-group" in complete("consume", "t", "--")
    assert complete("consume", "t", "--ack", "") == ["accept", "release", "reject"]
    zsh = subprocess.run([sys.executable, "-m", "headwater.cli", "completion", "zsh"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    bash = subprocess.run([sys.executable, "-m", "headwater.cli", "completion", "bash"],
                          capture_output=True, text=True, timeout=30, check=True).stdout
    assert zsh.startswith("autoload -U +X bashcompinit") and bash in zsh


@pytest.fixture(scope="module")
def no_acls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker with Kafka's StandardAuthorizer and no ACL: the anonymous principal may
    do nothing."""
    proc = BrokerProcess(tmp_path_factory.mktemp("no-acls") / "data", "--override",
                         "authorizer.class.name="
                         "org.apache.kafka.metadata.authorizer.StandardAuthorizer").start()
    yield proc
    proc.stop()


@pytest.mark.parametrize("args", [("topic", "create", "refused"), ("produce", "refused"),
                                  ("consume", "refused", "--num", "1")])
def test_a_refused_acl_is_one_line_with_a_hint(no_acls: BrokerProcess,
                                               args: tuple[str, ...]) -> None:
    start = time.monotonic()
    done = hw(no_acls.bootstrap, *args, stdin="x\n", ok=False, timeout=30)
    assert done.returncode == 1 and done.stdout == "", done.stdout
    assert done.stderr.count("\n") == 1, done.stderr
    assert "authorization failed" in done.stderr and "hint:" in done.stderr, done.stderr
    assert time.monotonic() - start < 10
