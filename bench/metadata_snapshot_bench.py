"""Metadata restart time with and without a KRaft snapshot (prints numbers, never asserts).

Builds a `__cluster_metadata` log whose history is much longer than its final image:
`--churn` rounds that each create and delete `--partitions` partitions' worth of topics
and change configs, then the final `--partitions` partitions (topics of
`--topic-partitions`). Then times a restart of the metadata (open the log, load the
image) twice over the same files: once replaying the whole log (no snapshot), once from
a snapshot written at the log's end (plus its empty tail). Checks both give the same
image; the floor (issue 13) is snapshot >= 10x faster.

    .venv/bin/python bench/metadata_snapshot_bench.py                  # 100k partitions, 15 rounds of churn
    .venv/bin/python bench/metadata_snapshot_bench.py --partitions 20000 --churn 5   # quicker
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from headwater.config import BrokerConfig, LogConfig  # noqa: E402
from headwater.log.partition_log import PartitionLog  # noqa: E402
from headwater.metadata import snapshot  # noqa: E402
from headwater.metadata.controller import Controller, NewTopic  # noqa: E402
from headwater.metadata.image import TOPIC_RESOURCE, MetadataImage  # noqa: E402

NO_SNAPSHOTS = {"metadata.log.max.record.bytes.between.snapshots": str(1 << 62),
                "metadata.log.max.snapshot.interval.ms": "0"}
SEGMENT_BYTES = 64 << 20  # the broker's metadata.log.segment.bytes default


def now_ms() -> int:
    return int(time.time() * 1000)


def open_controller(path: Path) -> Controller:
    plog = PartitionLog.open(path, LogConfig(segment_bytes=SEGMENT_BYTES), "__cluster_metadata",
                             0, now_ms(), clean_shutdown=True)
    controller = Controller(plog, BrokerConfig(NO_SNAPSHOTS), now_ms)
    controller.max_partitions = 1 << 40
    controller.load()
    return controller


def create(c: Controller, prefix: str, partitions: int, per_topic: int) -> list[str]:
    names = []
    for i in range(0, partitions, per_topic):
        name = f"{prefix}-{i // per_topic}"
        (_, err, _), = c.create_topics([NewTopic(name, min(per_topic, partitions - i))])
        if err is not None:
            raise SystemExit(f"create {name}: {err.message}")
        names.append(name)
    return names


def build(path: Path, args: argparse.Namespace) -> Controller:
    c = open_controller(path)
    for round_ in range(args.churn):
        names = create(c, f"churn{round_}", args.partitions, args.topic_partitions)
        for name in names:  # config changes: many small records
            for k in range(args.configs_per_topic):
                c.commit(c.config_records(TOPIC_RESOURCE, name,
                                          {"retention.ms": str(60_000 + k)}))
        c.delete_topics([c.image.topic(n) for n in names])
        print(f"  churn round {round_ + 1}/{args.churn}: log end offset "
              f"{c.log.log_end_offset:,}", flush=True)
    for name in create(c, "final", args.partitions, args.topic_partitions):
        c.commit(c.config_records(TOPIC_RESOURCE, name, {"retention.ms": "86400000"}))
    return c


def timed_load(path: Path) -> tuple[float, MetadataImage]:
    start = time.perf_counter()
    c = open_controller(path)
    elapsed = time.perf_counter() - start
    c.log.close()
    return elapsed, c.image


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000,
                        help="partitions in the final image (and per churn round)")
    parser.add_argument("--topic-partitions", type=int, default=5_000)
    parser.add_argument("--churn", type=int, default=15,
                        help="rounds of create + reconfigure + delete before the final image")
    parser.add_argument("--configs-per-topic", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="timed loads of each kind")
    parser.add_argument("--dir", help="work directory (default: a temp dir, removed)")
    args = parser.parse_args()

    work = Path(args.dir or tempfile.mkdtemp(prefix="hw-snapshot-bench-"))
    try:
        full, snap = work / "full" / "__cluster_metadata-0", work / "snap" / "__cluster_metadata-0"
        print(f"building the history ({args.churn} rounds of {args.partitions:,} partitions "
              f"created and deleted, then {args.partitions:,} kept) ...", flush=True)
        t0 = time.perf_counter()
        c = build(full, args)
        built = time.perf_counter() - t0
        end = c.log.log_end_offset
        log_bytes = c.log.size_bytes
        c.log.close()
        shutil.copytree(full.parent, snap.parent)
        c = open_controller(snap)
        t0 = time.perf_counter()
        path = c.write_snapshot()
        wrote = time.perf_counter() - t0
        c.log.close()
        image_records = len(snapshot.read(snap, snapshot.list_ids(snap)[-1]))

        replays, loads = [], []
        image_full = image_snap = None
        for _ in range(args.rounds):
            seconds, image_full = timed_load(full)
            replays.append(seconds)
            seconds, image_snap = timed_load(snap)
            loads.append(seconds)
        assert image_full == image_snap, "snapshot + tail differs from a full replay"
        partitions = sum(len(t.partitions) for t in image_snap.topics_by_name.values())
        replay_s, load_s = statistics.median(replays), statistics.median(loads)
        print()
        print(f"built in {built:.1f} s")
        print(f"metadata log:        {end:,} records, {log_bytes / 2**20:.1f} MiB")
        print(f"final image:         {len(image_snap.topics_by_name)} topics, "
              f"{partitions:,} partitions")
        print(f"snapshot:            {image_records:,} records, "
              f"{path.stat().st_size / 2**20:.1f} MiB, written in {wrote:.2f} s")
        print(f"restart, full replay: {replay_s:.2f} s  (rounds: "
              f"{', '.join(f'{s:.2f}' for s in replays)})")
        print(f"restart, snapshot:    {load_s:.2f} s  (rounds: "
              f"{', '.join(f'{s:.2f}' for s in loads)})")
        print(f"ratio:                {replay_s / load_s:.1f}x faster with the snapshot "
              "(floor: 10x)")
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
