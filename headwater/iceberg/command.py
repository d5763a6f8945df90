"""`headwater iceberg-writer`: the table writer's process (the broker starts it, see
`launcher.py`; docs/iceberg.md)."""

from __future__ import annotations

import argparse
import logging
import signal
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("iceberg-writer",
                       help="write the topics with headwater.iceberg.mode as Iceberg tables "
                            "(the broker runs it)")
    p.add_argument("--bootstrap-server", required=True, help="HOST:PORT of its broker")
    p.add_argument("--node-id", type=int, required=True,
                   help="the broker's node id: the partitions it leads are written")
    p.add_argument("--catalog-uri", required=True,
                   help="SQLAlchemy URI of Iceberg's SQL catalog")
    p.add_argument("--warehouse", required=True, help="where data and metadata files go")
    p.add_argument("--namespace", default="db", help="the tables' namespace")
    p.add_argument("--poll-ms", type=int, default=1000,
                   help="how often the topics and their configs are read")
    p.add_argument("--log-level", default="INFO")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    from .tables import open_catalog
    from .writer import TableWriter, WriterSettings

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    logging.getLogger("headwater.iceberg").info(
        "table writer for node %d: catalog %s, warehouse %s", args.node_id,
        args.catalog_uri, args.warehouse)
    writer = TableWriter(WriterSettings(args.bootstrap_server, args.node_id, args.namespace,
                                        args.poll_ms / 1000),
                         open_catalog(args.catalog_uri, args.warehouse))
    writer.run(lambda: bool(stopping))
