"""How the admin commands reach a broker: `--bootstrap-server`, and Kafka's client
security settings as Kafka's tools take them (`--command-config FILE`, a Java properties
file, and `--command-property KEY=VALUE`, which wins over the file)."""

from __future__ import annotations

import argparse

from ..wire.client import RawClient
from ..wire.client_properties import read_properties, to_librdkafka
from ..wire.client_security import ClientSecurity


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties (security.protocol, sasl.mechanism, "
                             "sasl.jaas.config, ssl.truststore.location, ...)")
    parser.add_argument("--command-property", action="append", type=_key_value, default=[],
                        metavar="KEY=VALUE", help="one client property (repeatable)")


def security(args: argparse.Namespace) -> ClientSecurity:
    props = read_properties(args.command_config) if getattr(args, "command_config", None) \
        else {}
    props.update(dict(getattr(args, "command_property", [])))
    return ClientSecurity.from_config(to_librdkafka(props))


def connect(args: argparse.Namespace) -> RawClient:
    """A client to the first bootstrap server that answers, secured as the command says
    (a refused authentication is final: it is not an OSError)."""
    secured = security(args)
    last: OSError | None = None
    for server in args.bootstrap_server.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            return RawClient(host.strip("[]") or "127.0.0.1", int(port or 9092),
                             security=secured)
        except OSError as exc:
            last = exc
    assert last is not None
    raise last
