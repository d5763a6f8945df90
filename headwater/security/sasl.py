"""SASL on SASL_PLAINTEXT / SASL_SSL listeners: one session per connection.

SaslHandshake picks a mechanism among the listener's `sasl.enabled.mechanisms` (default
here PLAIN,SCRAM-SHA-256,SCRAM-SHA-512; Kafka's is GSSAPI, which headwater has not);
SaslAuthenticate carries the exchange. PLAIN users are the `user_<name>="<password>"`
entries of `listener.name.<listener>.plain.sasl.jaas.config` (or `sasl.jaas.config`), as
in a Kafka server.properties; SCRAM users are metadata records
(AlterUserScramCredentials, `kafka-configs --entity-type users`). Until a session
succeeds, a connection may send only ApiVersions, SaslHandshake and SaslAuthenticate.

Re-authentication (KIP-368): with `connections.max.reauth.ms` set, SaslAuthenticate
answers the session lifetime; the client authenticates again on the same connection
(a new SaslHandshake with the same mechanism, for the same principal) before it ends,
and a connection whose session ended is closed at its next other request, as in Kafka.
"""

from __future__ import annotations

import hmac
import re
import time
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
        reauth = listener_config(config, listener.name, "connections.max.reauth.ms")
        #: connections.max.reauth.ms (0: sessions never end), per listener as in Kafka.
        self.reauth_ms = int(reauth) if reauth else 0


class SaslSession:
    def __init__(self, config: SaslConfig) -> None:
        self.config = config
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._scram: ScramServer | None = None
        #: time.monotonic() at which the session ends (None: never; see reauth_ms).
        self.expires_at: float | None = None
        self._reauthenticating = False
        self._plain_user: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and time.monotonic() >= self.expires_at

    def handshake(self, mechanism: str) -> bool:
        if self.authenticated and not self._reauthenticating:
            if mechanism != self.mechanism:  # KIP-368: the same mechanism again
                return False
            self._reauthenticating = True
            if mechanism in MECHANISMS:
                self._scram = ScramServer(mechanism, self.config.scram_lookup)
            return True
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
        if self.mechanism is None or (self.authenticated and not self._reauthenticating):
            raise SaslFailure("Unexpected SaslAuthenticate request")
        previous = self.principal if self._reauthenticating else None
        if self.mechanism == "PLAIN":
            reply = self._plain(token)
            user: str | None = self._plain_user
        else:
            assert self._scram is not None
            try:
                reply = self._scram.step(token)
            except ScramError as exc:
                raise SaslFailure(str(exc)) from None
            user = self._scram.username
        if user is not None:
            if previous is not None and user != previous:
                raise SaslFailure(f"Cannot change principals during re-authentication from "
                                  f"User:{previous}: User:{user}")
            self.principal = user
            self._reauthenticating = False
            if self.config.reauth_ms > 0:
                self.expires_at = time.monotonic() + self.config.reauth_ms / 1000
        return reply

    @property
    def session_lifetime_ms(self) -> int:
        """What SaslAuthenticate v1+ tells the client (0: no re-authentication)."""
        return self.config.reauth_ms if self.authenticated else 0

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
        self._plain_user = user
        return b""
