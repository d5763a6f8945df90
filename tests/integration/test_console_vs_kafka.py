"""The web console against Apache Kafka 4.4.0 (`kafka_ref`): it speaks only the Kafka
protocol, so the overview and the topic page show Kafka's cluster the same way."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.console_process import ConsoleProcess
from tests.support.kafka_reference import KafkaReference

pytestmark = pytest.mark.timeout(150)

# The session's reference is shared with other modules: a topic name of this module's own.
TOPIC = f"orders-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def kafka_console(kafka_ref: KafkaReference, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[ConsoleProcess]:
    admin = AdminClient({"bootstrap.servers": kafka_ref.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    p = Producer({"bootstrap.servers": kafka_ref.bootstrap})
    for i in range(7):
        p.produce(TOPIC, f"order {i}".encode(), key=f"k{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    proc = ConsoleProcess(kafka_ref.bootstrap,
                          tmp_path_factory.mktemp("console") / "console.log").start()
    yield proc
    proc.stop()


def test_overview_and_topic_page_against_kafka(browser, kafka_console, kafka_ref):
    browser.get(kafka_console.url + "/")
    browser.wait_text(f"#topics tr[data-topic='{TOPIC}'] .records", "7", timeout=30)
    assert browser.text(f"#topics tr[data-topic='{TOPIC}'] .partitions") == "2"
    assert browser.texts("#brokers tbody tr td:nth-child(2)") == [kafka_ref.bootstrap]
    browser.get(kafka_console.url + f"/topics/{TOPIC}")
    browser.wait_text("#partitions tr[data-partition='0'] .latest", "4", timeout=30)
    assert browser.text("#partitions tr[data-partition='1'] .latest") == "3"
    assert int(browser.js("return document.querySelector(\"#partitions tr[data-partition='0']"
                          " .size\").dataset.bytes")) > 0
    assert browser.text("#configs tr[data-config='cleanup.policy'] .value") == "delete"
    browser.get(kafka_console.url + f"/topics/{TOPIC}?partition=1&offset=1")
    browser.wait(lambda: browser.texts("#records .offset") == ["1", "2"], why="offsets 1-2")
    assert browser.texts("#records .value") == ["order 3", "order 5"]
