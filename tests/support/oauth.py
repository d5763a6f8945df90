"""A local OAuth 2 / OIDC identity provider for the OAUTHBEARER tests: an RSA key the test
generates, its JWKS at `/jwks` and a client-credentials token endpoint at `/token`
(http.server in a thread), and tokens the test signs itself.

Both brokers (headwater and the reference Kafka) fetch the same JWKS, and librdkafka's
`sasl.oauthbearer.method=oidc` asks the token endpoint, so both see the same tokens.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

ISSUER = "https://idp.headwater.test"
AUDIENCE = "kafka"


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_jwk(key: Any, kid: str) -> dict[str, Any]:
    """The public JWK of an RSA or EC private key, with its `kid` and `use`/`alg`."""
    if isinstance(key, rsa.RSAPrivateKey):
        jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
        jwk["alg"] = "RS256"
    else:
        jwk = json.loads(ECAlgorithm.to_jwk(key.public_key()))
        jwk["alg"] = "ES256"
    return {**jwk, "kid": kid, "use": "sig"}


@dataclass
class Client:
    """A client of the token endpoint: its secret, and the tokens it is given."""

    secret: str
    sub: str
    lifetime_s: int = 300
    audience: str | None = AUDIENCE


class OAuthServer:
    """The identity provider. `keys` (kid -> private key) signs; `published` (the kids
    served in the JWKS) is what a broker can verify with. `jwks_fetches` counts GETs."""

    def __init__(self, issuer: str = ISSUER) -> None:
        self.issuer = issuer
        # "other" signs tokens no JWKS key verifies (bad signatures, unknown kids)
        self.keys: dict[str, Any] = {"k1": rsa_key(), "ec1": ec.generate_private_key(
            ec.SECP256R1()), "other": rsa_key()}
        self.published = ["k1", "ec1"]
        self.clients: dict[str, Client] = {}
        self.jwks_fetches = 0
        self.jwks_down = False  # answer 503 to JWKS requests
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # ---- tokens -------------------------------------------------------------------
    def token(self, sub: str | None = "alice", *, lifetime_s: int = 300, kid: str = "k1",
              key: Any = None, audience: str | list[str] | None = AUDIENCE,
              issuer: str | None = None, iat: int | None = None, nbf: int | None = None,
              omit: tuple[str, ...] = (), **claims: Any) -> str:
        """A signed JWT: `key` (else `keys[kid]`) signs it, its header names `kid`."""
        now = int(time.time())
        body: dict[str, Any] = {"iss": issuer or self.issuer, "sub": sub,
                                "aud": audience, "iat": now if iat is None else iat,
                                "exp": now + lifetime_s, "scope": "kafka",
                                "jti": uuid.uuid4().hex}
        if nbf is not None:
            body["nbf"] = nbf
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None and k not in omit}
        signer = key if key is not None else self.keys[kid]
        alg = "RS256" if isinstance(signer, rsa.RSAPrivateKey) else "ES256"
        return jwt.encode(body, signer, algorithm=alg, headers={"kid": kid})

    def jwks(self) -> dict[str, Any]:
        with self._lock:
            return {"keys": [public_jwk(self.keys[k], k) for k in self.published]}

    def publish(self, kid: str, key: Any = None) -> None:
        """Add (or rotate in) a key the JWKS serves from now on."""
        with self._lock:
            self.keys[kid] = key if key is not None else rsa_key()
            if kid not in self.published:
                self.published.append(kid)

    # ---- the HTTP server ----------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def jwks_url(self) -> str:
        return f"{self.base_url}/jwks"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/token"

    def start(self) -> OAuthServer:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Mapping[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/jwks":
                    self._send(404, {"error": "not found"})
                    return
                with provider._lock:
                    provider.jwks_fetches += 1
                    down = provider.jwks_down
                if down:
                    self._send(503, {"error": "unavailable"})
                else:
                    self._send(200, provider.jwks())

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                client_id = (form.get("client_id") or [""])[0]
                secret = (form.get("client_secret") or [""])[0]
                auth = self.headers.get("Authorization") or ""
                if auth.lower().startswith("basic "):
                    pair = base64.b64decode(auth[6:]).decode()
                    client_id, _, secret = pair.partition(":")
                client = provider.clients.get(urllib.parse.unquote(client_id))
                if self.path != "/token" or client is None or client.secret != \
                        urllib.parse.unquote(secret):
                    self._send(401, {"error": "invalid_client"})
                    return
                token = provider.token(client.sub, lifetime_s=client.lifetime_s,
                                       audience=client.audience)
                self._send(200, {"access_token": token, "token_type": "Bearer",
                                 "expires_in": client.lifetime_s})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="oauth-idp",
                         daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def client_first(token: str, authzid: str = "", **extensions: str) -> bytes:
    """RFC 7628's client first message, as Kafka's and librdkafka's clients send it."""
    ext = "".join(f"{k}={v}\x01" for k, v in extensions.items())
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01auth=Bearer {token}\x01{ext}\x01".encode()
