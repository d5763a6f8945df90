"""KRaft snapshots of the metadata image, in Kafka's file format.

A snapshot lets a start load the image at offset N and replay only the log from N on,
so start-up time follows the size of the image, not the length of its history. The file
is what Kafka's `RecordsSnapshotWriter` writes, so `kafka-dump-log
--cluster-metadata-decoder` and `kafka-metadata-shell --snapshot` read it:

* named `<end offset:020d>-<epoch:010d>.checkpoint` in `__cluster_metadata-0`, where
  the end offset is exclusive (the snapshot holds every record below it);
* record batches numbered from offset 0: a control batch with a SnapshotHeaderRecord
  (control type 3), batches of metadata records framed as in the log (`kraft.py`), and
  a control batch with a SnapshotFooterRecord (control type 4). A control record's key
  is (int16 version 0, int16 type); its value is the record in its flexible encoding.

Writing is atomic: `<name>.part` (Kafka's partial suffix), fsync, rename, fsync of the
directory. Reading checks every batch's CRC, the header first and the footer last, so a
torn or damaged file is refused whole and the caller falls back to an older one.

`image_records` and `encode`/`decode` are pure (bytes in, bytes out); only the
functions under "files" touch the disk.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..log.synced import fsync_dir, write_synced
from ..records.batch import (
    CRC_OFFSET,
    HEADER_SIZE,
    MIN_BATCH_LENGTH,
    BatchRecord,
    batch_crc,
    build_batch,
    check_header,
    decode_records,
    parse_header,
)
from ..storage.errors import LogError
from . import codec, kraft
from . import records as R
from .image import MetadataImage

log = logging.getLogger("headwater.controller")

SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = SUFFIX + ".part"
SNAPSHOT_HEADER = 3  # Kafka's ControlRecordType.SNAPSHOT_HEADER
SNAPSHOT_FOOTER = 4  # ControlRecordType.SNAPSHOT_FOOTER
RECORDS_PER_BATCH = 1000
# headwater is one node without Raft elections: its quorum epoch never changes.
EPOCH = 0
# How many snapshots are kept: the newest and the one before it, so that a damaged newest
# snapshot still has an older one with the whole log after it.
KEEP = 2

_I16 = struct.Struct(">h")
_CONTROL_KEY = struct.Struct(">hh")
_HEADER_VALUE = struct.Struct(">hq")  # Version, LastContainedLogTimestamp (+ tags)
_U32 = struct.Struct(">I")


class SnapshotError(ValueError):
    """A snapshot file that is torn, damaged or not one headwater reads."""


@dataclass(frozen=True, slots=True)
class SnapshotId:
    """Kafka's OffsetAndEpoch of a snapshot: `offset` is exclusive."""

    offset: int
    epoch: int

    @property
    def name(self) -> str:
        return f"{self.offset:020d}-{self.epoch:010d}{SUFFIX}"

    @staticmethod
    def parse(name: str) -> SnapshotId | None:
        if not name.endswith(SUFFIX):
            return None
        offset, sep, epoch = name[:-len(SUFFIX)].partition("-")
        if not (sep and offset.isdigit() and epoch.isdigit()):
            return None
        return SnapshotId(int(offset), int(epoch))


# ---- image <-> records ----------------------------------------------------------------

