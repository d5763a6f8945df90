"""The web console (`headwater console`) in headless Chromium against a real broker: each
page loads and shows the right numbers, read from the DOM (or from the Chart.js chart
itself), for a cluster with topics, a lagging consumer group, a share group with
acquired, redelivered and dead-lettered records, an open transaction, ACLs and a quota.
Writes are refused without --allow-writes and work with it; a non-loopback listen
without TLS is refused.

One broker, two consoles (read-only, and with --allow-writes) and one browser for the
module. HEADWATER_CONSOLE_SCREENSHOTS=DIR saves a screenshot of each page there (that is
how docs/console/*.png are made)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.integration.test_share_consumer import set_group_configs
from tests.support.broker_process import BrokerProcess, free_port
from tests.support.browser import Browser
from tests.support.console_process import ConsoleProcess
from tests.support.wire import RawClient

pytestmark = pytest.mark.timeout(90)

SCREENSHOTS = os.environ.get("HEADWATER_CONSOLE_SCREENSHOTS")
BASE_TS = 1_700_000_000_000  # the records' timestamps: BASE_TS + 1000 * index
COMMITTED = {0: 5, 1: 10, 2: 2}  # billing's committed offsets; each partition ends at 10


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker with Kafka's StandardAuthorizer, everyone allowed where no ACL applies
    (so the console's anonymous connections see everything but the ACL'd topic)."""
    data = tmp_path_factory.mktemp("console") / "data"
    proc = BrokerProcess(data, "--override",
                         "authorizer.class.name=org.apache.kafka.metadata.authorizer."
                         "StandardAuthorizer",
                         "--override", "allow.everyone.if.no.acl.found=true").start()
    yield proc
    proc.stop()


class Scene:
    """What the pages must show, built once against the broker."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.closers: list[Any] = []

    def close(self) -> None:
        for close in reversed(self.closers):
            try:
                close()
            except Exception:  # noqa: BLE001  best effort on teardown
                pass


def _acl(principal: str, op: AclOperation, topic: str = "secret") -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
                      op, AclPermissionType.ALLOW)


@pytest.fixture(scope="module")
def scene(secured_broker: BrokerProcess) -> Iterator[Scene]:
    b = secured_broker.bootstrap
    s = Scene(b)
    admin = AdminClient({"bootstrap.servers": b})
    for f in admin.create_topics([NewTopic("orders", 3, 1), NewTopic("work", 1, 1),
                                  NewTopic("ledger", 1, 1), NewTopic("clicks", 1, 1),
                                  NewTopic("dlq.workers", 1, 1, config={
                                      "errors.deadletterqueue.group.enable": "true"})]
                                 ).values():
        f.result(15)
    p = Producer({"bootstrap.servers": b, "linger.ms": 5})
    for part in range(3):
        for i in range(10):
            p.produce("orders", f"order {part}-{i}".encode(), key=f"k{part}-{i}".encode(),
                      partition=part, timestamp=BASE_TS + 1000 * i)
    for i in range(10):
        p.produce("work", str(i).encode(), key=str(i).encode())
    assert p.flush(15) == 0
    _consumer_group(s)
    _share_group(s)
    _transaction(s)
    for f in admin.create_acls([_acl("User:alice", AclOperation.READ),
                                _acl("User:bob", AclOperation.WRITE)]).values():
        f.result(15)
    client = RawClient("127.0.0.1", secured_broker.port)
    try:
        resp = client.request(49, 1, {"entries": [{
            "entity": [{"entity_type": "user", "entity_name": "alice"}],
            "ops": [{"key": "producer_byte_rate", "value": 1048576.0, "remove": False}]}],
            "validate_only": False})
        assert int(resp.entries[0].error_code) == 0
    finally:
        client.close()
    yield s
    s.close()


def _consumer_group(s: Scene) -> None:
    """billing: one live member holding orders' 3 partitions, committed behind the end."""
    c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "billing",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    s.closers.append(c.close)
    c.subscribe(["orders"])
    deadline = time.monotonic() + 30
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    assert len(c.assignment()) == 3
    c.commit(offsets=[TopicPartition("orders", p, o) for p, o in COMMITTED.items()],
             asynchronous=False)


