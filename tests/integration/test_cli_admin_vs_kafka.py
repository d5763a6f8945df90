"""`headwater configs|acls|cluster` run as a user runs them (subprocesses), against
headwater and against Apache Kafka 4.4.0 (`kafka_ref`) with the same assertions: the
commands are plain Kafka clients, so both brokers must give the same answers."""

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

from tests.integration.test_acls import AclBroker, secured_kafka
from tests.integration.test_cli_topics_vs_kafka import hw, name
from tests.support.broker_process import free_port
from tests.support.kafka_reference import KafkaReference

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(params=["headwater", "kafka"])
def server(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("broker" if request.param == "headwater" else "kafka_ref")


def until(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """Poll `check` until it returns something true (Kafka applies metadata changes a
    little after acknowledging them)."""
    deadline = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.1)
    return got


def configs(bootstrap: str, *which: str) -> dict[str, dict[str, Any]]:
    rows = json.loads(hw(bootstrap, "configs", "describe", *which, "--json").stdout)
    return {r["name"]: r for r in rows}


def test_topic_config_describe_alter_delete_back_to_default(server: Any) -> None:
    bootstrap, topic = server.bootstrap, name("cfg")
    hw(bootstrap, "topic", "create", topic, "-p", "1")
    before = configs(bootstrap, "--topic", topic)
    assert before["retention.ms"] == {"name": "retention.ms", "value": "604800000",
                                      "source": "DEFAULT", "sensitive": False,
                                      "read_only": False}
    done = hw(bootstrap, "configs", "alter", "--topic", topic, "--set", "retention.ms=3600000",
              "--set", "cleanup.policy=compact")
    assert done.stdout.strip() == f"altered 2 config(s) of topic {topic}"
    after = configs(bootstrap, "--topic", topic)
    assert (after["retention.ms"]["value"], after["retention.ms"]["source"]) == \
        ("3600000", "DYNAMIC_TOPIC")
    assert (after["cleanup.policy"]["value"], after["cleanup.policy"]["source"]) == \
        ("compact", "DYNAMIC_TOPIC")
    hw(bootstrap, "configs", "alter", "--topic", topic, "--delete", "retention.ms",
       "--delete", "cleanup.policy")
    again = configs(bootstrap, "--topic", topic)
    assert again["retention.ms"] == before["retention.ms"]
    assert again["cleanup.policy"] == before["cleanup.policy"]
    table = hw(bootstrap, "configs", "describe", "--topic", topic).stdout.splitlines()
    assert table[0].split() == ["NAME", "VALUE", "SOURCE", "SENSITIVE", "READ-ONLY"]
    assert ["retention.ms", "604800000", "DEFAULT", "no", "no"] in \
        [line.split() for line in table]

    missing = hw(bootstrap, "configs", "describe", "--topic", name("none"), ok=False)
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    assert "UNKNOWN_TOPIC_OR_PART" in missing.stderr and "hint:" in missing.stderr
    bad = hw(bootstrap, "configs", "alter", "--topic", topic, "--set", "no.such.key=1",
             ok=False)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1
    assert "INVALID_CONFIG" in bad.stderr and "hint:" in bad.stderr, bad.stderr


def test_broker_config_describe(server: Any) -> None:
    found = configs(server.bootstrap, "--broker", "1")
    assert found["node.id"]["value"] == "1" and found["node.id"]["read_only"]
    assert found["num.partitions"]["source"] in {"DEFAULT", "STATIC_BROKER"}
    assert all(set(r) == {"name", "value", "source", "sensitive", "read_only"}
               for r in found.values())
    assert all(r["value"] is None for r in found.values() if r["sensitive"])
    default = configs(server.bootstrap, "--broker-default")
    assert all(r["source"] != "STATIC_BROKER" for r in default.values())
    unknown = hw(server.bootstrap, "configs", "describe", "--broker", "77", ok=False)
    assert unknown.returncode == 1 and "hint:" in unknown.stderr, unknown.stderr


def test_client_quotas_set_describe_delete(server: Any) -> None:
    bootstrap, user = server.bootstrap, name("user")
    entity = f"user={user},client-id=app"

    def quotas() -> list[dict[str, Any]]:
        return json.loads(hw(bootstrap, "configs", "describe", "--client-quota", entity,
                             "--json").stdout)

    assert quotas() == []
    done = hw(bootstrap, "configs", "alter", "--client-quota", entity,
              "--set", "producer_byte_rate=1048576", "--set", "consumer_byte_rate=2048")
    assert done.stdout.strip() == f"altered 2 quota(s) of client-id=app,user={user}"
    label = f"client-id=app,user={user}"
    until(lambda: quotas() == [
        {"name": "consumer_byte_rate", "value": 2048, "entity": label},
        {"name": "producer_byte_rate", "value": 1048576, "entity": label}], "quotas set")
    hw(bootstrap, "configs", "alter", "--client-quota", entity, "--delete",
       "consumer_byte_rate")
    until(lambda: quotas() == [{"name": "producer_byte_rate", "value": 1048576,
                                "entity": label}], "one quota deleted")
    hw(bootstrap, "configs", "alter", "--client-quota", entity, "--delete",
       "producer_byte_rate")
    until(lambda: quotas() == [], "every quota deleted")
    bad = hw(bootstrap, "configs", "alter", "--client-quota", entity, "--set",
             "no_such_quota=1", ok=False)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "hint:" in bad.stderr


def test_cluster_info(server: Any) -> None:
    hw(server.bootstrap, "topic", "create", f"info-{uuid.uuid4().hex[:8]}", "-p", "3")

    def info() -> Any:  # once the new topic's leaders are known (Kafka: a moment later)
        found = json.loads(hw(server.bootstrap, "cluster", "info", "--json").stdout)
        return found if sum(c["partitions"] for c in found["partitions_led"]) >= 3 else None

    found = until(info, "the new topic's partitions led")
    assert set(found) == {"cluster_id", "controller", "brokers", "features",
                          "partitions_led"}
    # every broker of the server (Kafka's reference and one node: node 1 alone)
    nodes = sorted(server.node_ports.items())
    assert found["controller"] in server.node_ids and found["cluster_id"]
    assert found["brokers"] == [{"id": n, "host": "127.0.0.1", "port": port, "rack": None}
                                for n, port in nodes]
    features = {f["name"]: f for f in found["features"]}
    assert features["metadata.version"]["max_level"] >= 1
    assert [c["broker"] for c in found["partitions_led"]] == server.node_ids
    for counts in found["partitions_led"]:
        assert set(counts) == {"broker", "partitions", "__consumer_offsets",
                               "__transaction_state", "__share_group_state"}
    # the topic created here, and the module's
    assert sum(c["partitions"] for c in found["partitions_led"]) >= 3
    text = hw(server.bootstrap, "cluster", "info").stdout
    assert text.startswith(f"Cluster {found['cluster_id']}\nController {found['controller']}\n")
    assert all(f"{n}       127.0.0.1:{port}" in text for n, port in nodes), text
    assert "metadata.version" in text


def test_cluster_info_unreachable_is_one_line() -> None:
    done = hw(f"127.0.0.1:{free_port()}", "cluster", "info", ok=False, timeout=30)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "hint: is it running?" in done.stderr


def test_acls_without_an_authorizer_is_one_line(server: Any) -> None:
    """Both brokers answer DescribeAcls with SECURITY_DISABLED when no authorizer is
    configured: the command says so, with the setting to use."""
    done = hw(server.bootstrap, "acls", "list", ok=False)
    assert done.returncode == 1 and done.stdout == "", done.stdout
    assert done.stderr.count("\n") == 1, done.stderr
    assert "SECURITY_DISABLED" in done.stderr and "authorizer.class.name" in done.stderr


# ---- ACLs: brokers with Kafka's StandardAuthorizer and super user User:admin -----------


@pytest.fixture(scope="module")
def acl_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[int, int]]]:
    """{name: (plain port, sasl port)} of headwater's AclBroker and Kafka, set up alike."""
    kafka = KafkaReference(tmp_path_factory.mktemp("kafka") / "data")
    sasl = free_port()
    secured_kafka(kafka, sasl)
    headwater = AclBroker(tmp_path_factory.mktemp("headwater") / "data")
    kafka.start()
    try:
        headwater.proc.start()
        try:
            yield {"headwater": (headwater.plain, headwater.sasl), "kafka": (kafka.port, sasl)}
        finally:
            headwater.proc.stop()
    finally:
        kafka.stop()


