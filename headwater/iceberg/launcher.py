"""The broker's side: starts the table writer (a child process, `command.py`) once a
topic has `headwater.iceberg.mode` other than `disabled`, and stops it with the broker.

A process rather than a task of the broker: Parquet encoding and pyiceberg's catalog
calls would otherwise hold the broker's event loop (and GIL) for the length of a commit.
Started lazily, so a broker without tables pays nothing (not even the imports)."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from ..metadata.image import MetadataImage

log = logging.getLogger("headwater.iceberg")

MODE = "headwater.iceberg.mode"
TOPIC_RESOURCE = 2


def tables_enabled(image: MetadataImage) -> bool:
    """Some topic of `image` is written as a table."""
    return any(rtype == TOPIC_RESOURCE and configs.get(MODE, "disabled") != "disabled"
               and image.topic(name) is not None
               for (rtype, name), configs in image.configs.items())


def default_catalog(data_dir: Path) -> tuple[str, str]:
    """One node's catalog and warehouse: SQLite and files in the data directory."""
    root = data_dir / "iceberg"
    return f"sqlite:///{root / 'catalog.db'}", (root / "warehouse").as_uri()


class TableWriterLauncher:
    """Runs the writer child while tables exist (`on_image`, a metadata subscriber)."""

    def __init__(self, argv: list[str], catalog_dir: Path | None = None) -> None:
        self.argv = argv
        self.catalog_dir = catalog_dir
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
        self.child = subprocess.Popen(self.argv, preexec_fn=_die_with_parent)
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


def writer_command(bootstrap: str, node_id: int, catalog_uri: str, warehouse: str,
                   namespace: str, extra: Iterable[str] = ()) -> list[str]:
    return [sys.executable, "-m", "headwater.cli", "iceberg-writer",
            "--bootstrap-server", bootstrap, "--node-id", str(node_id),
            "--catalog-uri", catalog_uri, "--warehouse", warehouse,
            "--namespace", namespace, *extra]


def _die_with_parent() -> None:
    """In the child (Linux): SIGTERM when the broker dies, even by kill -9."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
