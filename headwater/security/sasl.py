"""SASL on SASL_PLAINTEXT / SASL_SSL listeners: one session per connection.

SaslHandshake picks a mechanism among the listener's `sasl.enabled.mechanisms` (default
here PLAIN,SCRAM-SHA-256,SCRAM-SHA-512; Kafka's is GSSAPI, which headwater has not);
SaslAuthenticate carries the exchange. PLAIN users are the `user_<name>="<password>"`
entries of `listener.name.<listener>.plain.sasl.jaas.config` (or `sasl.jaas.config`), as
in a Kafka server.properties; SCRAM users are metadata records
(AlterUserScramCredentials, `kafka-configs --entity-type users`). Until a session
succeeds, a connection may send only ApiVersions, SaslHandshake and SaslAuthenticate.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable

from ..config import BrokerConfig
from .listeners import Listener, listener_config
from .scram import MECHANISMS, ScramCredential, ScramError, ScramServer

DEFAULT_MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
PRE_AUTH_APIS = frozenset({17, 18, 36})  # SaslHandshake, ApiVersions, SaslAuthenticate
_JAAS_USER = re.compile(r'user_([^=\s]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class SaslFailure(Exception):
    pass


def jaas_users(jaas: str | None) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in _JAAS_USER.finditer(jaas or "")}


class SaslConfig:
    """A SASL listener's mechanisms and PLAIN users (read once at start)."""

    def __init__(self, config: BrokerConfig, listener: Listener,
                 scram_lookup: Callable[[str, str], ScramCredential | None]) -> None:
        enabled = listener_config(config, listener.name, "sasl.enabled.mechanisms")
        self.mechanisms = [m.strip().upper() for m in (enabled or DEFAULT_MECHANISMS).split(",")
                           if m.strip()]
        self.plain_users = jaas_users(
            listener_config(config, listener.name, "sasl.jaas.config", "PLAIN"))
        self.scram_lookup = scram_lookup


class SaslSession:
    def __init__(self, config: SaslConfig) -> None:
        self.config = config
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._scram: ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def handshake(self, mechanism: str) -> bool:
        if self.mechanism is not None or mechanism not in self.config.mechanisms:
            return False
        if mechanism != "PLAIN" and mechanism not in MECHANISMS:
            return False
        self.mechanism = mechanism
        if mechanism in MECHANISMS:
            self._scram = ScramServer(mechanism, self.config.scram_lookup)
        return True

    def authenticate(self, token: bytes) -> bytes:
        """The server's token; SaslFailure with Kafka's message when it fails."""
        if self.mechanism is None or self.authenticated:
            raise SaslFailure("Unexpected SaslAuthenticate request")
        if self.mechanism == "PLAIN":
            return self._plain(token)
        assert self._scram is not None
        try:
            reply = self._scram.step(token)
        except ScramError as exc:
            raise SaslFailure(str(exc)) from None
        if self._scram.username is not None:
            self.principal = self._scram.username
        return reply

    def _plain(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailure("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user, password = (p.decode(errors="replace") for p in parts)
        if not user:
            raise SaslFailure("Authentication failed: username not specified")
        if authzid and authzid != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id "
                              "that is different from username")
        expected = self.config.plain_users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslFailure("Authentication failed: Invalid username or password")
        self.principal = user
        return b""
