"""The client's side of Kafka's listener security for headwater's own sockets (the CLI's
RawClient, the Spark connector's native reader and share-group client): TLS from PEM files
and SASL PLAIN / SCRAM-SHA-256/512 (SaslHandshake v1 + SaslAuthenticate v2), configured
with librdkafka's property names (`client_properties.to_librdkafka` maps Kafka's).
"""

from __future__ import annotations

import io
import os
import socket
import ssl
import struct
import tempfile
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.serial import entity_reader, entity_writer

from ..security.scram import ScramError
from ..security.scram_client import ScramClient
from .client_properties import PROTOCOLS, SASL_MECHANISMS, SecurityConfigError, unsupported


class AuthenticationError(RuntimeError):
    """The broker refused the credentials, or the SASL exchange failed. Not an OSError:
    retrying a connection does not cure a wrong password."""


@dataclass(frozen=True)
class ClientSecurity:
    """How to open one connection: picklable, so it travels to Spark executors."""

    protocol: str = "PLAINTEXT"
    mechanism: str = "GSSAPI"  # Kafka's and librdkafka's default; unused without SASL
    username: str = ""
    password: str = field(default="", repr=False)
    ca_location: str | None = None
    ca_pem: str | None = None
    certificate_location: str | None = None
    certificate_pem: str | None = None
    key_location: str | None = None
    key_pem: str | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @classmethod
    def from_config(cls, conf: Mapping[str, Any]) -> ClientSecurity:
        """From librdkafka-named properties (map Kafka's names with `to_librdkafka` first:
        mapping twice would take a PKCS12 keystore, once mapped, for a PEM one)."""
        conf = {k: str(v) for k, v in conf.items()}
        protocol = conf.get("security.protocol", "PLAINTEXT").upper()
        if unsupported(conf) and protocol != "PLAINTEXT":
            raise SecurityConfigError("not supported by headwater's own client (librdkafka "
                                      "only): " + ", ".join(unsupported(conf)))
        if protocol not in PROTOCOLS:
            raise SecurityConfigError(f"'security.protocol={protocol}': expected one of "
                                      + ", ".join(PROTOCOLS))
        mechanism = conf.get("sasl.mechanisms", "GSSAPI").strip().upper()
        if protocol.startswith("SASL_"):
            if mechanism not in SASL_MECHANISMS:
                raise SecurityConfigError(f"'sasl.mechanism={mechanism}' is not supported: "
                                          "use " + ", ".join(SASL_MECHANISMS))
            if "sasl.username" not in conf or "sasl.password" not in conf:
                raise SecurityConfigError(f"security.protocol={protocol} needs a username and "
                                          "password (sasl.jaas.config)")
        return cls(
            protocol=protocol, mechanism=mechanism,
            username=conf.get("sasl.username", ""), password=conf.get("sasl.password", ""),
            ca_location=conf.get("ssl.ca.location"), ca_pem=conf.get("ssl.ca.pem"),
            certificate_location=conf.get("ssl.certificate.location"),
            certificate_pem=conf.get("ssl.certificate.pem"),
            key_location=conf.get("ssl.key.location"), key_pem=conf.get("ssl.key.pem"),
            key_password=conf.get("ssl.key.password"),
            check_hostname=conf.get("ssl.endpoint.identification.algorithm",
                                    "https") != "none")

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_location, cadata=self.ca_pem)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = self.check_hostname
        if self.certificate_location or self.certificate_pem:
            self._load_chain(ctx)
        return ctx

    def _load_chain(self, ctx: ssl.SSLContext) -> None:
        """Python's ssl reads key and chain from files only: inline PEM goes through a
        private temporary file, removed at once."""
        if self.certificate_location:
            ctx.load_cert_chain(self.certificate_location, self.key_location,
                                self.key_password)
            return
        fd, path = tempfile.mkstemp(suffix=".pem")
        try:
            with os.fdopen(fd, "w") as f:
                f.write((self.key_pem or "") + "\n" + (self.certificate_pem or ""))
            ctx.load_cert_chain(path, None, self.key_password)
        finally:
            os.unlink(path)

    def connect(self, host: str, port: int, timeout: float) -> socket.socket:
        """A connected, TLS-wrapped and authenticated socket."""
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls:
                sock = self.ssl_context().wrap_socket(sock, server_hostname=host)
            if self.sasl:
                authenticate(sock, self.mechanism, self.username, self.password)
        except BaseException:
            sock.close()
            raise
        return sock


PLAINTEXT = ClientSecurity()


def _call(sock: socket.socket, body: Any, response_type: Any, correlation: int) -> Any:
    out = io.BytesIO()
    client_id = b"headwater-client"
    out.write(struct.pack(">hhih", body.__api_key__, body.__version__, correlation,
                          len(client_id)) + client_id)
    if body.__flexible__:
        out.write(b"\x00")
    entity_writer(type(body))(out, body)
    payload = out.getvalue()
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    size = struct.unpack(">i", _recv_exact(sock, 4))[0]
    frame = _recv_exact(sock, size)
    if struct.unpack_from(">i", frame, 0)[0] != correlation:
        raise ConnectionError("SASL response out of order")
    result: Any = entity_reader(response_type)(frame, 5 if response_type.__flexible__ else 4)
    return result[0] if isinstance(result, tuple) else result


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise AuthenticationError("the broker closed the connection during SASL "
                                      "authentication")
        buf += chunk
    return bytes(buf)


#: One step of a SASL exchange: the request to send and the response class to read.
SaslStep = tuple[Any, Any]


def sasl_exchange(mechanism: str, username: str, password: str
                  ) -> Generator[SaslStep, Any, None]:
    """The client's side of SaslHandshake then SaslAuthenticate rounds, sans-IO: yields
    each request (with its response class) and is sent the decoded response; raises
    AuthenticationError with the broker's message when it refuses. Driven over a socket
    (`authenticate`) or a stream (`shared/peers.py`)."""
    hs = yield SaslHandshakeRequest(mechanism=mechanism), SaslHandshakeResponse
    if hs.error_code != ErrorCode.none:
        raise AuthenticationError(f"SASL mechanism {mechanism} is not enabled by the broker "
                                  f"(it offers {', '.join(hs.mechanisms) or 'none'})")

    def checked(resp: Any) -> bytes:
        if resp.error_code != ErrorCode.none:
            raise AuthenticationError(resp.error_message or resp.error_code.name)
        token_back: bytes = resp.auth_bytes
        return token_back

    def request(token: bytes) -> SaslStep:
        return SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse

    if mechanism == "PLAIN":
        checked((yield request(b"\x00" + username.encode() + b"\x00" + password.encode())))
        return
    try:
        scram = ScramClient(mechanism, username, password)
        server_first = checked((yield request(scram.first())))
        scram.verify(checked((yield request(scram.final(server_first)))))
    except ScramError as exc:
        raise AuthenticationError(str(exc)) from None


def authenticate(sock: socket.socket, mechanism: str, username: str, password: str) -> None:
    """`sasl_exchange` over a connected socket."""
    steps = sasl_exchange(mechanism, username, password)
    correlation = 1
    try:
        body, response_type = next(steps)
        while True:
            answer = _call(sock, body, response_type, correlation)
            correlation += 1
            body, response_type = steps.send(answer)
    except StopIteration:
        return