def image_records(image: MetadataImage) -> list[object]:
    """Records that rebuild `image` from empty, in the order Kafka's MetadataImage.write
    uses: features (metadata.version first), then topics, configs, quotas, producer ids,
    ACLs, SCRAM credentials. Every field of MetadataImage must be here (a test checks)."""
    out: list[object] = []
    features = dict(image.features) or {"metadata.version": R.METADATA_VERSION}
    if "metadata.version" in features:
        out.append(R.FeatureLevelRecord("metadata.version", features.pop("metadata.version")))
    out += [R.FeatureLevelRecord(name, level) for name, level in sorted(features.items())]
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        tid = str(topic.topic_id)
        out.append(R.TopicRecord(name, tid))
        out += [R.PartitionRecord(tid, p.partition_id, p.replicas, p.isr, p.leader,
                                  p.leader_epoch, p.partition_epoch)
                for p in topic.partitions]
    for (rtype, rname), values in sorted(image.configs.items()):
        out += [R.ConfigRecord(rtype, rname, key, value) for key, value in values.items()]
    for entity, quotas in image.client_quotas.items():
        out += [R.ClientQuotaRecord(entity, key, value) for key, value in quotas.items()]
    if image.next_producer_id > 0:  # Kafka's ProducerIdsImage writes broker -1, epoch -1
        out.append(R.ProducerIdsRecord(-1, -1, image.next_producer_id))
    out += [R.AccessControlEntryRecord(acl_id, b.resource_type, b.resource_name,
                                       b.pattern_type, b.principal, b.host, b.operation,
                                       b.permission)
            for acl_id, b in image.acls.items()]
    out += list(image.scram.values())
    return out


def image_of(records: list[object], snapshot_id: SnapshotId) -> MetadataImage:
    return MetadataImage().apply(records, snapshot_id.offset - 1)


# ---- the file's bytes -----------------------------------------------------------------

def _control(kind: int, value: bytes, offset: int, epoch: int, now_ms: int) -> bytes:
    key = _CONTROL_KEY.pack(0, kind)
    return build_batch([(key, value, [], now_ms)], base_offset=offset, is_control=True,
                       partition_leader_epoch=epoch)


def encode(records: list[object], snapshot_id: SnapshotId, last_timestamp: int,
           now_ms: int) -> bytes:
    """The whole snapshot file for `records` (the image at `snapshot_id`)."""
    out = bytearray(_control(SNAPSHOT_HEADER, _HEADER_VALUE.pack(0, last_timestamp) + b"\x00",
                             0, snapshot_id.epoch, now_ms))
    offset = 1
    for i in range(0, len(records), RECORDS_PER_BATCH):
        chunk = records[i:i + RECORDS_PER_BATCH]
        entries: list[BatchRecord] = [(*codec.encode(rec), [], now_ms) for rec in chunk]
        out += build_batch(entries, base_offset=offset, partition_leader_epoch=snapshot_id.epoch)
        offset += len(chunk)
    out += _control(SNAPSHOT_FOOTER, _I16.pack(0) + b"\x00", offset, snapshot_id.epoch, now_ms)
    return bytes(out)


def _batches(data: bytes) -> Iterator[tuple[int, int]]:
    """(position, size) of each batch, checked whole: CRC, framing, offsets in sequence."""
    pos, expected = 0, 0
    while pos < len(data):
        if pos + HEADER_SIZE > len(data):
            raise SnapshotError(f"torn batch header at byte {pos}")
        h = parse_header(data, pos)
        problem = check_header(h)
        if problem or h.batch_length < MIN_BATCH_LENGTH:
            raise SnapshotError(f"bad batch at byte {pos}: {problem}")
        if pos + h.size > len(data):
            raise SnapshotError(f"torn batch at byte {pos}")
        if _U32.unpack_from(data, pos + CRC_OFFSET)[0] != batch_crc(data, pos, h.size):
            raise SnapshotError(f"CRC mismatch in the batch at byte {pos}")
        if h.base_offset != expected:
            raise SnapshotError(f"batch at offset {h.base_offset}, expected {expected}")
        expected = h.next_offset
        yield pos, h.size
        pos += h.size


def _control_type(batch: bytes) -> int | None:
    h = parse_header(batch)
    if not h.is_control:
        return None
    rec = decode_records(batch)[0]  # Kafka's header batch may add KRaftVersion, Voters
    if rec.key is None or len(rec.key) != _CONTROL_KEY.size:
        raise SnapshotError("control record without a valid key")
    kind: int
    version, kind = _CONTROL_KEY.unpack(rec.key)
    if version != 0:
        raise SnapshotError(f"control record key version {version}")
    return kind


