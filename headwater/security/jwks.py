"""The JWKS an OAUTHBEARER listener verifies tokens with (Kafka's RefreshingHttpsJwks):
fetched once at start (the broker does not start without it, as Kafka's does not), then
again every `sasl.oauthbearer.jwks.endpoint.refresh.ms`, and at once when a token names a
`kid` the set lacks (at most once a minute per kid, as Kafka), each fetch retried with
`retry.backoff.ms` doubling within `retry.backoff.max.ms`.

The fetches run on a thread of their own: a slow identity provider never holds the event
loop, and authentication only reads the last set fetched (the token naming a new key is
refused; the next one, once the set is fetched, passes, as in Kafka). `JwksCache` is the
bookkeeping without I/O; `RefreshingJwks` adds the thread and the fetch (http, https with
the system's trust store, or file:).
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .. import config_registry as registry
from ..config import BrokerConfig, ConfigError
from .listeners import listener_config
from .oauthbearer import MECHANISM, BearerToken, KeySet, OAuthSettings, UnknownKey, validate

log = logging.getLogger("headwater.security")

MISSING_KID_RETRY_MS = 60_000  # Kafka's MISSING_KEY_ID_CACHE_IN_FLIGHT_MS
MISSING_KIDS_KEPT = 16
MAX_KID_LENGTH = 1000
FETCH_TIMEOUT_S = 10.0


class JwksError(Exception):
    """The JWKS could not be fetched or read."""


@dataclass(frozen=True, slots=True)
class JwksSettings:
    url: str
    refresh_ms: int = 3_600_000
    backoff_ms: int = 100
    backoff_max_ms: int = 10_000

    @classmethod
    def from_config(cls, config: BrokerConfig, listener: str) -> JwksSettings:
        def get(key: str) -> str:
            return (listener_config(config, listener, key, MECHANISM)
                    or registry.broker_default(key) or "").strip()

        url = get("sasl.oauthbearer.jwks.endpoint.url")
        if not url:
            raise ConfigError(
                "The OAuth validator for the broker requires \"sasl.oauthbearer.jwks."
                "endpoint.url\" to be configured so that JWT signatures can be verified, "
                "but it was not set. Set \"sasl.oauthbearer.jwks.endpoint.url\" to the "
                f"OAuth/OIDC provider's JWKS endpoint URL for listener {listener}.")
        scheme = urllib.parse.urlsplit(url).scheme.lower()
        if scheme not in ("http", "https", "file"):
            raise ConfigError(
                f"The OAuth configuration option sasl.oauthbearer.jwks.endpoint.url contains "
                f"a URL ({url}) that contains an invalid protocol ({scheme or 'none'}); only "
                "\"http\", \"https\", and \"file\" protocol are supported")
        values = []
        for key in ("refresh.ms", "retry.backoff.ms", "retry.backoff.max.ms"):
            name = f"sasl.oauthbearer.jwks.endpoint.{key}"
            try:
                values.append(int(get(name)))
            except ValueError:
                raise ConfigError(f"{name}: not a number") from None
        if values[0] <= 0:
            raise ConfigError("sasl.oauthbearer.jwks.endpoint.refresh.ms must be positive")
        return cls(url, *values)


def retry_waits(backoff_ms: int, backoff_max_ms: int) -> Iterator[float]:
    """The waits (ms) between attempts, Kafka's Retry: doubling from `backoff_ms`, all
    attempts within `backoff_max_ms` of the first."""
    spent, attempt = 0.0, 0
    while True:
        wait = min(backoff_ms * 2.0 ** attempt, backoff_max_ms - spent)
        if wait <= 0:
            return
        yield wait
        spent += wait
        attempt += 1


class JwksCache:
    """The last key set and which unknown kids asked for a fetch when (no I/O)."""

    def __init__(self, keys: KeySet | None = None) -> None:
        self.keys = keys or KeySet()
        self._missing: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def should_fetch_for(self, kid: str | None, now_ms: int) -> bool:
        """A token named `kid`, which the set lacks: fetch now unless this kid asked less
        than a minute ago (or is absurdly long, or absent)."""
        if kid is None or len(kid) > MAX_KID_LENGTH:
            return False
        with self._lock:
            due = self._missing.get(kid)
            if due is not None and due > now_ms:
                self._missing.move_to_end(kid)
                return False
            self._missing[kid] = now_ms + MISSING_KID_RETRY_MS
            self._missing.move_to_end(kid)
            while len(self._missing) > MISSING_KIDS_KEPT:
                self._missing.popitem(last=False)
            return True

    def replace(self, keys: KeySet) -> None:
        with self._lock:
            for kid in keys.kids:
                self._missing.pop(kid, None)
            self.keys = keys


def fetch(url: str, timeout: float = FETCH_TIMEOUT_S) -> KeySet:
    """One GET of the JWKS (or read of a file: URL)."""
    try:
        if urllib.parse.urlsplit(url).scheme.lower() == "file":
            body = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path)
                        ).read_bytes()
        else:
            request = urllib.request.Request(url, headers={"Accept": "application/json"})
            with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310
                body = answer.read()
        return KeySet.from_json(body)
    except (OSError, ValueError) as exc:  # URLError, HTTPError, timeouts, bad JSON
        raise JwksError(f"{url}: {exc}") from None


class RefreshingJwks:
    """The key set of one JWKS URL, kept fresh by a daemon thread."""

    def __init__(self, settings: JwksSettings,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.cache = JwksCache()
        self._clock = clock
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    @property
    def keys(self) -> KeySet:
        return self.cache.keys

    def _fetch_with_retries(self) -> KeySet:
        waits = retry_waits(self.settings.backoff_ms, self.settings.backoff_max_ms)
        while True:
            try:
                return fetch(self.settings.url)
            except JwksError:
                wait = next(waits, None)
                if wait is None or self._stopping:
                    raise
                time.sleep(wait / 1000)

    def load(self) -> None:
        """The first fetch (blocking: run it off the event loop); JwksError if the JWKS
        cannot be had within the retry window."""
        self.cache.replace(self._fetch_with_retries())
        log.info("OAuth JWKS of %s: %d key(s) %s", self.settings.url, len(self.keys.keys),
                 sorted(self.keys.kids))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True,
                                         name=f"jwks-refresh {self.settings.url}")
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def unknown_kid(self, kid: str | None) -> None:
        """A token named a kid the set lacks: fetch at once (rate-limited per kid)."""
        if self.cache.should_fetch_for(kid, int(self._clock() * 1000)):
            log.info("OAuth JWKS refresh of %s: no key for kid %r", self.settings.url, kid)
            self._wake.set()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self.settings.refresh_ms / 1000)
            self._wake.clear()
            if self._stopping:
                return
            try:
                keys = self._fetch_with_retries()
            except JwksError as exc:
                log.warning("OAuth JWKS refresh of %s failed; keeping the %d key(s) "
                            "fetched before: %s", self.settings.url, len(self.keys.keys), exc)
                continue
            self.cache.replace(keys)


class BearerValidator:
    """A listener's token validation: its settings, its JWKS, the wall clock."""

    def __init__(self, settings: OAuthSettings, jwks: RefreshingJwks,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.jwks = jwks
        self._clock = clock

    @classmethod
    def from_config(cls, config: BrokerConfig, listener: str) -> BearerValidator:
        return cls(OAuthSettings.from_config(config, listener),
                   RefreshingJwks(JwksSettings.from_config(config, listener)))

    def __call__(self, token: str) -> BearerToken:
        try:
            return validate(token, self.jwks.keys, self.settings, int(self._clock() * 1000))
        except UnknownKey as exc:
            self.jwks.unknown_kid(exc.kid)
            raise

    def load(self) -> None:
        try:
            self.jwks.load()
        except JwksError as exc:
            raise ConfigError(f"could not fetch the OAuth JWKS (sasl.oauthbearer.jwks."
                              f"endpoint.url) {exc}") from None
        self.jwks.start()

    def close(self) -> None:
        self.jwks.stop()
