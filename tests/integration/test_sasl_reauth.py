"""SASL re-authentication (KIP-368, `connections.max.reauth.ms`): librdkafka
re-authenticates on its open connection before the session ends and keeps producing;
a connection that does not is closed at its next request after the session ended."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess, free_port
from tests.support.wire import RawClient

pytestmark = pytest.mark.timeout(120)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret";')
REAUTH_MS = 1500


@pytest.fixture
def reauth_broker(tmp_path: Path):
    port = free_port()
    broker = BrokerProcess(
        tmp_path / "data", "--override", f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        "--override", f"connections.max.reauth.ms={REAUTH_MS}", port=port)
    broker.start()
    yield broker
    broker.kill()


CONF = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "alice", "sasl.password": "alice-secret"}


def test_librdkafka_reauthenticates_and_keeps_producing(reauth_broker: BrokerProcess) -> None:
    conf = {**CONF, "bootstrap.servers": reauth_broker.bootstrap}
    admin = AdminClient(conf)
    admin.create_topics([NewTopic("reauth", 1, 1)])["reauth"].result(30)
    producer = Producer({**conf, "linger.ms": 5})
    errors, delivered = [], []
    deadline = time.monotonic() + 3 * REAUTH_MS / 1000 + 1
    i = 0
    while time.monotonic() < deadline:
        producer.produce("reauth", b"%d" % i, on_delivery=lambda err, msg: (
            errors.append(err) if err else delivered.append(msg.offset())))
        producer.poll(0.05)
        i += 1
    assert producer.flush(30) == 0
    assert errors == [] and len(delivered) == i
    assert reauth_broker.logs().count("re-authenticated") >= 2


def _plain_auth(raw: RawClient) -> object:
    raw.request(17, 1, {"mechanism": "PLAIN"})
    return raw.request(36, 2, {"auth_bytes": b"\x00alice\x00alice-secret"})


def test_a_connection_that_does_not_reauthenticate_is_closed(
        reauth_broker: BrokerProcess) -> None:
    raw = RawClient("127.0.0.1", reauth_broker.port)
    try:
        auth = _plain_auth(raw)
        assert int(auth.error_code) == 0
        assert int(auth.session_lifetime.total_seconds() * 1000) == REAUTH_MS
        meta = raw.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
        assert len(meta.brokers) == 1
        # re-authentication on the same connection renews the session
        assert int(_plain_auth(raw).error_code) == 0
        time.sleep(REAUTH_MS / 1000 + 0.3)  # the session's end is what is tested
        with pytest.raises((ConnectionError, OSError, struct.error)):
            raw.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": False})
    finally:
        raw.close()
