"""OAUTHBEARER's token validation and exchange (headwater/security/oauthbearer.py) with
tokens signed here. Which tokens Kafka 4.4 accepts was read off the reference broker
(tests/integration/test_oauthbearer.py runs the same ones against both): iat in the
future passes (jose4j has no iat window in Kafka's setup), exp before iat does not."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from kio.schema.errors import ErrorCode as E

from headwater.config import BrokerConfig, ConfigError
from headwater.security.listeners import Listener
from headwater.security.oauthbearer import (
    INVALID_TOKEN,
    KeySet,
    MalformedMessage,
    OAuthBearerServer,
    OAuthFailure,
    OAuthSettings,
    TokenError,
    UnknownKey,
    parse_client_first,
    validate,
)
from headwater.security.sasl import (
    SaslConfig,
    SaslFailure,
    SaslIllegalState,
    SaslSession,
)
from tests.support.oauth import AUDIENCE, ISSUER, OAuthServer, client_first, public_jwk

pytestmark = pytest.mark.timeout(60)

IDP = OAuthServer()  # signs tokens; its HTTP server is not started here
KEYS = KeySet.from_json(IDP.jwks())
SETTINGS = OAuthSettings(audience=(AUDIENCE,), issuer=ISSUER)
OTHER = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def now_ms() -> int:
    return int(time.time() * 1000)


def check(token: str, settings: OAuthSettings = SETTINGS, keys: KeySet = KEYS) -> Any:
    return validate(token, keys, settings, now_ms())


def test_a_valid_token_gives_its_subject_and_expiry() -> None:
    token = IDP.token("alice", lifetime_s=120, scope="kafka read")
    got = check(token)
    exp = jwt.decode(token, options={"verify_signature": False})["exp"]
    assert (got.principal, got.lifetime_ms, got.scopes) == ("alice", exp * 1000,
                                                            frozenset({"kafka read"}))


def test_ec_keys_verify_es256() -> None:
    assert check(IDP.token("alice", kid="ec1")).principal == "alice"


def test_a_token_without_kid_takes_the_first_key_of_its_type() -> None:
    now = int(time.time())
    token = jwt.encode({"sub": "bob", "aud": AUDIENCE, "iss": ISSUER, "iat": now,
                        "exp": now + 60}, IDP.keys["k1"], algorithm="RS256")
    assert check(token).principal == "bob"


@pytest.mark.parametrize(("claims", "reason"), [
    ({"lifetime_s": -3600}, "is on or after the Expiration Time"),
    ({"nbf": int(time.time()) + 600, "lifetime_s": 3600}, "The JWT is not yet valid"),
    ({"iat": int(time.time()) + 200, "lifetime_s": 100}, "cannot be before the Issued At"),
    ({"omit": ("exp",)}, "No Expiration Time (exp) claim present."),
    ({"omit": ("iat",)}, "No Issued At (iat) claim present."),
    ({"exp": str(int(time.time()) + 60)}, "not the expected type"),
    ({"audience": "other"}, "Audience (aud) claim ['other'] doesn't contain an acceptable"),
    ({"audience": None}, "No Audience (aud) claim present."),
    ({"issuer": "https://elsewhere"}, "Issuer (iss) claim value (https://elsewhere) doesn't"),
    ({"sub": None}, "sub value must be non-null"),
    ({"sub": ""}, "sub value must be non-empty"),
    ({"sub": "  "}, "sub value must not contain only whitespace"),
    ({"sub": 5}, "Could not extract the 'sub' claim"),
    ({"scope": ["a", " a"]}, "scope value must not contain duplicates - a already present"),
    ({"iat": -5}, "iat value must be null or non-negative"),
], ids=["expired", "not-yet-valid", "exp-before-iat", "no-exp", "no-iat", "exp-string",
        "wrong-audience", "no-audience", "wrong-issuer", "no-sub", "empty-sub", "blank-sub",
        "sub-number", "duplicate-scope", "negative-iat"])
def test_refused_tokens(claims: dict[str, Any], reason: str) -> None:
    with pytest.raises(TokenError) as refused:
        check(IDP.token(**claims))
    assert reason in str(refused.value)


@pytest.mark.parametrize("claims", [
    {"lifetime_s": -10, "iat": int(time.time()) - 60},  # expired, within the 30 s skew
    {"nbf": int(time.time()) + 10, "lifetime_s": 3600},  # not before, within the skew
    {"iat": int(time.time()) + 600, "lifetime_s": 3600},  # iat ahead: jose4j has no window
    {"audience": ["x", AUDIENCE]},
    {"scope": ["a", "b"]}, {"scope": 5},  # a scope claim neither string nor list: none
    {"sub": " alice "},  # trimmed, as Kafka's ClaimValidationUtils
], ids=["exp-within-skew", "nbf-within-skew", "iat-ahead", "audience-list", "scope-list",
        "scope-number", "sub-trimmed"])
def test_accepted_tokens(claims: dict[str, Any]) -> None:
    assert check(IDP.token(**claims)).principal == "alice"


def test_the_clock_skew_is_a_setting() -> None:
    token = IDP.token(lifetime_s=-10, iat=int(time.time()) - 60)
    with pytest.raises(TokenError, match="even when providing 5 seconds of leeway"):
        check(token, OAuthSettings((AUDIENCE,), ISSUER, clock_skew_s=5))


def test_unverified_audience_and_issuer_accept_any() -> None:
    anything = OAuthSettings()
    assert check(IDP.token(audience="other", issuer="https://x"), anything).principal == "alice"


def test_a_custom_subject_claim() -> None:
    settings = OAuthSettings((AUDIENCE,), ISSUER, sub_claim="client_id")
    assert check(IDP.token("alice", client_id="svc-orders"), settings).principal == "svc-orders"
    with pytest.raises(TokenError, match="client_id value must be non-null"):
        check(IDP.token("alice"), settings)


def test_a_bad_signature() -> None:
    with pytest.raises(TokenError, match="invalid signature") as refused:
        check(IDP.token(key=OTHER))  # kid k1, another key
    assert not isinstance(refused.value, UnknownKey)


def test_an_unknown_kid_names_it() -> None:
    with pytest.raises(UnknownKey) as refused:
        check(IDP.token(kid="k9", key=OTHER))
    assert refused.value.kid == "k9" and '"kid":"k9"' in str(refused.value)


@pytest.mark.parametrize("alg", ["none", "HS256"])
def test_unsigned_and_hmac_tokens_are_refused(alg: str) -> None:
    now = int(time.time())
    body = {"sub": "alice", "aud": AUDIENCE, "iss": ISSUER, "iat": now, "exp": now + 60}
    token = jwt.encode(body, None if alg == "none" else "secret" * 8, algorithm=alg,
                       headers={"kid": "k1"})
    with pytest.raises(TokenError, match="is not allowed"):
        check(token)


@pytest.mark.filterwarnings("ignore:The RSA key is 1024 bits")
def test_small_rsa_keys_are_refused() -> None:
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    keys = KeySet.from_json({"keys": [public_jwk(small, "small")]})
    with pytest.raises(TokenError, match="2048 bits or larger"):
        check(IDP.token(kid="small", key=small), keys=keys)


@pytest.mark.parametrize("token", ["abc.def", "", "a.b.c"])
def test_malformed_tokens(token: str) -> None:
    with pytest.raises(TokenError):
        check(token)


def test_unusable_jwks_entries_are_skipped() -> None:
    keys = KeySet.from_json({"keys": [{"kty": "oct", "k": "c2VjcmV0"}, {"kty": "RSA"},
                                      public_jwk(IDP.keys["k1"], "k1"), "junk"]})
    assert keys.kids == {"k1"}
    enc = {**public_jwk(IDP.keys["k1"], "k1"), "use": "enc"}
    with pytest.raises(UnknownKey):
        check(IDP.token(), keys=KeySet.from_json({"keys": [enc]}))


# ---- the client first message and the exchange ---------------------------------------

def test_client_first_message() -> None:
    first = parse_client_first(client_first("a.b.c", authzid="alice", traceId="x y"))
    assert (first.authzid, first.token, first.extensions) == ("alice", "a.b.c",
                                                              {"traceId": "x y"})
    assert parse_client_first(b"n,,\x01auth=bearer a.b.c=\x01\x01").token == "a.b.c="


@pytest.mark.parametrize("message", [
    b"hello", b"n,,\x01\x01", b"n,,\x01auth=Basic abc\x01\x01", b"n,,\x01auth=Bearer\x01\x01",
    b"n,,auth=Bearer a.b.c\x01\x01", b"n,,\x01auth=Bearer a.b.c\x01",
], ids=["garbage", "no-auth", "basic", "no-token", "no-separator", "unterminated"])
def test_malformed_client_first_messages(message: bytes) -> None:
    with pytest.raises(MalformedMessage):
        parse_client_first(message)


def validator(token: str) -> Any:
    return validate(token, KEYS, SETTINGS, now_ms())


def test_a_refused_token_is_answered_then_fails_on_the_clients_ack() -> None:
    server = OAuthBearerServer(validator)
    assert server.step(client_first(IDP.token(lifetime_s=-3600))) == INVALID_TOKEN
    assert "Expiration Time" in (server.refused or "")
    with pytest.raises(OAuthFailure, match='^{"status":"invalid_token"}$'):
        server.step(b"\x01")


def test_another_first_message_after_a_refusal_starts_over() -> None:
    server = OAuthBearerServer(validator)
    assert server.step(client_first(IDP.token(audience="other"))) == INVALID_TOKEN
    assert server.step(client_first(IDP.token("bob"))) == b""
    assert server.token is not None and server.token.principal == "bob"


def test_an_authzid_other_than_the_subject_fails() -> None:
    with pytest.raises(OAuthFailure, match=r"authorization id \(bob\) that is different from "
                                           r"the token's principal name \(alice\)"):
        OAuthBearerServer(validator).step(client_first(IDP.token("alice"), authzid="bob"))


# ---- the session (SaslConfig, SaslSession) on a JWKS file ----------------------------

LISTENER = Listener("SASL_PLAINTEXT", "SASL_PLAINTEXT", "127.0.0.1", 9094, "127.0.0.1", 9094)
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"


def oauth_config(jwks: Path, **extra: str) -> dict[str, str]:
    jwks.write_text(json.dumps(IDP.jwks()))
    return {"sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
                HANDLER,
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS,
            "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": ISSUER, **extra}


def session(tmp_path: Path, **extra: str) -> SaslSession:
    config = SaslConfig(BrokerConfig(oauth_config(tmp_path / "jwks.json", **extra)),
                        LISTENER, lambda _u, _m: None)
    config.load()
    return SaslSession(config)


def login(s: SaslSession, token: str) -> bytes:
    assert s.handshake("OAUTHBEARER") == 0
    return s.authenticate(client_first(token))


def test_the_session_lives_as_long_as_the_token(tmp_path: Path) -> None:
    s = session(tmp_path)
    try:
        assert login(s, IDP.token(lifetime_s=60)) == b""
        assert s.principal == "alice" and 55_000 < s.session_lifetime_ms <= 60_000
    finally:
        s.config.close()


def test_connections_max_reauth_ms_caps_it_per_mechanism(tmp_path: Path) -> None:
    s = session(tmp_path, **{
        "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms": "5000",
        "connections.max.reauth.ms": "100000"})
    try:
        login(s, IDP.token(lifetime_s=60))
        assert s.session_lifetime_ms == 5000
        assert s.config.reauth_ms("PLAIN") == 100000
    finally:
        s.config.close()


def test_a_token_within_the_skew_of_its_expiry_gets_no_session(tmp_path: Path) -> None:
    s = session(tmp_path)
    try:
        login(s, IDP.token(lifetime_s=-5, iat=int(time.time()) - 60))
        assert s.authenticated and s.session_lifetime_ms == 0 and s.expired
    finally:
        s.config.close()


def test_reauthentication_renews_the_session(tmp_path: Path) -> None:
    s = session(tmp_path)
    try:
        login(s, IDP.token("alice"))
        assert login(s, IDP.token("alice", lifetime_s=90)) == b""
        assert 85_000 < s.session_lifetime_ms <= 90_000
        # at most once a second (Kafka's KafkaChannel): a handshake out of place
        assert s.handshake("OAUTHBEARER") == E.illegal_sasl_state
        with pytest.raises(SaslIllegalState, match="received after successful auth"):
            s.authenticate(client_first(IDP.token("alice")))
        assert s.authenticated
    finally:
        s.config.close()


def test_reauthentication_keeps_the_principal(tmp_path: Path) -> None:
    s = session(tmp_path)
    try:
        login(s, IDP.token("alice"))
        with pytest.raises(SaslFailure, match="^Cannot change principals during "
                                              "re-authentication from User.alice: User.bob$"):
            login(s, IDP.token("bob"))
    finally:
        s.config.close()


def test_a_malformed_message_fails_with_kafkas_generic_text(tmp_path: Path) -> None:
    s = session(tmp_path)
    try:
        assert s.handshake("OAUTHBEARER") == 0
        with pytest.raises(SaslFailure, match="^Authentication failed during authentication "
                                              "due to invalid credentials with SASL mechanism "
                                              "OAUTHBEARER$"):
            s.authenticate(b"hello")
    finally:
        s.config.close()


@pytest.mark.parametrize(("drop", "extra", "message"), [
    ("listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config", {},
     "Could not find a 'KafkaServer' or 'sasl_plaintext.KafkaServer' entry"),
    ("listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class", {},
     "OAUTHBEARER needs listener.name.sasl_plaintext.oauthbearer.sasl.server.callback"),
    ("sasl.oauthbearer.jwks.endpoint.url", {},
     'requires "sasl.oauthbearer.jwks.endpoint.url" to be configured'),
    ("sasl.oauthbearer.expected.audience", {},
     'requires "sasl.oauthbearer.expected.audience" to be configured'),
    ("sasl.oauthbearer.expected.issuer", {},
     'requires "sasl.oauthbearer.expected.issuer" to be configured'),
    ("", {"sasl.oauthbearer.jwks.endpoint.url": "ftp://idp/jwks"},
     r"contains an invalid protocol \(ftp\)"),
    ("", {"sasl.oauthbearer.jwt.validator.class": "com.example.Mine"},
     "only org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator is served"),
])
def test_what_stops_the_broker(tmp_path: Path, drop: str, extra: dict[str, str],
                               message: str) -> None:
    values = {k: v for k, v in oauth_config(tmp_path / "jwks.json").items() if k != drop}
    with pytest.raises(ConfigError, match=message):
        SaslConfig(BrokerConfig({**values, **extra}), LISTENER, lambda _u, _m: None)


def test_unverified_audience_and_issuer_may_be_allowed(tmp_path: Path) -> None:
    values = {k: v for k, v in oauth_config(tmp_path / "jwks.json").items()
              if "expected" not in k}
    config = SaslConfig(BrokerConfig({**values,
                                      "sasl.oauthbearer.allow.unverified.audience": "true",
                                      "sasl.oauthbearer.allow.unverified.issuer": "true"}),
                        LISTENER, lambda _u, _m: None)
    assert config.oauth is not None
    assert config.oauth.settings == OAuthSettings()
