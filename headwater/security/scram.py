"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, 7677): stored credentials and the server's
side of the exchange (sans-IO), as Kafka's ScramSaslServer: no channel binding, the
`tokenauth` extension refused, unknown users and wrong proofs failing alike."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass

# Kafka's ScramMechanism ids (AlterUserScramCredentials, UserScramCredentialRecord)
MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
BY_ID = {mid: name for name, (mid, _h) in MECHANISMS.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class ScramError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(digest: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, digest).digest()


def credential(mechanism: str, salted_password: bytes, salt: bytes,
               iterations: int) -> ScramCredential:
    """What the broker stores from a client's salted password (AlterUserScramCredentials
    sends SaltedPassword, never the password)."""
    digest = MECHANISMS[mechanism][1]
    client_key = _hmac(digest, salted_password, b"Client Key")
    return ScramCredential(salt, hashlib.new(digest, client_key).digest(),
                           _hmac(digest, salted_password, b"Server Key"), iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism][1], password.encode(), salt, iterations)


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"Invalid SCRAM message: {message!r}")
        out[key] = value
    return out


class ScramServer:
    """One exchange: `step()` takes the client's message, returns the server's;
    `username` is set once the client's proof checks."""

    def __init__(self, mechanism: str,
                 lookup: Callable[[str, str], ScramCredential | None]) -> None:
        self.mechanism = mechanism
        self.digest = MECHANISMS[mechanism][1]
        self.lookup = lookup
        self.username: str | None = None
        self._state = "first"
        self._first_bare = self._server_first = self._nonce = ""
        self._cred: ScramCredential | None = None
        self._user = ""

    def step(self, data: bytes) -> bytes:
        try:
            message = data.decode()
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM message: not UTF-8") from None
        if self._state == "first":
            return self._first(message)
        if self._state == "final":
            return self._final(message)
        raise ScramError("Unexpected SCRAM message after the exchange")

    def _first(self, message: str) -> bytes:
        gs2, _, rest = message.partition(",")
        authzid, _, bare = rest.partition(",")
        if gs2 not in ("n", "y"):
            raise ScramError("Channel binding is not supported")
        attrs = _attributes(bare)
        if "n" not in attrs or "r" not in attrs:
            raise ScramError("Invalid SCRAM client first message")
        user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
        if authzid and authzid[2:] != user:
            raise ScramError("Authentication failed: Client requested an authorization id "
                             "that is different from username")
        if attrs.get("tokenauth") == "true":
            raise ScramError("Delegation tokens are not supported")
        cred = self.lookup(user, self.mechanism)
        if cred is None:
            raise ScramError("Authentication failed during authentication due to invalid "
                             f"credentials with SASL mechanism {self.mechanism}")
        self._user, self._cred = user, cred
        self._nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
        self._first_bare = bare
        self._server_first = (f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},"
                              f"i={cred.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        assert self._cred is not None
        without_proof, _, proof_part = message.rpartition(",")
        attrs = _attributes(message)
        if attrs.get("r") != self._nonce or not proof_part.startswith("p="):
            raise ScramError("Invalid SCRAM client final message")
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self.digest, self._cred.stored_key, auth_message)
        try:
            proof = base64.b64decode(attrs["p"], validate=True)
        except ValueError:
            raise ScramError("Invalid SCRAM client proof") from None
        if len(proof) != len(signature):
            raise ScramError("Invalid SCRAM client proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.digest, client_key).digest(),
                                   self._cred.stored_key):
            raise ScramError("Authentication failed during authentication due to invalid "
                             f"credentials with SASL mechanism {self.mechanism}")
        self.username = self._user
        self._state = "done"
        server_signature = _hmac(self.digest, self._cred.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
