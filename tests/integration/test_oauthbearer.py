"""SASL/OAUTHBEARER (KIP-768) side by side: headwater and Apache Kafka 4.4.0, each with a
SASL_PLAINTEXT listener validating JWTs against the same local identity provider's JWKS
(tests/support/oauth.py), are given the same tokens. librdkafka's OIDC client
(`sasl.oauthbearer.method=oidc`, client credentials against the provider's token
endpoint) produces and consumes on both; refused tokens (expired, wrong audience, bad
signature, ...) get the same SaslAuthenticate answers on both; ACLs name the token's
subject; short-lived tokens are renewed by re-authentication (KIP-368) on the open
connections; a signing key published later is fetched when a token names it; a JWKS that
cannot be fetched, or a missing JAAS entry, stops both brokers at start.

Kafka 4.4 fetches a JWKS only from a URL allowed by the JVM system property
`org.apache.kafka.sasl.oauthbearer.allowed.urls`, which the reference is given."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.support.broker_process import BrokerProcess, free_port
from tests.support.kafka_reference import KafkaReference, create_topic
from tests.support.oauth import AUDIENCE, ISSUER, Client, OAuthServer, client_first
from tests.support.wire import RawClient

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.one_node("one broker and one reference, each with its listener")]

HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
REAUTH_MS = 20_000
SHORT_LIFETIME_S = 6
INVALID = '{"status":"invalid_token"}'
GENERIC = ("Authentication failed during authentication due to invalid credentials with "
           "SASL mechanism OAUTHBEARER")


def oauth_settings(jwks_url: str, *, jaas: bool = True) -> list[str]:
    """The same server.properties lines for both brokers."""
    prefix = "listener.name.sasl_plaintext.oauthbearer."
    return [
        "sasl.enabled.mechanisms=OAUTHBEARER",
        f"{prefix}sasl.server.callback.handler.class={HANDLER}",
        *([f"{prefix}sasl.jaas.config={JAAS}"] if jaas else []),
        f"{prefix}sasl.oauthbearer.jwks.endpoint.url={jwks_url}",
        f"sasl.oauthbearer.expected.audience={AUDIENCE}",
        f"sasl.oauthbearer.expected.issuer={ISSUER}",
        f"{prefix}connections.max.reauth.ms={REAUTH_MS}",
        f"authorizer.class.name={AUTHORIZER}",
        "super.users=User:ANONYMOUS;User:alice",
    ]


@dataclass
class Target:
    """One broker: its PLAINTEXT listener (User:ANONYMOUS, a super user) and its
    OAUTHBEARER one."""

    name: str
    plain: int
    sasl: int
    proc: Any

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl}"


def headwater(data: Path, jwks_url: str, *, jaas: bool = True) -> Target:
    plain, sasl = free_port(), free_port()
    overrides = [f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                 *oauth_settings(jwks_url, jaas=jaas)]
    proc = BrokerProcess(data, *[a for line in overrides for a in ("--override", line)],
                         port=plain)
    return Target("headwater", plain, sasl, proc)


def kafka(data: Path, jwks_url: str, *, jaas: bool = True) -> Target:
    proc = KafkaReference(data, jvm_opts=(
        f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={jwks_url}",))
    sasl = free_port()
    proc.overrides += [
        f"listeners=PLAINTEXT://127.0.0.1:{proc.port},SASL_PLAINTEXT://127.0.0.1:{sasl},"
        f"CONTROLLER://127.0.0.1:{proc.controller_port}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{proc.port},"
        f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT",
        *oauth_settings(jwks_url, jaas=jaas)]
    return Target("kafka", proc.port, sasl, proc)


def both(run: Callable[..., Any], targets: tuple[Target, Target], *args: Any
         ) -> tuple[Any, Any]:
    """`run(target, *args)` on headwater and on Kafka at once."""
    with ThreadPoolExecutor(2) as pool:
        ours, theirs = (pool.submit(run, t, *args) for t in targets)
        return ours.result(), theirs.result()


@pytest.fixture(scope="module")
def idp() -> Iterator[OAuthServer]:
    server = OAuthServer().start()
    server.clients = {
        "app": Client("app-secret", "alice"),
        "short": Client("short-secret", "alice", lifetime_s=SHORT_LIFETIME_S),
        "carol-app": Client("carol-secret", "carol"),
        "stranger": Client("stranger-secret", "alice", audience="another-service"),
    }
    yield server
    server.stop()


@pytest.fixture(scope="module")
def brokers(idp: OAuthServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[Target, Target]]:
    base = tmp_path_factory.mktemp("oauth")
    targets = (headwater(base / "hw", idp.jwks_url), kafka(base / "kafka", idp.jwks_url))
    try:
        both(lambda t: t.proc.start(), targets)
        yield targets
    finally:
        for t in targets:
            t.proc.stop()


def oidc(target: Target, idp: OAuthServer, client: str, **extra: Any) -> dict[str, Any]:
    """librdkafka's OIDC login: client credentials against the provider's token endpoint."""
    return {"bootstrap.servers": target.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": client,
            "sasl.oauthbearer.client.secret": idp.clients[client].secret,
            "sasl.oauthbearer.token.endpoint.url": idp.token_url, **extra}


# ---- a valid token --------------------------------------------------------------------


def test_an_oidc_client_produces_and_consumes(brokers: tuple[Target, Target],
                                              idp: OAuthServer) -> None:
    topic = f"oauth-rt-{uuid.uuid4().hex[:8]}"

    def round_trip(target: Target) -> list[bytes]:
        create_topic(f"127.0.0.1:{target.plain}", topic, 1)
        producer = Producer(oidc(target, idp, "app"))
        for i in range(5):
            producer.produce(topic, b"v%d" % i)
        assert producer.flush(30) == 0
        consumer = Consumer(oidc(target, idp, "app", **{
            "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}))
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        try:
            while len(got) < 5 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    got.append(msg.value())
        finally:
            consumer.close()
        return got

    ours, theirs = both(round_trip, brokers)
    assert ours == theirs == [b"v%d" % i for i in range(5)]


# ---- refused tokens: the same SaslAuthenticate answers ---------------------------------


def exchange(target: Target, first: bytes) -> tuple[Any, ...]:
    """SaslHandshake, then SaslAuthenticate v2 with `first` (and `\\x01` after an error
    challenge): (error code, message, challenge) of each answer, and whether the broker
    then closed the connection or served Metadata."""
    raw = RawClient("127.0.0.1", target.sasl)
    try:
        assert int(raw.request(17, 1, {"mechanism": "OAUTHBEARER"}).error_code) == 0
        out: list[Any] = []
        answer = raw.request(36, 2, {"auth_bytes": first})
        out.append((int(answer.error_code), answer.error_message, bytes(answer.auth_bytes)))
        if int(answer.error_code) == 0 and answer.auth_bytes:
            answer = raw.request(36, 2, {"auth_bytes": b"\x01"})
            out.append((int(answer.error_code), answer.error_message,
                        bytes(answer.auth_bytes)))
        if int(answer.error_code) != 0:
            out.append("closed" if raw.is_closed_by_peer(10) else "open")
        else:
            raw.request(3, 12, {"topics": [], "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": False})
            out.append(("served", int(answer.session_lifetime.total_seconds() * 1000)))
        return tuple(out)
    finally:
        raw.close()


def refused(code: int = 58, message: str = INVALID) -> tuple[Any, ...]:
    if message == INVALID:
        return ((0, "", INVALID.encode()), (code, message, b""), "closed")
    return ((code, message, b""), "closed")


@pytest.mark.parametrize(("token", "expected"), [
    (lambda idp, other: idp.token(lifetime_s=-3600), refused()),
    (lambda idp, other: idp.token(audience="another-service"), refused()),
    (lambda idp, other: idp.token(issuer="https://elsewhere.test"), refused()),
    (lambda idp, other: idp.token(key=other), refused()),
    (lambda idp, other: idp.token(kid="nobody", key=other), refused()),
    (lambda idp, other: idp.token(sub=None), refused()),
    (lambda idp, other: idp.token(nbf=int(time.time()) + 600, lifetime_s=3600), refused()),
    (lambda idp, other: "not.a-jwt", refused()),
], ids=["expired", "wrong-audience", "wrong-issuer", "bad-signature", "unknown-kid",
        "no-subject", "not-yet-valid", "not-a-jwt"])
def test_refused_tokens_get_kafkas_answers(brokers: tuple[Target, Target], idp: OAuthServer,
                                           token: Callable[..., str],
                                           expected: tuple[Any, ...]) -> None:
    first = client_first(token(idp, idp.keys["other"]))
    ours, theirs = both(exchange, brokers, first)
    assert ours == theirs == expected


@pytest.mark.parametrize(("first", "message"), [
    (b"hello", GENERIC),
    (b"n,,\x01auth=Bearer\x01\x01", GENERIC),
    (None, "Authentication failed: Client requested an authorization id (bob) that is "
           "different from the token's principal name (alice)"),
], ids=["garbage", "no-token", "authzid-mismatch"])
def test_malformed_messages_get_kafkas_answers(brokers: tuple[Target, Target],
                                               idp: OAuthServer, first: bytes | None,
                                               message: str) -> None:
    first = first or client_first(idp.token("alice"), authzid="bob")
    ours, theirs = both(exchange, brokers, first)
    assert ours == theirs == refused(message=message)


def test_a_scheme_other_than_bearer(brokers: tuple[Target, Target]) -> None:
    """Kafka closes the connection unanswered (its scheme check reads the group "scheme"
    from the wrong matcher: an IllegalArgumentException, not a SaslException); headwater
    answers as to any malformed message (docs/differences.md)."""
    def answer(target: Target) -> Any:
        try:
            return exchange(target, b"n,,\x01auth=Basic abc\x01\x01")
        except ConnectionError:
            return "closed unanswered"

    ours, theirs = both(answer, brokers)
    assert (ours, theirs) == (refused(message=GENERIC), "closed unanswered")


def lifetime(result: tuple[Any, ...]) -> int:
    assert result[0] == (0, "", b"") and result[-1][0] == "served", result
    return int(result[-1][1])


def test_the_session_lifetime_is_the_token_or_the_reauth_limit(
        brokers: tuple[Target, Target], idp: OAuthServer) -> None:
    long_lived, short_lived = idp.token(lifetime_s=3600), idp.token(lifetime_s=8)
    for token, most in ((long_lived, REAUTH_MS), (short_lived, 8000)):
        ours, theirs = both(exchange, brokers, client_first(token))
        for got in (lifetime(ours), lifetime(theirs)):
            assert most - 3000 <= got <= most, (ours, theirs)
    # extensions (KIP-342) and an authzid naming the subject are accepted by both
    first = client_first(idp.token("alice"), authzid="alice", traceId="t-1")
    ours, theirs = both(exchange, brokers, first)
    assert lifetime(ours) > 0 and lifetime(theirs) > 0


def reauthenticate(target: Target, idp: OAuthServer, *subjects: str) -> list[Any]:
    """Authenticate as the first subject, then again on the same connection as each of the
    others at once: what each handshake and SaslAuthenticate answered."""
    raw = RawClient("127.0.0.1", target.sasl)
    out: list[Any] = []
    try:
        for sub in subjects:
            shake = raw.request(17, 1, {"mechanism": "OAUTHBEARER"})
            auth = raw.request(36, 2, {"auth_bytes": client_first(idp.token(sub))})
            out.append((int(shake.error_code), list(shake.mechanisms),
                        int(auth.error_code), auth.error_message))
            if int(auth.error_code) == 58:
                break
        out.append("closed" if raw.is_closed_by_peer(5) else "open")
        return out
    finally:
        raw.close()


def test_reauthentication_cannot_change_the_principal(brokers: tuple[Target, Target],
                                                      idp: OAuthServer) -> None:
    ours, theirs = both(reauthenticate, brokers, idp, "alice", "bob")
    assert ours == theirs == [
        (0, ["OAUTHBEARER"], 0, ""),
        (0, ["OAUTHBEARER"], 58, "Cannot change principals during re-authentication from "
                                 "User.alice: User.bob"), "closed"]


def test_reauthentication_at_most_once_a_second(brokers: tuple[Target, Target],
                                                idp: OAuthServer) -> None:
    ours, theirs = both(reauthenticate, brokers, idp, "alice", "alice", "alice")
    assert ours == theirs == [
        (0, ["OAUTHBEARER"], 0, ""), (0, ["OAUTHBEARER"], 0, ""),
        (34, [], 34, "SaslAuthenticate request received after successful authentication"),
        "open"]


def test_librdkafka_reports_a_refused_token_alike(brokers: tuple[Target, Target],
                                                  idp: OAuthServer) -> None:
    """A token for another audience: librdkafka's error callback shows the broker's
    SaslAuthenticate message, the same from both."""
    def first_auth_error(target: Target) -> tuple[str, str]:
        errors: list[Any] = []
        admin = AdminClient(oidc(target, idp, "stranger", error_cb=errors.append))
        deadline = time.monotonic() + 30
        while not any(e.name() == "_AUTHENTICATION" for e in errors):
            assert time.monotonic() < deadline, errors
            admin.poll(0.2)
        error = next(e for e in errors if e.name() == "_AUTHENTICATION")
        reason = re.sub(r"sasl_plaintext://127\.0\.0\.1:\d+/\S+", "<broker>", error.str())
        return error.name(), re.sub(r"after \d+ms", "after <n>ms", reason)

    ours, theirs = both(first_auth_error, brokers)
    assert ours == theirs
    assert '{"status":"invalid_token"}' in ours[1], ours


# ---- ACLs on the token's subject --------------------------------------------------------


def test_acls_name_the_tokens_subject(brokers: tuple[Target, Target],
                                      idp: OAuthServer) -> None:
    topic = f"oauth-acl-{uuid.uuid4().hex[:8]}"

    def produce_as_carol(target: Target) -> list[str]:
        create_topic(f"127.0.0.1:{target.plain}", topic, 1)
        errors: list[str] = []
        for attempt in ("before", "after"):
            if attempt == "after":
                admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{target.plain}"})
                bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                                       "User:carol", "*", op, AclPermissionType.ALLOW)
                            for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
                for done in admin.create_acls(bindings).values():
                    done.result(30)
            producer = Producer(oidc(target, idp, "carol-app", **{
                "message.timeout.ms": 10_000, "retries": 0}))
            outcome: list[str] = []
            producer.produce(topic, b"x", on_delivery=lambda err, _msg, out=outcome: out.append(
                err.name() if err else "delivered"))
            deadline = time.monotonic() + 30
            while not outcome and time.monotonic() < deadline:
                producer.poll(0.2)
            errors.append(outcome[0] if outcome else "no outcome")
        return errors

    ours, theirs = both(produce_as_carol, brokers)
    assert ours == theirs == ["TOPIC_AUTHORIZATION_FAILED", "delivered"]


# ---- re-authentication with short-lived tokens -------------------------------------------


def test_short_lived_tokens_are_renewed_on_open_connections(
        brokers: tuple[Target, Target], idp: OAuthServer) -> None:
    topic = f"oauth-reauth-{uuid.uuid4().hex[:8]}"

    def produce_for_three_lifetimes(target: Target) -> tuple[int, list[str]]:
        create_topic(f"127.0.0.1:{target.plain}", topic, 1)
        producer = Producer(oidc(target, idp, "short", **{"linger.ms": 5}))
        errors: list[str] = []
        delivered: list[int] = []
        sent = 0
        deadline = time.monotonic() + 3 * SHORT_LIFETIME_S + 1
        while time.monotonic() < deadline:
            producer.produce(topic, b"%d" % sent, on_delivery=lambda err, msg: (
                errors.append(err.name()) if err else delivered.append(msg.offset())))
            producer.poll(0.05)
            sent += 1
        assert producer.flush(30) == 0
        assert len(delivered) == sent
        return sent, errors

    (ours_sent, ours_errors), (theirs_sent, theirs_errors) = both(
        produce_for_three_lifetimes, brokers)
    assert ours_errors == theirs_errors == []
    assert ours_sent > 0 and theirs_sent > 0
    hw = brokers[0].proc
    assert isinstance(hw, BrokerProcess)
    assert hw.log_path.read_text(errors="replace").count("re-authenticated") >= 2


# ---- the JWKS ----------------------------------------------------------------------------


def test_a_key_published_later_is_fetched_when_a_token_names_it(
        brokers: tuple[Target, Target], idp: OAuthServer) -> None:
    kid = f"rotated-{uuid.uuid4().hex[:6]}"
    idp.publish(kid)
    first = client_first(idp.token(kid=kid))

    def until_accepted(target: Target) -> tuple[tuple[Any, ...], bool]:
        answers = [exchange(target, first)]
        deadline = time.monotonic() + 30
        while answers[-1][-1] == "closed" and time.monotonic() < deadline:
            time.sleep(0.2)  # poll interval; the deadline bounds the wait
            answers.append(exchange(target, first))
        return answers[0], answers[-1][-1][0] == "served"

    ours, theirs = both(until_accepted, brokers)
    assert ours == theirs == (refused(), True)


@pytest.mark.parametrize("case", ["unreachable-jwks", "no-jaas-entry"])
def test_neither_broker_starts_without_its_jwks_or_jaas_entry(
        tmp_path: Path, idp: OAuthServer, case: str) -> None:
    url = f"http://127.0.0.1:{free_port()}/jwks" if case == "unreachable-jwks" \
        else idp.jwks_url
    jaas = case != "no-jaas-entry"
    targets = (headwater(tmp_path / "hw", url, jaas=jaas),
               kafka(tmp_path / "kafka", url, jaas=jaas))

    def start(target: Target) -> str:
        try:
            target.proc.start()
        except RuntimeError as exc:  # the process exited
            return f"{exc}\n{target.proc.log_path.read_text(errors='replace')}"
        target.proc.stop()
        return "started"

    ours, theirs = both(start, targets)
    assert "exited with" in ours and "cannot start" in ours, ours
    assert "exited with" in theirs, theirs[-2000:]
    if case == "unreachable-jwks":
        assert f"could not fetch the OAuth JWKS (sasl.oauthbearer.jwks.endpoint.url) {url}" \
            in ours
        assert "Connection refused" in theirs
    else:
        assert "Could not find a 'KafkaServer' or 'sasl_plaintext.KafkaServer' entry" in ours
        assert "Could not find a 'KafkaServer' or 'sasl_plaintext.KafkaServer' entry" in theirs
