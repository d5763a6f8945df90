"""Shared fixtures: a real broker subprocess per test module, or per test when needed;
the Apache Kafka reference once per session (per xdist worker)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.broker_trio import BrokerTrio
from tests.support.browser import Browser
from tests.support.cluster import Cluster, start_cluster
from tests.support.engines import PostgresServer, VersityGateway, shared_broker_args
from tests.support.kafka_reference import KafkaReference, reference_fixture

_names = itertools.count()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--storage", choices=("local", "shared", "cluster"), default="local",
        help="the engine of the brokers the `broker` and `broker_factory` fixtures start: "
             "local segments (default), the shared log on a private PostgreSQL and "
             "versitygw, or three brokers on that shared log (each fixture's broker a "
             "cluster: tests/support/broker_trio.py); tests that build a BrokerProcess "
             "themselves stay local")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    storage = config.getoption("--storage")
    skips = {"local": {"cluster_campaign": "run by make test-shared"},
             "shared": {"local_storage": "local engine only"},
             "cluster": {"local_storage": "local engine only",
                         "one_node": "one node only"}}[storage]
    for item in items:
        if storage != "local" and _reference_side(item):
            item.add_marker(pytest.mark.skip(
                reason="one node only: the reference's side of a side-by-side test is the "
                       "same whatever engine headwater runs on"))
            continue
        for name, prefix in skips.items():
            marker = item.get_closest_marker(name)
            if marker is not None:
                why = marker.args[0] if marker.args else ""
                item.add_marker(pytest.mark.skip(reason=f"{prefix}: {why}"))
                break


def _reference_side(item: pytest.Item) -> bool:
    """A side-by-side test's run against Apache Kafka alone (a fixture parametrized
    "headwater" / "kafka", on its "kafka" value)."""
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(
        value == "kafka" for value in callspec.params.values())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """A failed test's report carries its brokers' warnings and errors: CI shows only
    the report, and the logs go with the machine."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed or call.when == "setup":
        return
    funcargs = getattr(item, "funcargs", {})
    procs = [p for p in (funcargs.get("broker"), *getattr(item, "hw_started", ()))
             if isinstance(p, (BrokerProcess, BrokerTrio))]
    lines = [line for p in procs for line in _warnings(p)]
    if lines:
        report.sections.append(("broker warnings", "\n".join(lines[-WARNINGS_SHOWN:])))


#: How many of a failed test's brokers' warning lines its report shows (the last ones).
WARNINGS_SHOWN = 40


def _warnings(proc: BrokerProcess | BrokerTrio) -> list[str]:
    singles = proc.brokers.items() if isinstance(proc, BrokerTrio) else [(0, proc)]
    out = []
    for node, single in singles:
        try:
            text = single.log_path.read_text(errors="replace")
        except OSError:
            continue
        out += [f"[{node}] {line}" if node else line for line in text.splitlines()
                if " WARNING " in line or " ERROR " in line or " CRITICAL " in line]
    return out


@pytest.fixture(scope="session")
def storage_args(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[Callable[[Path], list[str]]]:
    """`args(data_dir)`: the broker options of the selected engine (none for local; for
    shared, a database of the data dir's own on one PostgreSQL and versitygw per
    session, so a restarted broker finds its data again)."""
    if request.config.getoption("--storage") == "local":
        yield lambda _data_dir: []
        return
    # shared and cluster: one PostgreSQL and versitygw per session
    engines = tmp_path_factory.mktemp("engines")
    postgres = PostgresServer(engines / "pg").start()
    gateway = VersityGateway(engines / "gw").start()
    yield lambda data_dir: shared_broker_args(postgres, gateway, data_dir)
    gateway.kill()
    postgres.remove()


@pytest.fixture(scope="session")
def new_broker(request: pytest.FixtureRequest, storage_args: Callable[[Path], list[str]]
               ) -> Callable[..., BrokerProcess]:
    """`new_broker(data_dir, *extra, nofile=None)`: an unstarted broker of the selected
    engine; under --storage=cluster three brokers behind BrokerProcess's interface."""
    trio = request.config.getoption("--storage") == "cluster"

    def make(data_dir: Path, *extra: str, nofile: int | None = None) -> BrokerProcess:
        if trio:
            return cast(BrokerProcess, BrokerTrio(data_dir, storage_args(data_dir), *extra,
                                                  nofile=nofile))
        return BrokerProcess(data_dir, *storage_args(data_dir), *extra, nofile=nofile)
    return make


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory,
           new_broker: Callable[..., BrokerProcess]) -> Iterator[BrokerProcess]:
    """One broker shared by the tests of a module (tests use distinct topic names)."""
    proc = new_broker(tmp_path_factory.mktemp("broker") / "data").start()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def kafka_ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaReference]:
    """One Apache Kafka 4.4.0 (KRaft, one node) per session, i.e. per xdist worker: the
    reference beside headwater (a start costs 10-14 s); fails, never skips, when
    `make kafka` has not fetched its jars.

    Every module that uses it shares it with the modules run before it on the same
    worker, so a module names its topics, groups and transactional ids uniquely and
    inspects only its own (listings filtered by its own names, on Kafka's side). A module
    that changes cluster-wide state (features, ACLs, client quotas, SCRAM users, broker
    configs, listeners or an authorizer) overrides `kafka_ref` with a module-scoped
    reference of its own (`reference_fixture`).

    The group coordinator's periodic cleanup (offsets.retention.check.interval.ms, 10
    min) deletes empty groups without offsets: a module's own reference never lived that
    long, a session's does, and the cleanup would delete a module's empty group under its
    scenario (or write tombstones into __consumer_offsets while a test watches it), so it
    is put off past any session."""
    yield from reference_fixture(tmp_path_factory.mktemp("kafka-ref"),
                                 "offsets.retention.check.interval.ms=86400000")


@pytest.fixture
def broker_factory(request: pytest.FixtureRequest, tmp_path: Path,
                   new_broker: Callable[..., BrokerProcess]) -> Iterator:
    """Start private brokers (restart / kill tests); all are stopped afterwards."""
    started: list[BrokerProcess] = []
    request.node.hw_started = started  # a failed test's report shows their warnings

    def make(*extra: str, data_dir: Path | None = None,
             nofile: int | None = None) -> BrokerProcess:
        data_dir = data_dir or tmp_path / f"data{len(started)}"
        proc = new_broker(data_dir, *extra, nofile=nofile)
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


@pytest.fixture(scope="module")
def cluster(postgres: PostgresServer, versitygw: VersityGateway,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three brokers of their own on the shared log, 3 s leases (tests/support/cluster.py),
    one cluster per module."""
    yield from start_cluster(postgres, versitygw, tmp_path_factory.mktemp("cluster"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless Chromium (Debian's, `make chromium`) driven by Selenium, one per module:
    the web console's tests."""
    b = Browser()
    yield b
    b.quit()