def _share_group(s: Scene) -> None:
    """workers on `work` (offsets 0-9), dead letters to dlq.workers. A first consumer
    rejects 0-1 (dead-lettered), accepts 2-3, releases 4-9; a second one (kept open)
    acquires 4-9 again, accepts 4, releases 5 and holds 6-9 acquired. Persisted: start
    offset 5; 5 available with count 2, 6-9 (acquired) available with count 1."""
    set_group_configs(s.bootstrap, "workers", share_auto_offset_reset="earliest",
                      **{"errors.deadletterqueue.topic.name": "dlq.workers",
                         "share.record.lock.duration.ms": "60000"})

    def consumer() -> ShareConsumer:
        c = ShareConsumer({"bootstrap.servers": s.bootstrap, "group.id": "workers",
                           "share.acknowledgement.mode": "explicit"})
        c.subscribe(["work"])
        return c

    def take(c: ShareConsumer, n: int) -> list[Any]:
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            got += [m for m in c.poll(0.5) if m.error() is None]
        assert len(got) == n, [m.offset() for m in got]
        return got

    first = consumer()
    for m in take(first, 10):
        v = int(m.value())
        first.acknowledge(m, AcknowledgeType.REJECT if v < 2 else
                          AcknowledgeType.ACCEPT if v < 4 else AcknowledgeType.RELEASE)
    first.commit_sync(15)
    first.close()
    second = consumer()
    s.closers.append(second.close)
    for m in take(second, 6):
        if m.offset() == 4:
            second.acknowledge(m, AcknowledgeType.ACCEPT)
        elif m.offset() == 5:
            second.acknowledge(m, AcknowledgeType.RELEASE)
    second.commit_sync(15)


def _transaction(s: Scene) -> None:
    """txn-open: a transaction left open on ledger-0."""
    p = Producer({"bootstrap.servers": s.bootstrap, "transactional.id": "txn-open"})
    p.init_transactions(15)
    p.begin_transaction()
    p.produce("ledger", b"pending")
    assert p.flush(15) == 0
    s.closers.append(lambda: p.abort_transaction(10))


@pytest.fixture(scope="module")
def console(secured_broker: BrokerProcess, scene: Scene,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleProcess]:
    proc = ConsoleProcess(secured_broker.bootstrap,
                          tmp_path_factory.mktemp("console") / "console.log").start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def writable_console(secured_broker: BrokerProcess, scene: Scene,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleProcess]:
    proc = ConsoleProcess(secured_broker.bootstrap,
                          tmp_path_factory.mktemp("console") / "console-rw.log",
                          "--allow-writes").start()
    yield proc
    proc.stop()


def shoot(browser: Browser, name: str) -> None:
    if SCREENSHOTS:
        browser.screenshot(Path(SCREENSHOTS) / f"{name}.png")


def chart_series(browser: Browser, canvas: str) -> dict[str, list[Any]]:
    """The datasets the Chart.js chart on `canvas` draws now: {label: values}."""
    return browser.js("const c = Chart.getChart(document.querySelector(arguments[0]));"
                      "if (!c) return {};"
                      "return Object.fromEntries(c.data.datasets.map(d => [d.label, d.data]));",
                      canvas)


def test_overview_shows_brokers_topics_groups_and_charts(browser, console, secured_broker):
    browser.get(console.url + "/")
    browser.wait_text("#topics tr[data-topic=orders] .records", "30")
    assert browser.text("#topics tr[data-topic=orders] .partitions") == "3"
    assert browser.text("#topics tr[data-topic=work] .records") == "10"
    assert browser.texts("#brokers tbody tr td:nth-child(2)") == [secured_broker.bootstrap]
    assert browser.text("#groups tr[data-group=workers] .type") == "share"
    assert browser.text("#groups tr[data-group=billing] .type") in ("classic", "consumer")
    # the charts: lag per group from the console's samples; throughput once clicks grows
    browser.wait(lambda: chart_series(browser, "#chart-lag").get("billing", [None])[-1]
                 == 13, why="billing's total lag (5 + 0 + 8) in the lag chart")
    browser.wait(lambda: chart_series(browser, "#chart-share-lag").get("workers", [None])[-1]
                 == 5, why="workers' lag in the share lag chart")
    p = Producer({"bootstrap.servers": secured_broker.bootstrap})
    deadline = time.monotonic() + 20

    def clicks_flowing() -> bool:
        if time.monotonic() < deadline:
            for i in range(20):
                p.produce("clicks", str(i).encode())
            p.flush(10)
        return any((v or 0) > 0 for v in chart_series(browser, "#chart-throughput")
                   .get("clicks", []))

    browser.wait(clicks_flowing, timeout=25, why="clicks' throughput above 0")
    if SCREENSHOTS:  # a picture with some history: clicks flowing for a few samples more
        deadline = time.monotonic() + 8  # clicks_flowing produces until then
        browser.wait(lambda: clicks_flowing() and time.monotonic() > deadline - 0.5,
                     timeout=10, why="8 s of clicks")
        browser.get(console.url + "/")
        browser.wait(lambda: int(browser.js("return document.querySelector("
                                            "'#chart-throughput').dataset.points || 0")) >= 8,
                     why="8 samples")
    shoot(browser, "overview")


