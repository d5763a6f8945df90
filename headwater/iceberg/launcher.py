"""The broker's side: starts the table writer (a child process, `command.py`) once a
topic has `headwater.iceberg.mode` other than `disabled`, and stops it with the broker.

A process rather than a task of the broker: Parquet encoding and pyiceberg's catalog
calls would otherwise hold the broker's event loop (and GIL) for the length of a commit.
Started lazily, so a broker without tables pays nothing (not even the imports)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..metadata.image import TOPIC_RESOURCE, MetadataImage
from ..shared.settings import SharedSettings

log = logging.getLogger("headwater.iceberg")

MODE = "headwater.iceberg.mode"


def tables_enabled(image: MetadataImage) -> bool:
    """Some topic of `image` is written as a table."""
    return any(rtype == TOPIC_RESOURCE and configs.get(MODE, "disabled") != "disabled"
               and image.topic(name) is not None
               for (rtype, name), configs in image.configs.items())


def default_catalog(data_dir: Path) -> tuple[str, str]:
    """One node's catalog and warehouse: SQLite and files in the data directory."""
    root = data_dir / "iceberg"
    return f"sqlite:///{root / 'catalog.db'}", (root / "warehouse").as_uri()


#: The child's environment variables holding the catalog's URI and the file IO's
#: properties: they may hold passwords, which a command line would show to `ps`.
CATALOG_URI_ENV = "HEADWATER_ICEBERG_CATALOG_URI"
PROPERTIES_ENV = "HEADWATER_ICEBERG_PROPERTIES"
CHECKSUMS_ENV = "AWS_REQUEST_CHECKSUM_CALCULATION"


def shared_catalog(settings: SharedSettings) -> tuple[str, str, dict[str, str]]:
    """A cluster's catalog: Iceberg's SQL catalog in the shared log's PostgreSQL (its own
    tables, iceberg_tables and iceberg_namespace_properties, beside the log's), files
    under `iceberg/` of the object store, with the store's endpoint and keys."""
    uri = "postgresql+psycopg2://" + settings.database.split("://", 1)[1]
    warehouse = settings.objects.rstrip("/") + "/iceberg"
    props = {"s3.region": settings.region}
    if settings.endpoint:
        props["s3.endpoint"] = settings.endpoint
    if settings.access_key:
        props["s3.access-key-id"] = settings.access_key
    if settings.secret_key:
        props["s3.secret-access-key"] = settings.secret_key
    return uri, warehouse, props


class TableWriterLauncher:
    """Runs the writer child while tables exist (`on_image`, a metadata subscriber)."""

    def __init__(self, argv: list[str], catalog_dir: Path | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.argv = argv
        self.catalog_dir = catalog_dir
        self.env = {**os.environ, **(env or {})}
        self.child: subprocess.Popen[bytes] | None = None

    def on_image(self, _old: MetadataImage, new: MetadataImage) -> None:
        if self.child is not None and self.child.poll() is None:
            return
        if not tables_enabled(new):
            return
        if self.child is not None:
            log.warning("table writer exited with %s; starting it again",
                        self.child.returncode)
        if self.catalog_dir is not None:
            self.catalog_dir.mkdir(parents=True, exist_ok=True)
        self.child = subprocess.Popen(self.argv, env=self.env, preexec_fn=_die_with_parent)
        log.info("table writer started (process %d)", self.child.pid)

    def stop(self) -> None:
        child, self.child = self.child, None
        if child is None or child.poll() is not None:
            return
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def writer_command(bootstrap: str, node_id: int, warehouse: str, namespace: str,
                   extra: Iterable[str] = ()) -> list[str]:
    """The child's command line; its catalog comes in `writer_env`'s variables."""
    return [sys.executable, "-m", "headwater.cli", "iceberg-writer",
            "--bootstrap-server", bootstrap, "--node-id", str(node_id),
            "--warehouse", warehouse, "--namespace", namespace, *extra]


def writer_env(catalog_uri: str, properties: Mapping[str, str]) -> dict[str, str]:
    """The child's catalog, and its S3 client's checksums as before AWS's 2025 SDKs: by
    default pyarrow's SDK now sends CRC checksums in CompleteMultipartUpload, which
    S3-compatible stores such as versitygw refuse (400 "Unable to parse": 162 of 200
    small writes here); only where the operation requires one (unless the operator
    chose otherwise in the broker's environment)."""
    return {CATALOG_URI_ENV: catalog_uri, PROPERTIES_ENV: json.dumps(dict(properties)),
            CHECKSUMS_ENV: os.environ.get(CHECKSUMS_ENV, "WHEN_REQUIRED")}


def _die_with_parent() -> None:
    """In the child (Linux): SIGTERM when the broker dies, even by kill -9."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
