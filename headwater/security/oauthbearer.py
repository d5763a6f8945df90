"""SASL/OAUTHBEARER (RFC 7628, KIP-255/768) on the server, sans-IO: the client's first
message, the JWT's validation against a key set at a given time, and one connection's
exchange, as a Kafka 4.4 broker with `OAuthBearerValidatorCallbackHandler` does them.

The checks are those of Kafka's BrokerJwtValidator over jose4j: a signature by the JWKS
key its header names (`kid`, else the first key fitting its `alg`), `exp` and `iat`
present, `exp` not passed and `nbf` reached (both with `sasl.oauthbearer.clock.skew.
seconds`), `exp` not before `iat` or `nbf`, the expected audience and issuer, then the
subject claim (`sasl.oauthbearer.sub.claim.name`, trimmed: the principal `User:<sub>`)
and the scope claim. A refused token is answered `{"status":"invalid_token"}` and the
exchange fails on the client's `\\x01`; why it was refused stays in the broker's log.
pyjwt verifies the signatures (cryptography underneath), nothing else: the claims are
checked here at the caller's `now_ms`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from .. import config_registry as registry
from ..config import BrokerConfig, ConfigError
from .listeners import listener_config

MECHANISM = "OAUTHBEARER"
INVALID_TOKEN = b'{"status":"invalid_token"}'
VALIDATOR_HANDLER = ("org.apache.kafka.common.security.oauthbearer."
                     "OAuthBearerValidatorCallbackHandler")
# Kafka 4.4's DefaultJwtValidator is BrokerJwtValidator on a broker.
JWT_VALIDATORS = ("org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
                  "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator")
# The key types each JWS algorithm verifies with (RSA keys of 2048 bits at least, as
# jose4j requires); HMAC and "none" are never accepted.
_KEY_TYPES = {**{f"{p}{n}": "RSA" for p in ("RS", "PS") for n in (256, 384, 512)},
              **{f"ES{n}": "EC" for n in (256, 384, 512)}, "EdDSA": "OKP"}
MIN_RSA_BITS = 2048


class TokenError(Exception):
    """Why a token is refused (for the broker's log; the client sees invalid_token)."""


class UnknownKey(TokenError):
    """No key of the set verifies this token's `kid` and `alg`: the set may be stale."""

    def __init__(self, kid: str | None, header: Mapping[str, Any]) -> None:
        super().__init__("Unable to find a suitable verification key for JWS w/ header "
                         f"{json.dumps(header, separators=(',', ':'))}")
        self.kid = kid


class MalformedMessage(ValueError):
    """A client first message Kafka cannot parse (a SaslException: the client gets
    Kafka's generic 'invalid credentials' text, not this one)."""


class OAuthFailure(Exception):
    """The exchange fails with this message for the client (SaslAuthenticationException)."""


# ---- the key set ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VerificationKey:
    kid: str | None
    kty: str
    alg: str | None
    use: str | None
    key_ops: tuple[str, ...] | None
    key: Any  # a cryptography public key


class KeySet:
    """The usable verification keys of a JWKS, in its order (immutable: a refresh swaps
    the whole set). Keys pyjwt cannot load (unknown kty, private parts only, ...) are
    left out, as jose4j ignores what it cannot parse."""

    def __init__(self, keys: Iterable[VerificationKey] = ()) -> None:
        self.keys = tuple(keys)

    @classmethod
    def from_json(cls, document: bytes | str | Mapping[str, Any]) -> KeySet:
        data = json.loads(document) if isinstance(document, bytes | str) else document
        if not isinstance(data, Mapping) or not isinstance(data.get("keys"), list):
            raise ValueError("not a JWKS: no \"keys\" array")
        out = []
        for jwk in data["keys"]:
            if not isinstance(jwk, Mapping) or jwk.get("kty") not in ("RSA", "EC", "OKP"):
                continue
            try:
                loaded = jwt.PyJWK(dict(jwk))
            except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError, KeyError):
                continue
            ops = jwk.get("key_ops")
            out.append(VerificationKey(
                jwk.get("kid"), str(jwk["kty"]), jwk.get("alg"), jwk.get("use"),
                tuple(ops) if isinstance(ops, list) else None, loaded.key))
        return cls(out)

    @property
    def kids(self) -> frozenset[str]:
        return frozenset(k.kid for k in self.keys if k.kid is not None)

    def select(self, alg: str, kid: str | None) -> VerificationKey | None:
        """The first key that may verify `alg` and has this `kid` (jose4j's
        VerificationJwkSelector: kid, key type, use and key_ops, alg when the key says)."""
        kty = _KEY_TYPES.get(alg)
        for k in self.keys:
            if (kty == k.kty and (kid is None or k.kid == kid)
                    and k.use in (None, "sig") and (k.key_ops is None or "verify" in k.key_ops)
                    and k.alg in (None, alg)):
                return k
        return None


