"""How this broker connects to the others: the client side of the inter-broker listener
(Kafka's `inter.broker.listener.name` / `security.inter.broker.protocol`), with Kafka's
settings. Its security protocol is the listener's (`listener.security.protocol.map`); a
SASL one authenticates with `sasl.mechanism.inter.broker.protocol` and the broker's own
`username`/`password` in `listener.name.<listener>.<mechanism>.sasl.jaas.config` (or
`sasl.jaas.config`), as a Kafka broker's login module gives them; a TLS one trusts the
listener's `ssl.truststore.*`, presents its `ssl.keystore.*` (for `ssl.client.auth`), and
checks the peer's host name unless `ssl.endpoint.identification.algorithm` is empty.
"""

from __future__ import annotations

from ..config import BrokerConfig, ConfigError
from ..wire.client_properties import jaas_options
from ..wire.client_security import ClientSecurity
from .listeners import Listener, listener_config
from .scram import MECHANISMS as SCRAM_MECHANISMS

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def credentials_setting(listener: Listener, mechanism: str) -> str:
    """The setting that holds the broker's own inter-broker credentials (for errors)."""
    return f"listener.name.{listener.name.lower()}.{mechanism.lower()}.sasl.jaas.config"


def own_scram_user(client: ClientSecurity) -> tuple[str, str, str] | None:
    """The broker's own SCRAM user (name, mechanism, password) when brokers log in to
    each other with SCRAM: the controller writes its credential when the metadata has
    none (headwater's `kafka-storage format --add-scram`: a cluster's first brokers
    could not otherwise log in to each other, and no password goes on a command line)."""
    if client.protocol.startswith("SASL_") and client.mechanism in SCRAM_MECHANISMS:
        return client.username, client.mechanism, client.password
    return None


def inter_broker_client(config: BrokerConfig, listener: Listener) -> ClientSecurity:
    """How to open a connection to another broker's inter-broker listener; ConfigError
    naming the setting when it cannot be done."""
    protocol = listener.protocol
    sasl = protocol.startswith("SASL_")
    tls = protocol in ("SSL", "SASL_SSL")
    mechanism = config.get_str("sasl.mechanism.inter.broker.protocol").upper()
    username = password = ""
    if sasl:
        if mechanism not in MECHANISMS:
            raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mechanism}: the "
                              f"inter-broker listener {listener.name} is {protocol}; "
                              "headwater's brokers authenticate to each other with "
                              + ", ".join(MECHANISMS))
        options = jaas_options(listener_config(config, listener.name, "sasl.jaas.config",
                                               mechanism) or "")
        username, password = options.get("username", ""), options.get("password", "")
        if not username or not password:
            raise ConfigError(f"{credentials_setting(listener, mechanism)}: the inter-broker "
                              f"listener {listener.name} ({protocol}) needs this broker's "
                              'own username="..." password="..." in its login module')
    if not tls:
        return ClientSecurity(protocol=protocol, mechanism=mechanism, username=username,
                              password=password)

    def get(key: str) -> str | None:
        return listener_config(config, listener.name, key)

    return ClientSecurity(
        protocol=protocol, mechanism=mechanism, username=username, password=password,
        ca_location=get("ssl.truststore.location"),
        ca_pem=get("ssl.truststore.certificates"),
        certificate_location=get("ssl.keystore.location"),
        certificate_pem=None if get("ssl.keystore.location") else get(
            "ssl.keystore.certificate.chain"),
        key_pem=None if get("ssl.keystore.location") else get("ssl.keystore.key"),
        key_password=get("ssl.key.password") or get("ssl.keystore.password"),
        check_hostname=_identification(config, listener) != "")


def _identification(config: BrokerConfig, listener: Listener) -> str:
    """`ssl.endpoint.identification.algorithm`, the listener's own first; set empty (not
    unset) it turns host-name checking off, as in Kafka."""
    key = "ssl.endpoint.identification.algorithm"
    for name in (f"listener.name.{listener.name.lower()}.{key}", key):
        found = config.layers(name)
        if found:
            return found[0][1]
    return "https"
