"""Kafka's listener configuration: `listeners`, `listener.security.protocol.map`,
`advertised.listeners`, and per-listener overrides (`listener.name.<name>.<key>`).

`listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094` opens one socket per
entry; a name maps to one of the four security protocols (the standard names map to
themselves); each listener advertises its own address, and a client is told the address
of the listener it came in on (Metadata, FindCoordinator, DescribeCluster), as Kafka does.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import BrokerConfig, ConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    protocol: str
    host: str
    port: int
    advertised_host: str
    advertised_port: int

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def _split(entry: str) -> tuple[str, str, int]:
    name, sep, address = entry.strip().partition("://")
    if not sep:  # headwater's older form HOST:PORT
        name, address = "PLAINTEXT", entry.strip()
    host, _, port = address.rpartition(":")
    try:
        return name.upper(), host, int(port)
    except ValueError:
        raise ConfigError(f"listener {entry!r}: expected NAME://HOST:PORT") from None


def protocol_map(config: BrokerConfig) -> dict[str, str]:
    mapping = {p: p for p in PROTOCOLS}
    for pair in (config.get("listener.security.protocol.map") or "").split(","):
        if pair.strip():
            name, _, protocol = pair.partition(":")
            mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def parse(config: BrokerConfig) -> list[Listener]:
    mapping = protocol_map(config)
    advertised: dict[str, tuple[str, int]] = {}
    for entry in (config.get("advertised.listeners") or "").split(","):
        if entry.strip():
            name, host, port = _split(entry)
            advertised[name] = (host, port)
    out: list[Listener] = []
    for entry in config.get_str("listeners").split(","):
        if not entry.strip():
            continue
        name, host, port = _split(entry)
        protocol = mapping.get(name)
        if protocol not in PROTOCOLS:
            raise ConfigError(f"listener {name}: no security protocol for it in "
                              "listener.security.protocol.map")
        if any(existing.name == name for existing in out):
            raise ConfigError(f"listener {name} is configured twice")
        shown = host if host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        adv_host, adv_port = advertised.get(name, (shown, port))
        out.append(Listener(name, protocol, host or "0.0.0.0", port, adv_host, adv_port))
    if not out:
        raise ConfigError("no listeners configured")
    return out


def inter_broker(config: BrokerConfig, listeners: list[Listener]) -> Listener:
    """The listener the other brokers of a cluster reach this one on: Kafka's
    `inter.broker.listener.name`, else the listener named for
    `security.inter.broker.protocol`, else (headwater's default) the first listener."""
    names = {listener.name: listener for listener in listeners}
    for key in ("inter.broker.listener.name", "security.inter.broker.protocol"):
        wanted = (config.get(key) or "").strip().upper()
        if wanted:
            if wanted not in names:
                raise ConfigError(f"{key}={wanted}: no listener of that name in listeners "
                                  f"({', '.join(names)})")
            return names[wanted]
    return listeners[0]


def listener_config(config: BrokerConfig, listener: str, key: str,
                    mechanism: str | None = None) -> str | None:
    """Kafka's lookup order: `listener.name.<listener>[.<mechanism>].<key>`, then `<key>`."""
    prefix = f"listener.name.{listener.lower()}."
    if mechanism:
        value = config.get(f"{prefix}{mechanism.lower()}.{key}")
        if value:
            return value
    return config.get(prefix + key) or config.get(key)