def decode(data: bytes) -> list[object]:
    """The metadata records of a whole snapshot file; SnapshotError unless it is intact
    (a header first, a footer last, every batch's CRC right, nothing after the footer)."""
    batches = [data[pos:pos + size] for pos, size in _batches(data)]
    if len(batches) < 2:
        raise SnapshotError("no header and footer")
    try:
        if _control_type(batches[0]) != SNAPSHOT_HEADER:
            raise SnapshotError("the first batch is not a SnapshotHeaderRecord")
        if _control_type(batches[-1]) != SNAPSHOT_FOOTER:
            raise SnapshotError("the last batch is not a SnapshotFooterRecord (torn?)")
        out: list[object] = []
        for batch in batches[1:-1]:
            if parse_header(batch).is_control:  # KRaftVersion/Voters records: not ours
                continue
            out += [codec.decode(rec.key or b"", rec.value or b"") for rec in decode_records(batch)]
    except (LogError, kraft.KraftDecodeError, ValueError, KeyError, IndexError) as exc:
        if isinstance(exc, SnapshotError):
            raise
        raise SnapshotError(f"undecodable record: {exc}") from None
    return out


# ---- files ----------------------------------------------------------------------------

def list_ids(directory: Path) -> list[SnapshotId]:
    """The finished snapshots in `directory`, oldest first."""
    found = [SnapshotId.parse(p.name) for p in directory.glob(f"*{SUFFIX}")]
    return sorted((s for s in found if s is not None), key=lambda s: (s.offset, s.epoch))


def write(directory: Path, records: list[object], snapshot_id: SnapshotId,
          last_timestamp: int, now_ms: int) -> Path:
    """Write a snapshot atomically: a crash leaves either no file or the whole one."""
    path = directory / snapshot_id.name
    partial = directory / (snapshot_id.name + ".part")
    data = encode(records, snapshot_id, last_timestamp, now_ms)
    try:
        write_synced(partial, data)
        os.replace(partial, path)
    except OSError:
        partial.unlink(missing_ok=True)
        raise
    fsync_dir(directory)
    return path


def read(directory: Path, snapshot_id: SnapshotId) -> list[object]:
    try:
        data = (directory / snapshot_id.name).read_bytes()
    except OSError as exc:
        raise SnapshotError(str(exc)) from None
    return decode(data)


def load_latest(directory: Path, end_offset: int | None = None, start_offset: int = 0
                ) -> tuple[SnapshotId, list[object]] | None:
    """The newest snapshot that reads whole, with its records; damaged ones are skipped
    with a warning, and so are those the log cannot continue: past its end, or before its
    start (the records between would be missing)."""
    for snapshot_id in reversed(list_ids(directory)):
        if ((end_offset is not None and snapshot_id.offset > end_offset)
                or snapshot_id.offset < start_offset):
            log.warning("metadata snapshot %s is outside the log [%d, %s]: skipped",
                        snapshot_id.name, start_offset, end_offset)
            continue
        try:
            return snapshot_id, read(directory, snapshot_id)
        except SnapshotError as exc:
            log.warning("metadata snapshot %s skipped: %s", snapshot_id.name, exc)
    return None


def remove_partials(directory: Path) -> None:
    """A `.part` file is a snapshot whose write a crash interrupted: never valid."""
    for partial in directory.glob(f"*{PARTIAL_SUFFIX}"):
        partial.unlink(missing_ok=True)


def prune(directory: Path, keep: int = KEEP) -> SnapshotId | None:
    """Delete all but the `keep` newest snapshots. Returns the oldest one kept once there
    are `keep`: the log before it is no longer anyone's fallback (with fewer, a full
    replay stays the fallback for a damaged snapshot, so the whole log is kept)."""
    ids = list_ids(directory)
    for old in ids[:-keep]:
        (directory / old.name).unlink(missing_ok=True)
    kept = ids[-keep:]
    return kept[0] if len(kept) >= keep else None
