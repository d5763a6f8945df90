"""Converting a metadata log written as JSON (before the KRaft layout) on first start.

The records are re-encoded one for one, batch for batch, into a new log that starts
with `FeatureLevelRecord(metadata.version)` as Kafka's does, so the offsets move up by
one; nothing refers to metadata offsets across a restart. The new log is built beside
the old one (`<dir>.converting`), then swapped in with two renames; the JSON log is kept
as `<dir>.json-backup` (headwater ignores it; delete it once satisfied). A crash before
the swap leaves the JSON log in place and the next start converts again; a crash
between the two renames is finished on the next start.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from ..log.synced import fsync_dir
from ..records.batch import (
    BatchRecord,
    Record,
    build_batch,
    decode_records,
    iter_batches,
    set_base_offset,
)
from . import codec, kraft
from . import records as R

log = logging.getLogger("headwater.controller")

CONVERTING = ".converting"
BACKUP = ".json-backup"
SEGMENT = "00000000000000000000.log"


def _segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def _batches(directory: Path) -> Iterator[list[Record]]:
    for segment in _segments(directory):
        data = segment.read_bytes()
        for pos, header in iter_batches(data):
            if not header.is_control:  # never the controller's (see Controller.load)
                yield decode_records(data[pos:pos + header.size])


def needs_conversion(directory: Path) -> bool:
    """True if any record is JSON of a type that has a KRaft layout."""
    for records in _batches(directory):
        for rec in records:
            if rec.key and kraft.has_codec(codec.decode(rec.key, rec.value or b"")):
                return True
    return False


def convert_json_log(directory: Path) -> int:
    """Convert the metadata log in `directory` if it holds JSON records; returns how
    many records were rewritten (0: nothing to do)."""
    building = directory.with_name(directory.name + CONVERTING)
    backup = directory.with_name(directory.name + BACKUP)
    if not directory.exists() and building.exists() and backup.exists():
        os.rename(building, directory)  # a crash came between the two renames
        fsync_dir(directory.parent)
        log.info("metadata log conversion finished (interrupted before)")
        return 0
    if not directory.is_dir() or not needs_conversion(directory):
        return 0
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir()
    offset = count = 0
    first = [R.FeatureLevelRecord("metadata.version", R.METADATA_VERSION)]
    with open(building / SEGMENT, "wb") as out:
        for records in _batches(directory):
            entries: list[BatchRecord] = []
            for item in first:
                entries.append((*codec.encode(item), [], records[0].timestamp if records else 0))
            first = []
            for rec in records:
                key, value = codec.encode(codec.decode(rec.key, rec.value or b""))
                entries.append((key, value, rec.headers, rec.timestamp))
            if not entries:
                continue
            data = bytearray(build_batch(entries))
            set_base_offset(data, 0, offset)
            out.write(data)
            offset += len(entries)
            count += len(entries)
        out.flush()
        os.fsync(out.fileno())
    fsync_dir(building)
    if backup.exists():
        shutil.rmtree(backup)
    os.rename(directory, backup)
    os.rename(building, directory)
    fsync_dir(directory.parent)
    log.warning("metadata log converted from JSON to KRaft's layout: %d records; the JSON "
                "log is kept in %s", count, backup)
    return count
