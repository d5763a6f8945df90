"""Micro benchmark of the partition log alone (no network): append ~16 KiB batches of
1 KiB records, then fetch them back sequentially, and print MB/s as a table and JSON.

    PYTHONPATH=. python bench/log_bench.py [--mb 512] [--fetch-bytes 1048576] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

from headwater.config import LogConfig
from headwater.log.partition_log import PartitionLog
from headwater.records.batch import build_batch

RECORD_BYTES = 1024
RECORDS_PER_BATCH = 16


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=512, help="MiB of batches to append")
    parser.add_argument("--fetch-bytes", type=int, default=1 << 20, help="max_bytes per read")
    parser.add_argument("--segment-mb", type=int, default=256)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()

    root = args.dir or Path(tempfile.mkdtemp(prefix="headwater-log-bench-"))
    config = LogConfig(segment_bytes=args.segment_mb << 20)
    payload = os.urandom(RECORD_BYTES)
    data = build_batch([(b"key-%d" % i, payload, [], 1_700_000_000_000 + i)
                        for i in range(RECORDS_PER_BATCH)])
    batches = (args.mb << 20) // len(data)
    try:
        plog = PartitionLog.open(root / "bench-0", config, "bench", 0, 0)
        start = time.perf_counter()
        for i in range(batches):
            plog.append(data, i)
        append_s = time.perf_counter() - start
        total = plog.size_bytes

        start = time.perf_counter()
        offset, read = 0, 0
        end = plog.log_end_offset
        while offset < end:
            chunk = plog.read(offset, args.fetch_bytes)
            read += len(chunk)
            offset += (len(chunk) // len(data)) * RECORDS_PER_BATCH
        read_s = time.perf_counter() - start
        assert read == total, (read, total)

        start = time.perf_counter()
        plog.close()
        close_s = time.perf_counter() - start
        start = time.perf_counter()
        plog = PartitionLog.open(root / "bench-0", config, "bench", 0, 0, clean_shutdown=False)
        reopen_s = time.perf_counter() - start
        plog.close()
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)

    mib = total / (1 << 20)
    result = {
        "batch_bytes": len(data),
        "batches": batches,
        "total_mib": round(mib, 1),
        "append_mib_s": round(mib / append_s, 1),
        "append_batches_s": round(batches / append_s),
        "append_records_s": round(batches * RECORDS_PER_BATCH / append_s),
        "read_mib_s": round(mib / read_s, 1),
        "read_fetch_bytes": args.fetch_bytes,
        "close_s": round(close_s, 3),
        "unclean_reopen_s": round(reopen_s, 3),
        "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    width = max(map(len, result))
    for key, value in result.items():
        print(f"{key:<{width}}  {value}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
