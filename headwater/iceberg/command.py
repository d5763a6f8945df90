"""`headwater iceberg-writer`: the table writer's process (the broker starts it, see
`launcher.py`; docs/iceberg.md); `headwater iceberg-spark-conf`: what Spark needs to read
the tables."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import signal
import time
from pathlib import Path
from typing import Any

from .launcher import CATALOG_URI_ENV, PROPERTIES_ENV


def add_parser(sub: Any) -> None:
    p = sub.add_parser("iceberg-writer",
                       help="write the topics with headwater.iceberg.mode as Iceberg tables "
                            "(the broker runs it)")
    p.add_argument("--bootstrap-server", required=True, help="HOST:PORT of its broker")
    p.add_argument("--node-id", type=int, required=True,
                   help="the broker's node id: the partitions it leads are written")
    p.add_argument("--catalog-uri", default=os.environ.get(CATALOG_URI_ENV),
                   help="SQLAlchemy URI of Iceberg's SQL catalog (default: "
                        f"${CATALOG_URI_ENV}, as the broker passes it)")
    p.add_argument("--warehouse", required=True, help="where data and metadata files go")
    p.add_argument("--namespace", default="db", help="the tables' namespace")
    p.add_argument("--poll-ms", type=int, default=1000,
                   help="how often the topics and their configs are read")
    p.add_argument("--log-level", default="INFO")
    p.set_defaults(func=run)

    c = sub.add_parser("iceberg-spark-conf",
                       help="print the --packages and --conf options with which pyspark or "
                            "spark-submit reads the topics' tables (headwater.db.<topic>)")
    where = c.add_mutually_exclusive_group(required=True)
    where.add_argument("--data-dir", type=Path,
                       help="a one-node broker's data directory (its SQLite catalog)")
    where.add_argument("--config", type=Path,
                       help="a cluster broker's properties file (the shared log's "
                            "PostgreSQL and object store, their keys)")
    where.add_argument("--catalog-uri", help="headwater.iceberg.catalog.uri of the brokers")
    c.add_argument("--warehouse", help="headwater.iceberg.warehouse (with --catalog-uri)")
    c.add_argument("--connector", action="store_true",
                   help="print instead, as JSON, the options with which format(\"headwater\") "
                        "reads a topic's history from its table (historyFromTable)")
    c.set_defaults(func=print_spark_conf)


def print_spark_conf(args: argparse.Namespace) -> None:
    from .launcher import default_catalog, shared_catalog
    from .spark_conf import PACKAGES, catalog_conf

    properties: dict[str, str] = {}
    namespace = "db"
    if args.data_dir is not None:
        uri, warehouse = default_catalog(args.data_dir.resolve())
    elif getattr(args, "config", None) is not None:
        from ..config import BrokerConfig, ConfigError
        from ..shared.settings import SettingError, SharedSettings

        try:
            config = BrokerConfig.load(args.config, {})
            settings = SharedSettings.from_config(config)
        except (OSError, ConfigError, SettingError) as exc:
            raise SystemExit(f"iceberg-spark-conf --config {args.config}: {exc}") from None
        uri, warehouse, properties = shared_catalog(settings)
        uri = config.get("headwater.iceberg.catalog.uri") or uri
        warehouse = config.get("headwater.iceberg.warehouse") or warehouse
        namespace = config.get("headwater.iceberg.namespace") or namespace
    else:
        uri, warehouse = args.catalog_uri, args.warehouse
        if not warehouse:
            raise SystemExit("--warehouse is needed with --catalog-uri")
    if getattr(args, "connector", False):
        print(json.dumps({"historyFromTable": "true", "iceberg.uri": uri,
                          "iceberg.warehouse": warehouse, "iceberg.namespace": namespace,
                          **{f"iceberg.{k}": v for k, v in properties.items()}}, indent=2))
        return
    options = ["--packages", ",".join(PACKAGES)]
    for key, value in catalog_conf(uri, warehouse, properties).items():
        options += ["--conf", f"{key}={value}"]
    print(shlex.join(options))


def run(args: argparse.Namespace) -> None:
    from .tables import open_catalog
    from .writer import TableWriter, WriterSettings

    if not args.catalog_uri:
        raise SystemExit(f"iceberg-writer: no --catalog-uri (nor ${CATALOG_URI_ENV})")
    properties = json.loads(os.environ.get(PROPERTIES_ENV) or "{}")
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    log = logging.getLogger("headwater.iceberg")
    log.info("table writer for node %d: warehouse %s", args.node_id, args.warehouse)
    failures = 0
    while not stopping:  # the catalog's database may be away, or three writers
        try:  # creating its tables at once: one of them loses the race
            catalog = open_catalog(args.catalog_uri, args.warehouse, properties)
            break
        except Exception as exc:  # noqa: BLE001 - logged, tried again
            failures += 1
            if failures == 1 or failures % 60 == 0:
                log.warning("table writer: catalog not opened: %s: %s (trying again)",
                            type(exc).__name__, exc)
            time.sleep(args.poll_ms / 1000)
    else:
        return
    writer = TableWriter(WriterSettings(args.bootstrap_server, args.node_id, args.namespace,
                                        args.poll_ms / 1000), catalog)
    writer.run(lambda: bool(stopping))
