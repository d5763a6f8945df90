"""`headwater console`: the web console as a process of its own, a Kafka client of the
cluster like the other admin commands (same connection options), serving HTTP(S) with
uvicorn. `headwater serve --console-listen` starts this same command as a child process
(see `child_command`)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from ..admin.connect import add_arguments
from . import listen
from .connection import Target
from .history import History, Sampler

log = logging.getLogger("headwater.console")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("console", help="the web console: overview, topics, groups, share "
                                       "groups, transactions, ACLs (docs/console.md)")
    add_arguments(p)
    p.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT",
                   help="where the console serves HTTP (default 127.0.0.1:8080)")
    p.add_argument("--allow-writes", action="store_true",
                   help="allow the write actions (create a topic, delete an ACL)")
    p.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate")
    p.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    p.add_argument("--insecure-listen", action="store_true",
                   help="allow plain HTTP on a non-loopback address")
    p.add_argument("--sample-interval", type=float, default=5.0, metavar="SECONDS",
                   help="how often offsets are sampled for the charts (default 5)")
    p.add_argument("--history", type=int, default=120, metavar="SAMPLES",
                   help="samples kept in memory (default 120: 10 minutes at 5 s)")
    p.add_argument("--log-level", default="INFO")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    """Serve until interrupted. A refused listen address or missing TLS file is one
    line on stderr and exit status 2."""
    if bool(args.tls_cert) != bool(args.tls_key):
        _refuse("--tls-cert and --tls-key go together; hint: give both PEM files")
    try:
        host, port = listen.check(args.listen, tls=bool(args.tls_cert),
                                  insecure=args.insecure_listen)
    except listen.ListenError as exc:
        _refuse(str(exc))
    import uvicorn

    from .app import Settings, create_app

    target = Target(args.bootstrap_server, args.command_config, list(args.command_property))
    history = History(args.history)
    sampler = Sampler(target, history, args.sample_interval)
    settings = Settings(target, history, allow_writes=args.allow_writes,
                        refresh_s=max(1.0, args.sample_interval))
    app = create_app(settings)
    scheme = "https" if args.tls_cert else "http"
    sampler.start()
    log.info("console on %s://%s:%d/ for %s (%s)", scheme, host, port, args.bootstrap_server,
             "writes allowed" if args.allow_writes else "read-only")
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning",
                    ssl_certfile=args.tls_cert, ssl_keyfile=args.tls_key)
    finally:
        sampler.stop()


def _refuse(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def child_command(bootstrap: str, listen_at: str, command_config: str | None = None,
                  extra: list[str] | None = None) -> list[str]:
    """The argv of a console beside a broker (`headwater serve --console-listen`)."""
    argv = [sys.executable, "-m", "headwater.cli", "console", "--bootstrap-server", bootstrap,
            "--listen", listen_at]
    if command_config:
        argv += ["--command-config", command_config]
    return argv + list(extra or [])
