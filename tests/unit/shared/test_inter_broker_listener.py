"""The inter-broker listener: which of a broker's listeners the other brokers of a
cluster reach it on (Kafka's `inter.broker.listener.name`, else
`security.inter.broker.protocol`), and which address a client is told for each broker
(the one of the listener the client came in on)."""

from __future__ import annotations

import pytest

from headwater.config import BrokerConfig, ConfigError
from headwater.security import listeners
from headwater.shared.cluster import BrokerInfo, _endpoints, _endpoints_json

TWO = {"listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
       "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT"}


def inter(**extra: str) -> str:
    config = BrokerConfig({**TWO, **{k.replace("_", "."): v for k, v in extra.items()}})
    return listeners.inter_broker(config, listeners.parse(config)).name


def test_the_named_listener_else_the_protocols_else_the_first() -> None:
    assert inter() == "PLAINTEXT"
    assert inter(inter_broker_listener_name="internal") == "INTERNAL"
    assert inter(security_inter_broker_protocol="PLAINTEXT") == "PLAINTEXT"


def test_a_listener_that_does_not_exist_is_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match="inter.broker.listener.name=REPLICATION"):
        inter(inter_broker_listener_name="REPLICATION")


def test_a_client_is_told_each_brokers_address_on_its_own_listener() -> None:
    info = BrokerInfo(2, "10.0.0.2", 9093, None,
                      (("PLAINTEXT", "broker2.example", 9092), ("INTERNAL", "10.0.0.2", 9093)))
    assert info.address("PLAINTEXT") == ("broker2.example", 9092)
    assert info.address("INTERNAL") == ("10.0.0.2", 9093)
    # a listener it does not have (or a broker registered before endpoints): its
    # inter-broker address
    assert info.address("SSL") == ("10.0.0.2", 9093)
    assert BrokerInfo(3, "h", 1).address("PLAINTEXT") == ("h", 1)


def test_endpoints_round_trip_through_their_column() -> None:
    info = BrokerInfo(2, "h", 1, None, (("A", "::1", 5), ("B", "h", 6)))
    assert _endpoints(_endpoints_json(info)) == info.endpoints
    assert _endpoints("") == ()
