"""The client's side of SCRAM-SHA-256/512 (RFC 5802), sans-IO, as Kafka's ScramSaslClient:
no channel binding, a server proposing fewer than 4096 iterations is refused, and the
server's signature is checked so a broker that does not know the password is caught."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

from .scram import MECHANISMS, MIN_ITERATIONS, ScramError, _attributes, salted_password


def _saslname(user: str) -> str:
    return user.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """`first()`, then `final(server_first)`, then `verify(server_final)`."""

    def __init__(self, mechanism: str, username: str, password: str,
                 nonce: str | None = None) -> None:
        if mechanism not in MECHANISMS:
            raise ScramError(f"Unsupported SCRAM mechanism {mechanism}")
        self.mechanism = mechanism
        self.digest = MECHANISMS[mechanism][1]
        self.password = password
        self.nonce = nonce or base64.b64encode(os.urandom(24)).decode()
        self._first_bare = f"n={_saslname(username)},r={self.nonce}"
        self._server_key = b""
        self._auth_message = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        message = server_first.decode()
        attrs = _attributes(message)
        if "e" in attrs:
            raise ScramError(f"SCRAM server error: {attrs['e']}")
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self.nonce) or salt is None or not iterations.isdigit():
            raise ScramError("Invalid SCRAM server first message")
        if int(iterations) < MIN_ITERATIONS:
            raise ScramError(f"Requested iterations {iterations} is less than the minimum "
                             f"{MIN_ITERATIONS} for {self.mechanism}")
        salted = salted_password(self.mechanism, self.password, base64.b64decode(salt),
                                 int(iterations))
        without_proof = f"c=biws,r={nonce}"
        self._auth_message = f"{self._first_bare},{message},{without_proof}".encode()
        client_key = hmac.new(salted, b"Client Key", self.digest).digest()
        stored_key = hashlib.new(self.digest, client_key).digest()
        signature = hmac.new(stored_key, self._auth_message, self.digest).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_key = hmac.new(salted, b"Server Key", self.digest).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attributes(server_final.decode())
        if "e" in attrs:
            raise ScramError(f"SCRAM server error: {attrs['e']}")
        expected = hmac.new(self._server_key, self._auth_message, self.digest).digest()
        if not hmac.compare_digest(base64.b64decode(attrs.get("v", "")), expected):
            raise ScramError("Invalid SCRAM server signature")
