"""TLS for SSL and SASL_SSL listeners, configured with Kafka's keys, PEM only.

`ssl.keystore.type=PEM` with `ssl.keystore.location` (a file holding the private key and
the certificate chain, as Kafka's PEM keystore; `ssl.key.password` if the key is
encrypted) or the inline `ssl.keystore.key` + `ssl.keystore.certificate.chain`;
`ssl.truststore.location` (PEM CA certificates) or inline `ssl.truststore.certificates`
for client certificates; `ssl.client.auth` none | requested | required. TLS 1.2 is the
minimum. Each key may be set per listener (`listener.name.<name>.ssl...`). JKS and
PKCS12 keystores are refused at start with a message saying so.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from typing import Any

from ..config import BrokerConfig, ConfigError
from .listeners import Listener, listener_config


def _pem_file(content: str, directory: str, name: str) -> str:
    path = os.path.join(directory, name)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(content.replace("\\n", "\n"))
    return path


def server_context(config: BrokerConfig, listener: Listener) -> ssl.SSLContext:
    def get(key: str) -> str | None:
        return listener_config(config, listener.name, key)

    for kind in ("keystore", "truststore"):
        store_type = (get(f"ssl.{kind}.type") or "PEM").upper()
        if store_type != "PEM" and get(f"ssl.{kind}.location"):
            raise ConfigError(f"listener {listener.name}: ssl.{kind}.type={store_type} is "
                              "not supported; use PEM files (ssl.keystore.type=PEM)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    private = tempfile.mkdtemp(prefix="headwater-tls-")
    location = get("ssl.keystore.location")
    password = get("ssl.key.password") or get("ssl.keystore.password")
    if not location and get("ssl.keystore.key") and get("ssl.keystore.certificate.chain"):
        location = _pem_file(get("ssl.keystore.key") + "\n" +  # type: ignore[operator]
                             get("ssl.keystore.certificate.chain"), private, "keystore.pem")
    if not location:
        raise ConfigError(f"listener {listener.name} ({listener.protocol}) needs "
                          "ssl.keystore.location (a PEM file with the key and certificate)")
    try:
        ctx.load_cert_chain(location, password=password)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"listener {listener.name}: cannot load {location}: {exc}") from exc
    trust = get("ssl.truststore.location")
    if not trust and get("ssl.truststore.certificates"):
        trust = _pem_file(get("ssl.truststore.certificates") or "", private, "trust.pem")
    auth = (get("ssl.client.auth") or "none").lower()
    if auth not in ("none", "requested", "required"):
        raise ConfigError(f"ssl.client.auth={auth}: expected none, requested or required")
    if auth != "none":
        if not trust:
            raise ConfigError(f"ssl.client.auth={auth} needs ssl.truststore.location")
        ctx.load_verify_locations(trust)
        ctx.verify_mode = ssl.CERT_REQUIRED if auth == "required" else ssl.CERT_OPTIONAL
    return ctx


def peer_principal(peercert: dict[str, Any] | None) -> str | None:
    """Kafka's default SSL principal: the client certificate's subject DN."""
    if not peercert:
        return None
    parts = []
    for rdn in reversed(peercert.get("subject", ())):
        for key, value in rdn:
            short = {"commonName": "CN", "organizationName": "O",
                     "organizationalUnitName": "OU", "countryName": "C",
                     "localityName": "L", "stateOrProvinceName": "ST"}.get(key, key)
            parts.append(f"{short}={value}")
    return ",".join(parts)
