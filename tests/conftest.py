"""Shared fixtures: a real broker subprocess per test module, or per test when needed."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.engines import PostgresServer, VersityGateway
from tests.support.kafka_reference import KafkaReference

_names = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by the tests of a module (tests use distinct topic names)."""
    proc = BrokerProcess(tmp_path_factory.mktemp("broker") / "data").start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def kafka_ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaReference]:
    """One Apache Kafka 4.4.0 (KRaft, one node) per module, the reference beside
    headwater; fails, never skips, when `make kafka` has not fetched its jars."""
    proc = KafkaReference(tmp_path_factory.mktemp("kafka-ref") / "data").start()
    yield proc
    proc.stop()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator:
    """Start private brokers (restart / kill tests); all are stopped afterwards."""
    started: list[BrokerProcess] = []

    def make(*extra: str, data_dir: Path | None = None,
             nofile: int | None = None) -> BrokerProcess:
        proc = BrokerProcess(data_dir or tmp_path / f"data{len(started)}", *extra,
                             nofile=nofile)
        started.append(proc)
        return proc.start()

    yield make
    for proc in started:
        proc.kill()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    base = request.node.name.replace("[", "-").replace("]", "").replace("/", "-")
    return f"t-{base[:60]}-{next(_names)}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """A private PostgreSQL for the shared log's tests (one per module)."""
    server = PostgresServer(tmp_path_factory.mktemp("postgres")).start()
    yield server
    server.remove()


@pytest.fixture(scope="module")
def versitygw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VersityGateway]:
    """A private versitygw S3 server over a temp directory (one per module)."""
    server = VersityGateway(tmp_path_factory.mktemp("versitygw")).start()
    yield server
    server.kill()
