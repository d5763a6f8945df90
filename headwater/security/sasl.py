"""SASL on SASL_PLAINTEXT / SASL_SSL listeners: one session per connection.

SaslHandshake picks a mechanism among the listener's `sasl.enabled.mechanisms` (default
here PLAIN,SCRAM-SHA-256,SCRAM-SHA-512; Kafka's is GSSAPI, which headwater has not);
SaslAuthenticate carries the exchange. PLAIN users are the `user_<name>="<password>"`
entries of `listener.name.<listener>.plain.sasl.jaas.config` (or `sasl.jaas.config`), as
in a Kafka server.properties; SCRAM users are metadata records
(AlterUserScramCredentials, `kafka-configs --entity-type users`); OAUTHBEARER takes JWTs
signed by the listener's JWKS (oauthbearer.py, jwks.py). Until a session succeeds, a
connection may send only ApiVersions, SaslHandshake and SaslAuthenticate.

Re-authentication (KIP-368): SaslAuthenticate answers the session lifetime, Kafka's:
`connections.max.reauth.ms` (per listener and mechanism), and for OAUTHBEARER no longer
than the token lives; the client authenticates again on the same connection (a new
SaslHandshake with the same mechanism, for the same principal, at most once a second)
before it ends, and a connection whose session ended is closed at its next other
request, as in Kafka. A handshake Kafka would not take as a re-authentication (a session
that never ends, or within the second) is answered ILLEGAL_SASL_STATE, as KafkaApis does.
"""

from __future__ import annotations

import hmac
import logging
import re
import time
from collections.abc import Callable

from kio.schema.errors import ErrorCode as E

from ..config import BrokerConfig
from .jwks import BearerValidator
from .listeners import Listener, listener_config
from .oauthbearer import INVALID_TOKEN, MalformedMessage, OAuthBearerServer, OAuthFailure
from .oauthbearer import MECHANISM as OAUTHBEARER
from .scram import MECHANISMS, ScramCredential, ScramError, ScramServer

log = logging.getLogger("headwater.security")

DEFAULT_MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
PRE_AUTH_APIS = frozenset({17, 18, 36})  # SaslHandshake, ApiVersions, SaslAuthenticate
_JAAS_USER = re.compile(r'user_([^=\s]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


MIN_REAUTH_INTERVAL_S = 1.0  # KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS


class SaslFailure(Exception):
    """The exchange failed: answered with this message, then the connection is closed."""


class SaslIllegalState(Exception):
    """A request out of place on an authenticated connection: answered, nothing closed."""


def jaas_users(jaas: str | None) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in _JAAS_USER.finditer(jaas or "")}


class SaslConfig:
    """A SASL listener's mechanisms, PLAIN users and token validation (read once at
    start; `load` fetches an OAUTHBEARER listener's JWKS, `close` stops its refreshes)."""

    def __init__(self, config: BrokerConfig, listener: Listener,
                 scram_lookup: Callable[[str, str], ScramCredential | None]) -> None:
        enabled = listener_config(config, listener.name, "sasl.enabled.mechanisms")
        self.mechanisms = [m.strip().upper() for m in (enabled or DEFAULT_MECHANISMS).split(",")
                           if m.strip()]
        self.plain_users = jaas_users(
            listener_config(config, listener.name, "sasl.jaas.config", "PLAIN"))
        self.scram_lookup = scram_lookup
        #: connections.max.reauth.ms per mechanism (0: no limit), per listener as in Kafka.
        self.reauth_by_mechanism = {m: int(listener_config(
            config, listener.name, "connections.max.reauth.ms", m) or 0)
            for m in self.mechanisms}
        self.oauth = (BearerValidator.from_config(config, listener.name)
                      if OAUTHBEARER in self.mechanisms else None)

    def reauth_ms(self, mechanism: str) -> int:
        return self.reauth_by_mechanism.get(mechanism, 0)

    def load(self) -> None:
        """Blocking (the first JWKS fetch): run off the event loop. ConfigError if the
        JWKS cannot be had, which stops the broker as it stops Kafka."""
        if self.oauth is not None:
            self.oauth.load()

    def close(self) -> None:
        if self.oauth is not None:
            self.oauth.close()