# ---- validation -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OAuthSettings:
    """A listener's token checks (Kafka's `sasl.oauthbearer.*` keys)."""

    audience: tuple[str, ...] = ()  # empty: not checked (allow.unverified.audience)
    issuer: str | None = None  # None: not checked (allow.unverified.issuer)
    clock_skew_s: int = 30
    sub_claim: str = "sub"
    scope_claim: str = "scope"

    @classmethod
    def from_config(cls, config: BrokerConfig, listener: str) -> OAuthSettings:
        """The settings of `listener` with Kafka's lookup (listener.name.<l>.oauthbearer.
        <key>, listener.name.<l>.<key>, <key>) and Kafka 4.4's start-time refusals."""
        def get(key: str) -> str:
            return (listener_config(config, listener, key, MECHANISM)
                    or registry.broker_default(key) or "").strip()

        _require_kafka_validator(config, listener)
        audience = tuple(a.strip() for a in get("sasl.oauthbearer.expected.audience")
                         .split(",") if a.strip())
        issuer = get("sasl.oauthbearer.expected.issuer") or None
        for value, key, what, hint in (
                (audience, "audience", "audience (\"aud\")",
                 "the audience(s) that identify this cluster"),
                (issuer, "issuer", "issuer (\"iss\")",
                 "the issuer URL of the OAuth/OIDC provider that signs the tokens")):
            allow = f"sasl.oauthbearer.allow.unverified.{key}"
            if not value and get(allow).lower() != "true":
                expected = f"sasl.oauthbearer.expected.{key}"
                raise ConfigError(
                    f"The OAuth validator for the broker requires \"{expected}\" to be "
                    f"configured so that the token's {what} claim can be verified, but it "
                    f"was not set. Set \"{expected}\" to {hint}, or set \"{allow}\" to "
                    f"true to accept tokens regardless of their {key}.")
        try:
            skew = int(get("sasl.oauthbearer.clock.skew.seconds"))
        except ValueError:
            raise ConfigError("sasl.oauthbearer.clock.skew.seconds: not an integer") from None
        return cls(audience, issuer, skew, get("sasl.oauthbearer.sub.claim.name"),
                   get("sasl.oauthbearer.scope.claim.name"))


def _require_kafka_validator(config: BrokerConfig, listener: str) -> None:
    """What a Kafka broker needs before it serves OAUTHBEARER with signed tokens: a JAAS
    entry for the mechanism and the validator callback handler (without it Kafka falls
    back to its unsecured, unsigned-token handler, which headwater does not serve)."""
    if not listener_config(config, listener, "sasl.jaas.config", MECHANISM):
        raise ConfigError(
            f"Could not find a 'KafkaServer' or '{listener.lower()}.KafkaServer' entry in "
            f"the JAAS configuration: set listener.name.{listener.lower()}.oauthbearer."
            "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer."
            "OAuthBearerLoginModule required ;")
    handler = listener_config(config, listener, "sasl.server.callback.handler.class",
                              MECHANISM)
    if (handler or "").strip() != VALIDATOR_HANDLER:
        raise ConfigError(
            f"listener {listener}: OAUTHBEARER needs listener.name.{listener.lower()}."
            f"oauthbearer.sasl.server.callback.handler.class={VALIDATOR_HANDLER} "
            f"(found {handler or 'none'}: Kafka's unsecured default handler and custom "
            "handlers are not served)")
    validator = (listener_config(config, listener, "sasl.oauthbearer.jwt.validator.class",
                                 MECHANISM) or JWT_VALIDATORS[0]).strip()
    if validator not in JWT_VALIDATORS:
        raise ConfigError(f"sasl.oauthbearer.jwt.validator.class={validator}: only "
                          f"{JWT_VALIDATORS[0]} is served")


