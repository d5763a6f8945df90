"""`headwater metadata log|image --data-dir D`: a stopped broker's metadata, read-only.

`log` lists every record of `__cluster_metadata` with its offset, its type, what it
says, and where a metadata transaction put it (begin / in transaction / end; records
of an aborted transaction, or of one the log leaves open, are marked so: they never
reached the image). `image` is what a start would build: topics and their partitions,
configs, finalized features, the producer id block, client quotas. Both read the segment
files directly and never write (Kafka's `kafka-dump-log --cluster-metadata-decoder`
and `kafka-metadata-shell` read the same files).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from ..metadata import records as R
from ..metadata.image import MetadataImage
from ..metadata.replay import read_directory, replay
from .groups import AdminError
from .tables import emit

METADATA_DIR = "__cluster_metadata-0"


def _directory(args: argparse.Namespace) -> Path:
    directory = Path(args.data_dir) / METADATA_DIR
    if not directory.is_dir():
        raise AdminError(f"no metadata log in {args.data_dir} ({METADATA_DIR} missing)")
    return directory


def _summary(item: object) -> str:
    fields = dataclasses.asdict(item) if dataclasses.is_dataclass(item) else {}
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


def image_of(directory: Path) -> tuple[MetadataImage, dict[str, int]]:
    state = replay(read_directory(directory))
    features = {r.name: r.feature_level for r in state.committed
                if isinstance(r, R.FeatureLevelRecord)}
    return MetadataImage().apply(state.committed, state.last_offset), features


def cmd_image(args: argparse.Namespace) -> str:
    image, features = image_of(_directory(args))
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
    for entity, values in sorted(image.client_quotas.items(), key=str):
        who = ",".join(f"{t}={n if n is not None else '<default>'}" for t, n in entity)
        for key, value in sorted(values.items()):
            rows.append(("quota", who, f"{key}={value}"))
    rows.append(("offset", "last applied", str(image.offset)))
    return emit(["KIND", "NAME", "VALUE"], rows, args.json)


def add_parser(sub: Any) -> None:
    meta = sub.add_parser("metadata", help="read a stopped broker's metadata log")
    meta.add_argument("--data-dir", default="./data", help="the broker's data directory")
    meta.add_argument("--json", action="store_true", help="machine-readable output")
    msub = meta.add_subparsers(dest="metadata_command", required=True)
    msub.add_parser("log", help="every record, with its transaction").set_defaults(
        func=cmd_log)
    msub.add_parser("image", help="what a start would build").set_defaults(func=cmd_image)