class SaslSession:
    def __init__(self, config: SaslConfig) -> None:
        self.config = config
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._scram: ScramServer | None = None
        self._oauth: OAuthBearerServer | None = None
        #: time.monotonic() at which the session ends (None: never; see _begin_session).
        self.expires_at: float | None = None
        self._lifetime_ms = 0
        self._reauthenticating = False
        self._reauth_started: float | None = None
        self._plain_user: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and time.monotonic() >= self.expires_at

    def handshake(self, mechanism: str) -> int:
        """0 when the exchange starts, else the error code Kafka answers."""
        if self.authenticated and not self._reauthenticating:
            # KIP-368: Kafka re-authenticates only a session that ends, and at most once
            # a second; otherwise the handshake is a request out of place
            now = time.monotonic()
            if self.expires_at is None or (self._reauth_started is not None
                                           and now - self._reauth_started
                                           < MIN_REAUTH_INTERVAL_S):
                return E.illegal_sasl_state
            if mechanism != self.mechanism:  # the same mechanism again
                return E.unsupported_sasl_mechanism
            self._reauth_started = now
            self._reauthenticating = True
            self._begin_exchange(mechanism)
            return 0
        if self.mechanism is not None or mechanism not in self.config.mechanisms:
            return E.unsupported_sasl_mechanism
        if mechanism not in ("PLAIN", OAUTHBEARER) and mechanism not in MECHANISMS:
            return E.unsupported_sasl_mechanism
        self.mechanism = mechanism
        self._begin_exchange(mechanism)
        return 0

    def _begin_exchange(self, mechanism: str) -> None:
        if mechanism in MECHANISMS:
            self._scram = ScramServer(mechanism, self.config.scram_lookup)
        elif mechanism == OAUTHBEARER and self.config.oauth is not None:
            self._oauth = OAuthBearerServer(self.config.oauth)

    def authenticate(self, token: bytes) -> bytes:
        """The server's token; SaslFailure with Kafka's message when it fails."""
        if self.authenticated and not self._reauthenticating:
            raise SaslIllegalState("SaslAuthenticate request received after successful "
                                   "authentication")
        if self.mechanism is None:
            raise SaslFailure("Unexpected SaslAuthenticate request")
        previous = self.principal if self._reauthenticating else None
        expiry_ms: int | None = None  # when the credential ends (OAUTHBEARER's exp)
        if self.mechanism == "PLAIN":
            reply = self._plain(token)
            user: str | None = self._plain_user
        elif self.mechanism == OAUTHBEARER:
            reply = self._oauthbearer(token)
            bearer = self._oauth.token if self._oauth is not None else None
            user = bearer.principal if bearer is not None else None
            expiry_ms = bearer.lifetime_ms if bearer is not None else None
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
                                  f"User.{previous}: User.{user}")
            self.principal = user
            self._reauthenticating = False
            self._begin_session(expiry_ms)
        return reply

    def _begin_session(self, expiry_ms: int | None) -> None:
        """Kafka's session lifetime (ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs):
        connections.max.reauth.ms, the credential's remaining life, or the smaller of the
        two; never negative (a token within the clock skew of its exp gets 0 and its
        connection is closed at its next request)."""
        max_ms = self.config.reauth_ms(self.mechanism or "")
        if expiry_ms is None and max_ms <= 0:
            self._lifetime_ms, self.expires_at = 0, None
            return
        lifetime = max_ms
        if expiry_ms is not None:
            left = expiry_ms - int(time.time() * 1000)
            lifetime = max(0, min(left, max_ms) if max_ms > 0 else left)
        self._lifetime_ms = lifetime
        self.expires_at = time.monotonic() + lifetime / 1000

    @property
    def session_lifetime_ms(self) -> int:
        """What SaslAuthenticate v1+ tells the client (0: no re-authentication)."""
        return self._lifetime_ms if self.authenticated else 0

    def _oauthbearer(self, token: bytes) -> bytes:
        if self._oauth is None:
            raise SaslFailure("Unexpected SaslAuthenticate request")
        try:
            reply = self._oauth.step(token)
        except OAuthFailure as exc:
            raise SaslFailure(str(exc)) from None
        except MalformedMessage as exc:  # Kafka's SaslException: its generic text
            log.info("OAUTHBEARER: %s", exc)
            during = "re-authentication" if self._reauthenticating else "authentication"
            raise SaslFailure(f"Authentication failed during {during} due to invalid "
                              f"credentials with SASL mechanism {OAUTHBEARER}") from None
        if reply == INVALID_TOKEN:
            log.warning("OAUTHBEARER token refused: %s", self._oauth.refused)
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
        self._plain_user = user
        return b""