def test_topic_page_partitions_configs_and_record_browser(browser, console):
    browser.get(console.url + "/topics/orders")
    browser.wait_text("#partitions tr[data-partition='1'] .latest", "10")
    for p in range(3):
        row = f"#partitions tr[data-partition='{p}']"
        assert browser.text(f"{row} .earliest") == "0"
        assert browser.text(f"{row} .records") == "10"
        assert browser.text(f"{row} .leader") == "1"
        assert int(browser.js(f"return document.querySelector(\"{row} .size\").dataset.bytes")
                   ) > 0
    assert browser.text("#configs tr[data-config='cleanup.policy'] .value") == "delete"
    # by offset, through the form
    form = browser.driver.find_element("css selector", "#browse")
    form.find_element("name", "partition").clear()
    form.find_element("name", "partition").send_keys("1")
    form.find_element("name", "offset").send_keys("3")
    form.find_element("css selector", "button").click()
    browser.wait(lambda: browser.texts("#records .offset") == [str(i) for i in range(3, 10)],
                 why="offsets 3-9 of partition 1")
    assert browser.text("#records tr[data-offset='3'] .value") == "order 1-3"
    shoot(browser, "topic")
    # by timestamp: the first record at or after BASE_TS + 5 s
    browser.get(console.url + "/topics/orders?partition=2&timestamp=" + str(BASE_TS + 5000))
    browser.wait(lambda: browser.texts("#records .offset")[:1] == ["5"], why="offset 5")
    # by key
    browser.get(console.url + "/topics/orders?partition=0&key=k0-7")
    browser.wait(lambda: browser.texts("#records .offset") == ["7"], why="key k0-7")
    assert browser.text("#records .key") == "k0-7"


def test_consumer_group_page_lag_members_and_chart(browser, console):
    browser.get(console.url + "/groups/billing")
    browser.wait_text("#total-lag", "13")
    for p, committed in COMMITTED.items():
        row = f"#offsets tr[data-tp='orders-{p}']"
        assert browser.text(f"{row} .committed") == str(committed)
        assert browser.text(f"{row} .end") == "10"
        assert browser.text(f"{row} .lag") == str(10 - committed)
    assert browser.text("#group-state") == "Stable"
    assert len(browser.texts("#members tbody tr")) == 1
    browser.wait(lambda: chart_series(browser, "#chart-group-lag").get("orders-2", [None])[-1]
                 == 8, why="orders-2's lag in the chart")
    shoot(browser, "consumer-group")


def test_streams_group_page_shows_each_members_tasks(browser, console, secured_broker):
    """A streams group (KIP-1071) on the group page: its member's active tasks (Kafka's
    ids, subtopology_partition) beside the input partitions they read."""
    from tests.integration.test_streams_groups_vs_kafka import heartbeat, topology, until_tasks

    group = f"counter-{uuid.uuid4().hex[:6]}"
    epoch = heartbeat(secured_broker, group_id=group, member_id="reader",
                      topology=topology({"source_topics": ["orders"]})).member_epoch
    until_tasks(secured_broker, group, "reader", epoch)
    browser.get(console.url + f"/groups/{group}")
    browser.wait_text("#members tr[data-member=reader] .active", "0_0 0_1 0_2")
    assert browser.text("#members tr[data-member=reader] .partitions") == \
        "orders-0, orders-1, orders-2"
    assert [browser.text(f"#offsets tr[data-tp='orders-{p}'] .end") for p in range(3)] == \
        ["10"] * 3
    shoot(browser, "streams-group")


def test_share_group_page_in_flight_states_counts_and_dead_letters(browser, console):
    browser.get(console.url + "/share-groups/workers")
    row = "#share-partitions tr[data-tp='work-0']"
    browser.wait_text(f"{row} .start", "5")
    assert browser.text(f"{row} .end") == "10"
    assert browser.text(f"{row} .lag") == "5"
    assert browser.text(f"{row} .in-flight") == "5"
    assert browser.text(f"{row} .available") == "5"  # 5 released twice, 6-9 acquired
    assert browser.text(f"{row} .archiving") == "0"
    assert browser.text(f"{row} .dead-lettered") == "2"
    assert browser.texts(f"{row} .delivery-counts span") == ["1×: 4", "2×: 1"]
    assert browser.text("#dlq-topic") == "dlq.workers"
    assert browser.text("#group-state") == "Stable"
    assert browser.texts("#members .assignment") == ["work-0"]
    histogram = chart_series(browser, "#chart-delivery")
    assert histogram == {"records": [4, 1]}, histogram
    browser.wait(lambda: chart_series(browser, "#chart-share-lag").get("work-0", [None])[-1]
                 == 5, why="work-0's lag in the chart")
    shoot(browser, "share-group")


