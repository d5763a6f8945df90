"""Files written whole and fsynced, and directories fsynced: the durable steps of a
segment swap, a transaction index and a metadata snapshot (no segment knowledge here,
so the segment modules and `swap.py` can all use it)."""

from __future__ import annotations

import os
from pathlib import Path


def write_synced(path: Path, data: bytes) -> None:
    """Create (or truncate) `path` with `data`, fsynced before returning."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