@dataclass(frozen=True, slots=True)
class BearerToken:
    """A validated token (Kafka's BasicOAuthBearerToken)."""

    principal: str
    scopes: frozenset[str]
    lifetime_ms: int  # exp, in ms since the epoch
    start_ms: int | None  # iat


def _number(claims: Mapping[str, Any], name: str) -> int | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenError(f"The value of the '{name}' claim is not the expected type "
                         f"({value!r} - not a numeric date)")
    return int(value)  # jose4j's NumericDate: whole seconds, truncated


def _check_times(claims: Mapping[str, Any], skew: int, now_s: int) -> None:
    """jose4j's NumericDateValidator with exp and iat required (no iat window)."""
    exp, iat, nbf = (_number(claims, n) for n in ("exp", "iat", "nbf"))
    if exp is None:
        raise TokenError("No Expiration Time (exp) claim present.")
    if iat is None:
        raise TokenError("No Issued At (iat) claim present.")
    leeway = f" (even when providing {skew} seconds of leeway to account for clock skew)."
    if now_s - skew >= exp:
        raise TokenError(f"The JWT is no longer valid - the evaluation time {now_s} is on "
                         f"or after the Expiration Time (exp={exp}) claim value{leeway}")
    for name, value in (("Issued At (iat", iat), ("Not Before (nbf", nbf)):
        if value is not None and exp < value:
            raise TokenError(f"The Expiration Time (exp={exp}) claim value cannot be "
                             f"before the {name}={value}) claim value.")
    if nbf is not None and now_s + skew < nbf:
        raise TokenError(f"The JWT is not yet valid as the evaluation time {now_s} is "
                         f"before the Not Before (nbf={nbf}) claim time{leeway}")


def _check_audience_issuer(claims: Mapping[str, Any], settings: OAuthSettings) -> None:
    if settings.audience:
        aud = claims.get("aud")
        if aud is None:
            raise TokenError("No Audience (aud) claim present.")
        auds = [aud] if isinstance(aud, str) else aud
        if not isinstance(auds, list) or not all(isinstance(a, str) for a in auds):
            raise TokenError("The value of the 'aud' claim is not the expected type")
        if not set(auds) & set(settings.audience):
            raise TokenError(f"Audience (aud) claim {auds} doesn't contain an acceptable "
                             f"identifier. Expected {','.join(settings.audience)} as an aud "
                             "value.")
    if settings.issuer is not None:
        iss = claims.get("iss")
        if iss is None:
            raise TokenError("No Issuer (iss) claim present.")
        if iss != settings.issuer:
            raise TokenError(f"Issuer (iss) claim value ({iss}) doesn't match expected "
                             f"value of {settings.issuer}")


def _claim_string(name: str, value: Any) -> str:
    """Kafka's ClaimValidationUtils.validateString: present, not blank, trimmed."""
    if value is None:
        raise TokenError(f"{name} value must be non-null")
    if not isinstance(value, str):
        raise TokenError(f"Could not extract the '{name}' claim from the access token")
    if not value:
        raise TokenError(f"{name} value must be non-empty")
    if not value.strip():
        raise TokenError(f"{name} value must not contain only whitespace")
    return value.strip()


def _scopes(name: str, raw: Any) -> frozenset[str]:
    values = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    seen: set[str] = set()
    for value in values:
        scope = _claim_string(name, value)
        if scope in seen:
            raise TokenError(f"{name} value must not contain duplicates - {scope} already "
                             "present")
        seen.add(scope)
    return frozenset(seen)


