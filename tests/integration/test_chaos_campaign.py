"""The short, seeded fault campaign of `make test-shared` (tests/chaos/campaign.py): the
workloads all at once against three brokers while brokers are killed -9 and paused past
their leases, PostgreSQL is restarted abruptly, the object store is killed, and a
broker's connections to either go slow, are reset or blackhole (Toxiproxy), then the
checker over the whole history; then the same against brokers built with a planted bug,
which the checker must catch. `make chaos` runs the long campaign, `make chaos-short`
this module alone, and make test-shared runs it last, alone: beside another worker (in CI
on 2026-11-28) it found no anomaly but a reader did not finish in time. Marked `chaos`, so
the parallel runs leave it out."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from headwater.faults import ACK_BEFORE_COMMIT_KEY
from tests.chaos.campaign import run
from tests.chaos.faults import KINDS
from tests.support.cluster import Cluster, start_cluster
from tests.support.engines import PostgresServer, VersityGateway
from tests.support.toxiproxy import Toxiproxy

pytestmark = [pytest.mark.timeout(900), pytest.mark.chaos, pytest.mark.cluster_campaign(
    "three brokers of its own under faults")]

SEED = int(os.environ.get("HEADWATER_CHAOS_SEED", "33"))
DURATION = float(os.environ.get("HEADWATER_CHAOS_SECONDS", "75"))
PLANTED_SEED, PLANTED_DURATION = 33, 40.0


@pytest.fixture
def proxies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toxiproxy]:
    """Toxiproxy between each broker and PostgreSQL and the object store."""
    server = Toxiproxy(tmp_path_factory.mktemp("toxiproxy")).start()
    yield server
    server.kill()


@pytest.fixture
def chaos_cluster(postgres: PostgresServer, versitygw: VersityGateway, proxies: Toxiproxy,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from start_cluster(postgres, versitygw, tmp_path_factory.mktemp("chaos"),
                             proxies=proxies)


@pytest.fixture
def planted_cluster(postgres: PostgresServer, versitygw: VersityGateway, proxies: Toxiproxy,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three brokers built with a bug: Produce acknowledged before its commit window
    lands (faults.py, `produce.ack-before-commit`)."""
    yield from start_cluster(postgres, versitygw, tmp_path_factory.mktemp("planted"),
                             overrides=(f"{ACK_BEFORE_COMMIT_KEY}=true",), proxies=proxies)


def test_a_short_seeded_campaign_finds_no_anomaly(chaos_cluster: Cluster) -> None:
    outcome = run(chaos_cluster, SEED, DURATION)
    print(outcome.summary())
    assert set(outcome.faults) == set(KINDS), f"not every kind of fault: {outcome.faults}"
    assert not outcome.report.anomalies, outcome.report.render()
    assert not outcome.errors, outcome.summary()
    assert outcome.report.counts.get("Read", 0) > 0


def test_the_checker_catches_a_planted_bug(planted_cluster: Cluster) -> None:
    """A green campaign means something: the same workloads and faults against brokers
    that acknowledge writes before they are durable, and the checker reports the
    acknowledged writes that a kill -9 or an engine outage then lost."""
    outcome = run(planted_cluster, PLANTED_SEED, PLANTED_DURATION, settle=20)
    print(outcome.summary())
    found = outcome.report.by_kind()
    assert found.keys() & {"lost", "moved"}, outcome.summary()
