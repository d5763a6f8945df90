"""Command line: `headwater serve` runs a single-node broker (broker + controller)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from . import __version__
from .config import BrokerConfig


def _parse_override(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value.strip()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="headwater", description=__doc__)
    parser.add_argument("--version", action="version", version=f"headwater {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a single-node broker in the foreground")
    serve.add_argument("--config", help="a Kafka-style server.properties file")
    serve.add_argument("--data-dir", help="data directory (log.dirs); default ./data")
    serve.add_argument("--listen", help="HOST:PORT to listen on; default 127.0.0.1:9092")
    serve.add_argument("--advertised-listener", help="HOST:PORT clients are told to use")
    serve.add_argument("--node-id", type=int, help="node.id (default 1)")
    serve.add_argument("--fsync", choices=["never", "always"],
                       help="'always': fsync every acknowledged batch before answering "
                            "(default 'never': rely on the page cache like Kafka)")
    serve.add_argument("--override", action="append", type=_parse_override, default=[],
                       metavar="KEY=VALUE", help="set any Kafka config key (repeatable)")
    serve.add_argument("--log-level", default="INFO")
    serve.add_argument("--metrics-listen", metavar="HOST:PORT",
                       help="serve Prometheus metrics over HTTP on this address")
    from .admin import groups, metadata, share_groups, transactions

    groups.add_parser(sub)
    metadata.add_parser(sub)
    share_groups.add_parser(sub)
    transactions.add_parser(sub)
    return parser


def config_from_args(args: argparse.Namespace) -> BrokerConfig:
    overrides: dict[str, str] = dict(args.override)
    if args.data_dir:
        overrides["log.dirs"] = args.data_dir
    if args.listen and "listeners" not in overrides:  # --override listeners= wins
        overrides["listeners"] = f"PLAINTEXT://{args.listen}"
    if args.advertised_listener:
        overrides["advertised.listeners"] = f"PLAINTEXT://{args.advertised_listener}"
    if args.node_id is not None:
        overrides["node.id"] = str(args.node_id)
    if args.fsync:
        overrides["headwater.fsync"] = args.fsync
    if args.metrics_listen:
        overrides["headwater.metrics.listen"] = args.metrics_listen
    return BrokerConfig.load(args.config, overrides)


async def _serve(config: BrokerConfig) -> None:
    from .broker import Broker

    broker = Broker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await broker.start()
    try:
        await stop.wait()
    finally:
        logging.getLogger("headwater").info("shutting down")
        await broker.stop()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(args, "log_level", "WARNING").upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "serve":
        from .broker import StartupError

        config = config_from_args(args)
        try:
            try:
                import uvloop
            except ImportError:
                asyncio.run(_serve(config))
            else:
                uvloop.run(_serve(config))
        except StartupError as exc:  # a wrong setting: one line naming it, no traceback
            logging.getLogger("headwater").error("cannot start: %s", exc)
            return 1
        return 0
    from .admin.groups import AdminError
    from .wire.client_properties import SecurityConfigError
    from .wire.client_security import AuthenticationError

    try:
        print(args.func(args))
    except (AdminError, OSError, AuthenticationError, SecurityConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