def validate(token: str, keys: KeySet, settings: OAuthSettings, now_ms: int) -> BearerToken:
    """The token's principal and lifetime, or TokenError (UnknownKey: no key for it)."""
    token = token.strip()
    if len(token.split(".")) != 3:
        raise TokenError("Malformed JWT provided; expected three sections (header, payload, "
                         "and signature)")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.DecodeError as exc:
        raise TokenError(f"Could not validate the access token: {exc}") from None
    alg, kid = header.get("alg"), header.get("kid")
    if not isinstance(alg, str) or alg not in _KEY_TYPES:
        raise TokenError(f"Could not validate the access token: the JWS algorithm {alg!r} "
                         "is not allowed")
    key = keys.select(alg, kid if isinstance(kid, str) else None)
    if key is None:
        raise UnknownKey(kid if isinstance(kid, str) else None, header)
    if isinstance(key.key, rsa.RSAPublicKey) and key.key.key_size < MIN_RSA_BITS:
        raise TokenError(f"An RSA key of size {MIN_RSA_BITS} bits or larger MUST be used "
                         f"with the all JOSE RSA algorithms (given key was only "
                         f"{key.key.key_size} bits).")
    try:
        payload = jwt.PyJWS().decode_complete(token, key=key.key, algorithms=[alg])["payload"]
        claims = json.loads(payload)
    except jwt.InvalidSignatureError:
        raise TokenError("JWT rejected due to invalid signature") from None
    except (jwt.InvalidTokenError, ValueError) as exc:
        raise TokenError(f"Could not validate the access token: {exc}") from None
    if not isinstance(claims, dict):
        raise TokenError("Could not validate the access token: the payload is not a JSON "
                         "object")
    _check_audience_issuer(claims, settings)
    _check_times(claims, settings.clock_skew_s, now_ms // 1000)
    scopes = _scopes(settings.scope_claim, claims.get(settings.scope_claim))
    exp = _number(claims, "exp")
    iat = _number(claims, "iat")
    assert exp is not None  # _check_times requires it
    if exp < 0:
        raise TokenError(f"exp value must be non-negative; value given was \"{exp}\"")
    sub = _claim_string(settings.sub_claim, claims.get(settings.sub_claim))
    if iat is not None and iat < 0:
        raise TokenError(f"iat value must be null or non-negative; value given was \"{iat}\"")
    return BearerToken(sub, scopes, exp * 1000, None if iat is None else iat * 1000)


# ---- the client's first message and the exchange --------------------------------------

_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*"
_CLIENT_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")


@dataclass(frozen=True, slots=True)
class ClientFirst:
    authzid: str
    token: str
    extensions: dict[str, str]


def parse_client_first(message: bytes) -> ClientFirst:
    """RFC 7628's `n,[a=authzid],^Aauth=Bearer <token>^A[key=value^A]...^A` (Kafka's
    OAuthBearerClientInitialResponse; extensions are accepted, as Kafka's validator
    handler accepts them all)."""
    text = message.decode("utf-8", errors="replace")
    found = _CLIENT_FIRST.fullmatch(text)
    if found is None:
        raise MalformedMessage("Invalid OAUTHBEARER client first message")
    pairs = dict(kv.split("=", 1) for kv in found["kvpairs"].split("\x01") if kv)
    auth = pairs.pop("auth", None)
    if auth is None:
        raise MalformedMessage("Invalid OAUTHBEARER client first message: 'auth' not "
                               "specified")
    parts = _AUTH.fullmatch(auth)
    if parts is None:
        raise MalformedMessage("Invalid OAUTHBEARER client first message: invalid 'auth' "
                               "format")
    if parts["scheme"].lower() != "bearer":
        raise MalformedMessage(f"Invalid scheme in OAUTHBEARER client first message: "
                               f"{parts['scheme']}")
    return ClientFirst(found["authzid"] or "", parts["token"], pairs)


class OAuthBearerServer:
    """One OAUTHBEARER exchange (Kafka's OAuthBearerSaslServer): a refused token is
    answered with the error challenge, and the client's `\\x01` then fails the exchange
    with that challenge as the message; another client first message starts over."""

    def __init__(self, validate_token: Callable[[str], BearerToken]) -> None:
        self._validate = validate_token
        self._error: bytes | None = None
        self.token: BearerToken | None = None
        #: why the last token was refused (the broker logs it)
        self.refused: str | None = None

    def step(self, message: bytes) -> bytes:
        if message == b"\x01" and self._error is not None:
            raise OAuthFailure(self._error.decode())
        self._error = None
        first = parse_client_first(message)
        try:
            token = self._validate(first.token)
        except TokenError as exc:
            self.refused, self._error = str(exc), INVALID_TOKEN
            return INVALID_TOKEN
        if first.authzid and first.authzid != token.principal:
            raise OAuthFailure(
                f"Authentication failed: Client requested an authorization id "
                f"({first.authzid}) that is different from the token's principal name "
                f"({token.principal})")
        self.token = token
        return b""
