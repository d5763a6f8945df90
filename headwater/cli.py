"""Command line: `headwater serve` runs a single-node broker (broker + controller)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import subprocess
import sys
from typing import Any

from . import __version__
from .config import BrokerConfig, ConfigError


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
    serve.add_argument("--console-listen", metavar="HOST:PORT",
                       help="also run the web console (a child process) on this address "
                            "(docs/console.md)")
    serve.add_argument("--console-command-config", metavar="FILE",
                       help="the console's client properties when the listener needs "
                            "SASL/TLS (as `headwater console --command-config`)")
    from .admin import (
        acls,
        cluster,
        completion,
        configs,
        consume,
        groups,
        metadata,
        produce,
        share_groups,
        topics,
        transactions,
    )
    from .admin.connect import options_anywhere

    topics.add_parser(sub)
    produce.add_parser(sub)
    consume.add_parser(sub)
    groups.add_parser(sub)
    metadata.add_parser(sub)
    share_groups.add_parser(sub)
    transactions.add_parser(sub)
    configs.add_parser(sub)
    acls.add_parser(sub)
    cluster.add_parser(sub)
    from .console import command as console
    from .iceberg import command as iceberg

    console.add_parser(sub)
    iceberg.add_parser(sub)
    completion.add_parser(sub, parser)
    for command in sub.choices.values():
        options_anywhere(command)
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


async def _serve(config: BrokerConfig, args: argparse.Namespace | None = None) -> None:
    from .broker import Broker

    broker = Broker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await broker.start()
    console = _start_console(broker, args) if args is not None else None
    try:
        await stop.wait()
    finally:
        logging.getLogger("headwater").info("shutting down")
        if console is not None:
            _stop_console(console)
        await broker.stop()


def _start_console(broker: Any, args: argparse.Namespace) -> subprocess.Popen[bytes] | None:
    """`--console-listen`: the console as a child process, a Kafka client of this broker.
    A process rather than a thread of this one: its sampling and page rendering would
    otherwise take the GIL from the broker's event loop (docs/console.md)."""
    if not getattr(args, "console_listen", None):
        return None
    from .console.command import child_command

    host = broker.listen_host if broker.listen_host not in ("", "0.0.0.0", "::") \
        else "127.0.0.1"
    argv = child_command(f"{host}:{broker.listen_port}", args.console_listen,
                         args.console_command_config)
    child = subprocess.Popen(argv, preexec_fn=_die_with_parent)
    logging.getLogger("headwater").info("console on http://%s/ (process %d)",
                                        args.console_listen, child.pid)
    return child


def _die_with_parent() -> None:
    """In the console child (Linux): SIGTERM when the broker dies, even by kill -9, so no
    console outlives its broker."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _stop_console(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(args, "log_level", "WARNING").upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "serve":
        import faulthandler
        import signal

        from . import allocator
        from .broker import StartupError

        # `kill -USR1` prints every thread's stack to stderr (a broker that hangs)
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        allocator.tune()

        try:
            config = config_from_args(args)
        except ConfigError as exc:  # a config provider's reference that cannot be read
            logging.getLogger("headwater").error("cannot start: %s", exc)
            return 1
        if args.console_listen:  # beside a broker: loopback only (TLS: `headwater console`)
            from .console import listen

            try:
                listen.check(args.console_listen, tls=False, insecure=False)
            except listen.ListenError as exc:
                print(f"error: {exc}".replace("--tls-cert and --tls-key, or --insecure-listen",
                                              "`headwater console` with --tls-cert and "
                                              "--tls-key"), file=sys.stderr)
                return 2
        try:
            try:
                import uvloop
            except ImportError:
                asyncio.run(_serve(config, args))
            else:
                uvloop.run(_serve(config, args))
        except (StartupError, ConfigError) as exc:  # one line naming it, no traceback
            logging.getLogger("headwater").error("cannot start: %s", exc)
            return 1
        return 0
    from .admin.groups import AdminError
    from .wire.client_properties import SecurityConfigError
    from .wire.client_security import AuthenticationError

    try:
        out = args.func(args)  # None: the command printed its own output
        if out is not None:
            print(out)
    except BrokenPipeError:  # `headwater consume ... | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130
    except (AdminError, OSError, AuthenticationError, SecurityConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
