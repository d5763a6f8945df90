"""The JWKS an OAUTHBEARER listener verifies with (headwater/security/jwks.py), fetched
from a local identity provider (tests/support/oauth.py) over HTTP: the first fetch, the
fetch a new kid triggers (once a minute per kid, as Kafka's RefreshingHttpsJwks), a
provider that is down at start or later."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from headwater.security.jwks import (
    MISSING_KID_RETRY_MS,
    JwksCache,
    JwksError,
    JwksSettings,
    RefreshingJwks,
    fetch,
    retry_waits,
)
from headwater.security.oauthbearer import KeySet
from tests.support.oauth import OAuthServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def idp() -> Iterator[OAuthServer]:
    server = OAuthServer().start()
    yield server
    server.stop()


def test_retry_waits_double_within_the_window() -> None:
    assert list(retry_waits(100, 10_000)) == [100, 200, 400, 800, 1600, 3200, 3700]
    assert list(retry_waits(100, 0)) == []


def test_a_missing_kid_asks_once_a_minute() -> None:
    cache = JwksCache()
    assert cache.should_fetch_for("k2", 1000)
    assert not cache.should_fetch_for("k2", 2000)
    assert cache.should_fetch_for("k3", 2000)
    assert cache.should_fetch_for("k2", 1000 + MISSING_KID_RETRY_MS)
    assert not cache.should_fetch_for(None, 0) and not cache.should_fetch_for("x" * 1001, 0)


def test_a_fetched_kid_is_forgotten_as_missing(idp: OAuthServer) -> None:
    cache = JwksCache()
    assert cache.should_fetch_for("k1", 0)
    cache.replace(fetch(idp.jwks_url))
    assert cache.keys.kids == {"k1", "ec1"}
    assert cache.should_fetch_for("k1", 1)


def test_a_new_kid_is_fetched_at_once(idp: OAuthServer) -> None:
    jwks = RefreshingJwks(JwksSettings(idp.jwks_url))
    jwks.load()
    jwks.start()
    try:
        assert idp.jwks_fetches == 1
        idp.publish("k2")
        jwks.unknown_kid("k2")
        deadline = time.monotonic() + 10
        while "k2" not in jwks.keys.kids:
            assert time.monotonic() < deadline, "k2 never fetched"
            time.sleep(0.02)
        fetches = idp.jwks_fetches
        jwks.unknown_kid("k9")
        jwks.unknown_kid("k9")  # asked again within the minute: no second fetch
        deadline = time.monotonic() + 10
        while idp.jwks_fetches < fetches + 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        jwks.unknown_kid("k9")
        assert idp.jwks_fetches == fetches + 1
    finally:
        jwks.stop()


def test_refreshes_keep_the_last_keys_when_the_provider_fails(idp: OAuthServer) -> None:
    jwks = RefreshingJwks(JwksSettings(idp.jwks_url, refresh_ms=50, backoff_ms=10,
                                       backoff_max_ms=30))
    jwks.load()
    idp.jwks_down = True
    jwks.start()
    try:
        deadline = time.monotonic() + 10
        while idp.jwks_fetches < 5:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert jwks.keys.kids == {"k1", "ec1"}
        idp.publish("k2")
        idp.jwks_down = False
        while "k2" not in jwks.keys.kids:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        jwks.stop()


def test_a_provider_down_at_start_is_an_error(idp: OAuthServer) -> None:
    idp.jwks_down = True
    jwks = RefreshingJwks(JwksSettings(idp.jwks_url, backoff_ms=10, backoff_max_ms=50))
    with pytest.raises(JwksError, match="503"):
        jwks.load()
    assert idp.jwks_fetches >= 3  # retried within the window
    with pytest.raises(JwksError, match="Connection refused"):
        fetch("http://127.0.0.1:9/jwks", timeout=5)


def test_a_jwks_file(tmp_path: Path) -> None:
    idp = OAuthServer()
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(idp.jwks()))
    assert fetch(path.as_uri()).kids == {"k1", "ec1"}
    path.write_text("not json")
    with pytest.raises(JwksError):
        fetch(path.as_uri())
    assert KeySet.from_json(b'{"keys": []}').keys == ()
