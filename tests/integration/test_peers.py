"""A broker's connections to the others (`shared/peers.py`) against a real broker's SASL
listener: authenticated once, then kept and shared by concurrent requests of one
purpose (answered by correlation id), one connection per purpose; a refused login is a
PeerAuthenticationError naming the setting; a dead peer fails the requests waiting on
it and the next request connects again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from headwater.shared.peers import Peers
from headwater.wire.client_security import ClientSecurity
from headwater.wire.peer_errors import ForwardError, PeerAuthenticationError
from tests.support.broker_process import BrokerProcess
from tests.support.ports import free_port

pytestmark = pytest.mark.timeout(120)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_broker="broker-secret";')
SETTING = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
API_VERSIONS, METADATA = 18, 3


def broker_at(tmp: Path, port: int) -> BrokerProcess:
    return BrokerProcess(tmp, "--override", f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
                         "--override", f"{SETTING}={JAAS}", port=port)


@pytest.fixture
def sasl_broker(tmp_path: Path):
    broker = broker_at(tmp_path / "data", free_port())
    broker.start()
    yield broker
    broker.kill()


def security(password: str) -> ClientSecurity:
    return ClientSecurity(protocol="SASL_PLAINTEXT", mechanism="PLAIN", username="broker",
                          password=password)


def test_requests_of_one_purpose_share_one_authenticated_connection(sasl_broker) -> None:
    async def scenario() -> tuple[list[int], int, int]:
        peers = Peers(security("broker-secret"), SETTING)
        try:
            answers = await asyncio.gather(*(
                peers.call("127.0.0.1", sasl_broker.port, METADATA, 12,
                           {"topics": [], "allow_auto_topic_creation": False,
                            "include_topic_authorized_operations": False}, 10)
                for _ in range(20)))
            one = peers.open_connections()
            await peers.call("127.0.0.1", sasl_broker.port, API_VERSIONS, 3,
                             {"client_software_name": "headwater",
                              "client_software_version": "1"}, 10, "another-purpose")
            return [len(a.brokers) for a in answers], one, peers.open_connections()
        finally:
            await peers.close()

    brokers, one, two = asyncio.run(scenario())
    assert brokers == [1] * 20  # every request answered (by correlation id)
    assert (one, two) == (1, 2)  # one connection per purpose


def test_a_refused_login_names_the_setting_holding_the_credentials(sasl_broker) -> None:
    async def scenario() -> None:
        peers = Peers(security("wrong"), SETTING)
        try:
            await peers.call("127.0.0.1", sasl_broker.port, API_VERSIONS, 3,
                             {"client_software_name": "h", "client_software_version": "1"}, 10)
        finally:
            await peers.close()

    with pytest.raises(PeerAuthenticationError, match=SETTING.replace(".", r"\.")):
        asyncio.run(scenario())


def test_a_peer_that_dies_fails_its_waiting_requests_and_is_reconnected(
        tmp_path: Path) -> None:
    port = free_port()
    first = broker_at(tmp_path / "one", port)
    first.start()

    async def scenario() -> tuple[str, int]:
        peers = Peers(security("broker-secret"), SETTING)
        try:
            await peers.call("127.0.0.1", port, API_VERSIONS, 3,
                             {"client_software_name": "h", "client_software_version": "1"}, 10)
            # a Metadata long enough to be waiting when the broker is killed is not
            # guaranteed; a request after the kill must fail, not hang
            first.kill()
            with pytest.raises(ForwardError):
                await peers.call("127.0.0.1", port, API_VERSIONS, 3,
                                 {"client_software_name": "h",
                                  "client_software_version": "1"}, 10)
            second = broker_at(tmp_path / "two", port)
            await asyncio.to_thread(second.start)
            try:
                answer = await peers.call("127.0.0.1", port, METADATA, 12, {
                    "topics": [], "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False}, 10)
            finally:
                second.kill()
            return "reconnected", len(answer.brokers)
        finally:
            await peers.close()

    assert asyncio.run(scenario()) == ("reconnected", 1)