@pytest.fixture(params=["headwater", "kafka"])
def ports(request: pytest.FixtureRequest,
          acl_brokers: dict[str, tuple[int, int]]) -> tuple[int, int]:
    return acl_brokers[request.param]


def test_acls_create_list_delete(ports: tuple[int, int], tmp_path: Path) -> None:
    plain, sasl = ports
    admin = tmp_path / "admin.properties"
    admin.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule"
                     ' required username="admin" password="admin-secret";\n')
    bootstrap, prefix = f"127.0.0.1:{sasl}", name("acl")

    def acls(*args: str) -> Any:
        return hw(bootstrap, "acls", *args, "--command-config", str(admin))

    created = acls("create", "--allow-principal", "User:alice", "--operation", "read",
                   "--operation", "Describe", "--topic", prefix,
                   "--resource-pattern-type", "prefixed", "--json")
    alice = [{"principal": "User:alice", "permission": "ALLOW", "operation": op,
              "host": "*", "resource": "TOPIC", "name": prefix, "pattern": "PREFIXED"}
             for op in ("READ", "DESCRIBE")]
    assert json.loads(created.stdout) == alice
    acls("create", "--deny-principal", "User:bob", "--operation", "Write", "--group", prefix)

    def listed(*args: str) -> list[dict[str, Any]]:
        return json.loads(acls("list", *args, "--json").stdout)

    # a topic named with the prefix: its matching ACLs are the prefixed ones
    until(lambda: sorted(listed("--topic", f"{prefix}-orders", "--resource-pattern-type",
                                "match"), key=lambda r: r["operation"]) == sorted(
        alice, key=lambda r: r["operation"]), "the prefixed ACLs match")
    assert listed("--topic", f"{prefix}-orders") == []  # a literal filter: none
    bob = listed("--principal", "User:bob")
    assert [(r["permission"], r["operation"], r["resource"], r["name"]) for r in bob] == \
        [("DENY", "WRITE", "GROUP", prefix)]
    table = acls("list", "--group", prefix).stdout.splitlines()
    assert table[0].split() == ["PRINCIPAL", "PERMISSION", "OPERATION", "HOST", "RESOURCE",
                                "NAME", "PATTERN"]
    assert table[1].split() == ["User:bob", "DENY", "WRITE", "*", "GROUP", prefix, "LITERAL"]

    deleted = json.loads(acls("delete", "--topic", prefix, "--resource-pattern-type",
                              "prefixed", "--operation", "Read", "--json").stdout)
    assert deleted == alice[:1]
    until(lambda: [r["operation"] for r in listed("--topic", prefix,
                                                   "--resource-pattern-type", "prefixed")]
          == ["DESCRIBE"], "READ deleted")
    acls("delete", "--topic", prefix, "--resource-pattern-type", "any")
    acls("delete", "--group", prefix)
    until(lambda: listed("--principal", "User:alice") + listed("--principal", "User:bob")
          == [], "every ACL deleted")

    # User:ANONYMOUS (the PLAINTEXT listener) is no super user: refused, one line
    for args in (("list",), ("create", "--allow-principal", "User:eve", "--topic", prefix)):
        refused = hw(f"127.0.0.1:{plain}", "acls", *args, ok=False, timeout=30)
        assert refused.returncode == 1 and refused.stdout == "", refused.stdout
        assert refused.stderr.count("\n") == 1, refused.stderr
        assert "authorization failed" in refused.stderr and "hint:" in refused.stderr


def test_completion_has_configs_acls_cluster() -> None:
    script = subprocess.run([sys.executable, "-m", "headwater.cli", "completion", "bash"],
                            capture_output=True, text=True, timeout=30, check=True).stdout

    def complete(*words: str) -> list[str]:
        probe = (f"{script}\nCOMP_WORDS=(headwater {' '.join(words)}); "
                 f'COMP_CWORD={len(words)}\n_headwater; echo "${{COMPREPLY[@]}}"')
        return subprocess.run(["bash", "-c", probe], capture_output=True, text=True,
                              timeout=30, check=True).stdout.split()

    assert complete("conf") == ["configs"]
    assert complete("configs", "")[:2] == ["alter", "describe"]
    assert {"--broker", "--broker-default", "--topic", "--group", "--client-quota", "--set",
            "--delete"} <= set(complete("configs", "alter", "--"))
    assert complete("acls", "")[:3] == ["create", "delete", "list"]
    assert complete("acls", "list", "--resource-pattern-type", "") == \
        ["literal", "prefixed", "match", "any"]
    assert "ClusterAction" in complete("acls", "create", "--operation", "")
    assert complete("cluster", "")[:1] == ["info"]