def test_transactions_page_shows_the_open_transaction(browser, console):
    browser.get(console.url + "/transactions")
    browser.wait_text("#transactions tr[data-txn='txn-open'] .state", "Ongoing")
    assert browser.text("#transactions tr[data-txn='txn-open'] .partitions") == "ledger-0"
    shoot(browser, "transactions")


def test_acls_and_quotas_page_read_only(browser, console):
    browser.get(console.url + "/security")
    browser.wait(lambda: len(browser.texts("#acls tr.acl")) >= 2, why="two ACLs")
    rows = browser.texts("#acls tr.acl td:first-child")
    assert {"User:alice", "User:bob"} <= set(rows)
    assert browser.texts("#quotas tr.quota td:first-child") == ["user=alice"]
    assert browser.text("#quotas tr.quota .value") == "1048576"
    assert browser.texts("#acls button") == []  # read-only: no delete buttons
    shoot(browser, "acls-quotas")


def _post(url: str, fields: dict[str, str]) -> tuple[int, str]:
    req = urllib.request.Request(url, data=urllib.parse.urlencode(fields).encode(),
                                 headers={"HX-Request": "true"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_writes_are_refused_without_allow_writes(browser, console, secured_broker):
    status, body = _post(console.url + "/actions/create-topic",
                         {"name": "not-made", "partitions": "1"})
    assert status == 403 and "--allow-writes" in body
    browser.get(console.url + "/")
    browser.wait_text("#topics tr[data-topic=orders] .partitions", "3")
    assert browser.js("return document.querySelector('#create-topic')") is None
    topics = AdminClient({"bootstrap.servers": secured_broker.bootstrap}).list_topics(
        timeout=10).topics
    assert "not-made" not in topics


def test_allow_writes_creates_a_topic_and_deletes_an_acl(browser, writable_console,
                                                        secured_broker):
    b = secured_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    carol = _acl("User:carol", AclOperation.DESCRIBE)
    admin.create_acls([carol])[carol].result(15)
    browser.get(writable_console.url + "/")
    form = browser.wait(lambda: browser.driver.find_elements("css selector", "#create-topic"),
                        why="the create-topic form")[0]
    form.find_element("name", "name").send_keys("made-by-console")
    partitions = form.find_element("name", "partitions")
    partitions.clear()
    partitions.send_keys("2")
    form.find_element("css selector", "button").click()
    browser.wait_text("#write-result", "created topic made-by-console")
    meta = admin.list_topics("made-by-console", timeout=10).topics["made-by-console"]
    assert meta.error is None and len(meta.partitions) == 2
    # delete carol's ACL from its row (the page asks to confirm)
    browser.get(writable_console.url + "/security")
    browser.wait(lambda: any("User:carol" in r for r in browser.texts("#acls tr.acl")),
                 why="carol's ACL")
    row = next(r for r in browser.driver.find_elements("css selector", "#acls tr.acl")
               if "User:carol" in r.text)
    row.find_element("css selector", "button").click()
    browser.wait(lambda: _alert(browser), why="the confirm dialog").accept()
    browser.wait_text("#write-result", "deleted 1 ACL(s)")
    left = admin.describe_acls(AclBindingFilter(
        ResourceType.TOPIC, "secret", ResourcePatternType.LITERAL, None, None,
        AclOperation.ANY, AclPermissionType.ANY)).result(15)
    assert sorted(a.principal for a in left) == ["User:alice", "User:bob"]


def _alert(browser: Browser) -> Any:
    try:
        return browser.driver.switch_to.alert
    except Exception:  # noqa: BLE001  NoAlertPresentException until it shows
        return None


@pytest.mark.parametrize("command", [
    ["console", "--bootstrap-server", "127.0.0.1:9", "--listen"],
    ["serve", "--data-dir", "/nonexistent/never", "--console-listen"]])
def test_a_non_loopback_listen_without_tls_is_refused(command):
    out = subprocess.run([sys.executable, "-m", "headwater.cli", *command,
                          f"0.0.0.0:{free_port()}"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "without TLS" in lines[0], out.stderr
    assert "--insecure-listen" in lines[0] or "--tls-cert" in lines[0]
