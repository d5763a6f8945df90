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


def add_arguments(parser: argparse.ArgumentParser, inherited: bool = False) -> None:
    """The connection options; `inherited`: a subcommand's copy of its command's, with no
    default of its own (given there, it wins; absent, the command's value stays)."""
    default = argparse.SUPPRESS if inherited else None
    parser.add_argument("--bootstrap-server",
                        default=argparse.SUPPRESS if inherited else "127.0.0.1:9092")
    parser.add_argument("--command-config", metavar="FILE", default=default,
                        help="client properties (security.protocol, sasl.mechanism, "
                             "sasl.jaas.config, ssl.truststore.location, ...)")
    parser.add_argument("--command-property", action="append", type=_key_value,
                        default=argparse.SUPPRESS if inherited else [],
                        metavar="KEY=VALUE", help="one client property (repeatable)")


def options_anywhere(parser: argparse.ArgumentParser) -> None:
    """Let the subcommands of a command that takes the connection options (and --json)
    before them (`headwater groups --bootstrap-server B list`, as Kafka's tools) take them
    after them too (`headwater groups list --bootstrap-server B`, as `topic` does)."""
    own = {o for a in parser._actions for o in a.option_strings}
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for child in action.choices.values():
            theirs = {o for a in child._actions for o in a.option_strings}
            if "--bootstrap-server" in own and "--bootstrap-server" not in theirs:
                add_arguments(child, inherited=True)
            if "--json" in own and "--json" not in theirs:
                child.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                                   help="machine-readable output")
            options_anywhere(child)


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
