"""`headwater metadata log|image|snapshot --data-dir D`: a stopped broker's metadata.

`log` lists every record of `__cluster_metadata` with its offset, its type, what it
says, and where a metadata transaction put it (begin / in transaction / end; records
of an aborted transaction, or of one the log leaves open, are marked so: they never
reached the image). `image` is what a start would build: the newest readable snapshot
(`.checkpoint`) plus the log after it: topics and their partitions, configs, finalized
features, the producer id block, client quotas, SCRAM users, ACLs. Those two read the files directly and
never write (Kafka's `kafka-dump-log --cluster-metadata-decoder` and
`kafka-metadata-shell` read the same files). `snapshot` is the one that writes: a
snapshot of that image now, at the last committed offset, so the next start replays
only what follows it.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any, cast

from ..metadata import snapshot
from ..metadata.image import MetadataImage
from ..metadata.replay import Replay, read_directory, replay
from ..records.batch import iter_batches
from ..security import acl
from .groups import AdminError
from .tables import emit

METADATA_DIR = "__cluster_metadata-0"


def _directory(args: argparse.Namespace) -> Path:
    directory = Path(args.data_dir) / METADATA_DIR
    if not directory.is_dir():
        raise AdminError(f"no metadata log in {args.data_dir} ({METADATA_DIR} missing)")
    return directory


def _summary(item: object) -> str:
    fields = dataclasses.asdict(cast(Any, item)) if dataclasses.is_dataclass(item) else {}
    parts = []
    for key, value in fields.items():
        if isinstance(value, (list, tuple)) and len(value) > 4:
            value = f"{list(value[:4])}... ({len(value)})"
        parts.append(f"{key}={value}")
    return " ".join(parts)


def cmd_log(args: argparse.Namespace) -> str:
    records = list(read_directory(_directory(args)))
    state = replay(records)
    rows = [(offset, type(item).__name__, state.marks.get(offset, ""), _summary(item))
            for offset, item in records]
    return emit(["OFFSET", "RECORD", "TRANSACTION", "DATA"], rows, args.json)


@dataclasses.dataclass(frozen=True, slots=True)
class Loaded:
    """What a start would load: the image, the snapshot it began from (if any), and the
    replay of the log after it."""

    image: MetadataImage
    snapshot_id: snapshot.SnapshotId | None
    tail: Replay


def _log_start(directory: Path) -> int:
    try:
        return max(int((directory / "log-start-offset").read_text().strip()), 0)
    except (OSError, ValueError):
        return 0


def load(directory: Path) -> Loaded:
    """The newest readable snapshot and the log after it, as the controller loads them."""
    start = _log_start(directory)
    found = snapshot.load_latest(directory, start_offset=start)
    base, begin, snapshot_id = MetadataImage(), start, None
    if found is not None:
        snapshot_id, records = found
        base, begin = snapshot.image_of(records, snapshot_id), snapshot_id.offset
    elif start > 0:
        raise AdminError(f"the metadata log starts at offset {start} and no readable "
                         "snapshot covers the records before it")
    tail = replay((o, r) for o, r in read_directory(directory) if o >= begin)
    last = tail.last_offset if tail.last_offset >= 0 else base.offset
    return Loaded(base.apply(tail.committed, last), snapshot_id, tail)


def cmd_image(args: argparse.Namespace) -> str:
    loaded = load(_directory(args))
    image, features = loaded.image, dict(loaded.image.features)
    rows: list[tuple[Any, ...]] = []
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        rows.append(("topic", name, f"id={topic.topic_id} partitions={len(topic.partitions)}"))
    for (rtype, rname), values in sorted(image.configs.items()):
        kind = {2: "topic", 4: "broker", 32: "group"}.get(rtype, str(rtype))
        for key, value in sorted(values.items()):
            rows.append(("config", f"{kind}:{rname}", f"{key}={value}"))
    for name, level in sorted(features.items()):
        rows.append(("feature", name, str(level)))
    rows.append(("producer-ids", "next block", str(image.next_producer_id)))
    for entity, quota in sorted(image.client_quotas.items(), key=str):
        who = ",".join(f"{t}={n if n is not None else '<default>'}" for t, n in entity)
        for quota_key, limit in sorted(quota.items()):
            rows.append(("quota", who, f"{quota_key}={limit}"))
    for user, mechanism in sorted(image.scram):
        rec = image.scram[(user, mechanism)]
        name = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}.get(mechanism, str(mechanism))
        rows.append(("scram-user", user, f"{name} iterations={rec.iterations}"))
    for b in sorted(image.acls.values(), key=lambda b: (b.resource_type, b.resource_name,
                                                         b.principal, b.operation)):
        pattern = {3: "LITERAL", 4: "PREFIXED"}.get(b.pattern_type, str(b.pattern_type))
        rows.append(("acl", f"{acl.RESOURCE_TYPES.get(b.resource_type, b.resource_type)}:"
                            f"{pattern}:{b.resource_name}",
                     f"{b.principal} host={b.host} "
                     f"{acl.OPERATIONS.get(b.operation, b.operation)} "
                     f"{'ALLOW' if b.permission == acl.ALLOW else 'DENY'}"))
    rows.append(("offset", "last applied", str(image.offset)))
    sid = loaded.snapshot_id
    rows.append(("snapshot", sid.name if sid else "none",
                 f"offsets below {sid.offset}, then the log" if sid else "the whole log"))
    return emit(["KIND", "NAME", "VALUE"], rows, args.json)


def cmd_snapshot(args: argparse.Namespace) -> str:
    """Write a snapshot of what a start would load, at the last committed offset: the log's
    end, or the Begin of a transaction the log leaves open (a start rolls that back)."""
    directory = _directory(args)
    loaded = load(directory)
    tail = loaded.tail
    if tail.pending is not None:
        offset = min(o for o, mark in tail.marks.items() if mark.startswith("begin, open"))
    else:
        offset = tail.last_offset + 1 if tail.last_offset >= 0 else loaded.image.offset + 1
    if offset <= 0:
        raise AdminError("the metadata log holds no committed records to snapshot")
    if loaded.snapshot_id is not None and loaded.snapshot_id.offset >= offset:
        return f"{loaded.snapshot_id.name}: already a snapshot at offset {offset}\n"
    image = loaded.image  # a transaction left open is not in it
    snapshot_id = snapshot.SnapshotId(offset, snapshot.EPOCH)
    now = int(time.time() * 1000)
    path = snapshot.write(directory, snapshot.image_records(image), snapshot_id,
                          _last_timestamp(directory, now), now)
    snapshot.prune(directory)
    return f"{path}: {len(image.topics_by_name)} topics, offsets below {offset}\n"


def _last_timestamp(directory: Path, default: int) -> int:
    """The append time of the log's last batch (the header's LastContainedLogTimestamp)."""
    segments = sorted(directory.glob("*.log"))
    for segment in reversed(segments):
        last = None
        data = segment.read_bytes()
        for _pos, header in iter_batches(data):
            last = header.max_timestamp
        if last is not None:
            return last
    return default


def add_parser(sub: Any) -> None:
    meta = sub.add_parser("metadata", help="a stopped broker's metadata log and snapshots")
    meta.add_argument("--data-dir", default="./data", help="the broker's data directory")
    meta.add_argument("--json", action="store_true", help="machine-readable output")
    msub = meta.add_subparsers(dest="metadata_command", required=True)
    msub.add_parser("log", help="every record, with its transaction").set_defaults(
        func=cmd_log)
    msub.add_parser("image", help="what a start would build (snapshot + log)").set_defaults(
        func=cmd_image)
    msub.add_parser("snapshot", help="write a snapshot now (the broker must be stopped)"
                    ).set_defaults(func=cmd_snapshot)
