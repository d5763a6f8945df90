"""Kafka's Java client security properties, as users write them (a `--command-config`
file, Spark's `kafka.*` options: `security.protocol`, `sasl.mechanism`, `sasl.jaas.config`,
`ssl.truststore.location`, `ssl.keystore.location`, ...), mapped onto librdkafka's names
(`sasl.mechanisms`, `sasl.username`, `ssl.ca.location`, ...), which confluent-kafka needs
and `client_security.ClientSecurity` reads, so one dictionary configures every client.

Trust stores must be PEM; a key store PEM, or PKCS12, which only librdkafka reads (JKS
needs a JVM: convert with keytool / openssl).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..security.scram import MECHANISMS as SCRAM_MECHANISMS

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
#: librdkafka's security properties that ClientSecurity honours; a client given any other
#: ssl.* / sasl.* property (cipher suites, a PKCS12 keystore, ...) or another mechanism
#: (GSSAPI, OAUTHBEARER) leaves the connection to librdkafka.
UNDERSTOOD = frozenset({
    "security.protocol", "sasl.mechanisms", "sasl.username", "sasl.password",
    "ssl.ca.location", "ssl.ca.pem", "ssl.certificate.location", "ssl.certificate.pem",
    "ssl.key.location", "ssl.key.pem", "ssl.key.password",
    "ssl.endpoint.identification.algorithm"})


def unsupported(conf: Mapping[str, Any]) -> list[str]:
    """The security settings of `conf` (librdkafka names) that ClientSecurity cannot honour."""
    out = sorted(k for k in conf if k.startswith(("ssl.", "sasl.")) and k not in UNDERSTOOD)
    protocol = str(conf.get("security.protocol", "PLAINTEXT")).upper()
    mechanism = str(conf.get("sasl.mechanisms", "GSSAPI")).strip().upper()
    if protocol.startswith("SASL_") and mechanism not in SASL_MECHANISMS:
        out.append(f"sasl.mechanism={mechanism}")
    return out


def understood(conf: Mapping[str, Any]) -> bool:
    return not unsupported(conf)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class SecurityConfigError(ValueError):
    """A client security property that is malformed or unsupported; names the property."""


def jaas_options(jaas: str) -> dict[str, str]:
    """`username="..." password="..."` of a `sasl.jaas.config` login module line."""
    return {k: re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_OPTION.findall(jaas)}


def _pem_type(props: Mapping[str, str], key: str) -> None:
    kind = props.get(key, "PEM").strip().upper()
    if kind != "PEM":
        raise SecurityConfigError(f"'{key}={kind}' is not supported: use PEM files (convert "
                                  "with keytool/openssl; a PKCS12 keystore is read by "
                                  "librdkafka only)")


def to_librdkafka(props: Mapping[str, str]) -> dict[str, str]:
    """Kafka's Java client security properties mapped onto librdkafka's names; every other
    property (librdkafka's own names included) is passed through unchanged."""
    out = dict(props)
    if "security.protocol" in out:
        out["security.protocol"] = out["security.protocol"].strip().upper()
    if "sasl.mechanism" in out:
        out.setdefault("sasl.mechanisms", out.pop("sasl.mechanism").strip().upper())
    jaas = out.pop("sasl.jaas.config", None)
    if jaas is not None:
        found = jaas_options(jaas)
        if "username" not in found or "password" not in found:
            raise SecurityConfigError("'sasl.jaas.config' must give username=\"...\" and "
                                      "password=\"...\"")
        out.setdefault("sasl.username", found["username"])
        out.setdefault("sasl.password", found["password"])
    _pem_type(out, "ssl.truststore.type")
    for java, rdkafka in (("ssl.truststore.location", "ssl.ca.location"),
                          ("ssl.truststore.certificates", "ssl.ca.pem")):
        if java in out:
            out.setdefault(rdkafka, out.pop(java))
    out.pop("ssl.truststore.type", None)
    out.pop("ssl.truststore.password", None)  # PEM truststores have none
    if out.get("ssl.keystore.type", "PEM").strip().upper() == "PKCS12":
        # librdkafka reads PKCS12 keystores itself (ssl.keystore.location / .password)
        out.pop("ssl.keystore.type")
        return _endpoint(out)
    _pem_type(out, "ssl.keystore.type")
    for java, rdkafka in (("ssl.keystore.certificate.chain", "ssl.certificate.pem"),
                          ("ssl.keystore.key", "ssl.key.pem")):
        if java in out:
            out.setdefault(rdkafka, out.pop(java))
    keystore = out.pop("ssl.keystore.location", None)
    if keystore is not None:  # a PEM keystore: the private key and its certificate chain
        out.setdefault("ssl.certificate.location", keystore)
        out.setdefault("ssl.key.location", keystore)
    out.pop("ssl.keystore.type", None)
    out.pop("ssl.keystore.password", None)  # a PEM key's password is ssl.key.password
    return _endpoint(out)


def _endpoint(out: dict[str, str]) -> dict[str, str]:
    """Kafka's empty `ssl.endpoint.identification.algorithm` is librdkafka's `none`."""
    algorithm = out.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        out["ssl.endpoint.identification.algorithm"] = algorithm.strip().lower() or "none"
    return out


def read_properties(path: str) -> dict[str, str]:
    """A Java `.properties` file (`key=value` or `key: value`, `#`/`!` comments, `\\`
    continuations), as Kafka's `--command-config` reads it."""
    out: dict[str, str] = {}
    pending = ""
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = pending + raw.strip() if pending else raw.strip()
            if line.endswith("\\") and not line.endswith("\\\\"):
                pending = line[:-1]
                continue
            pending = ""
            if not line or line[0] in "#!":
                continue
            m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", line)
            if m is None:
                out[line] = ""
            else:
                out[m.group(1)] = m.group(2)
    return out
