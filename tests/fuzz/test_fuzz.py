"""The fuzzing campaign: mutated real requests against a live broker, a client beside.

`make test` runs a short campaign (12,000 requests) with a fixed seed; `make fuzz` a
long one (HEADWATER_FUZZ_REQUESTS=1000000). Afterwards the broker must still run, have logged no
unhandled exception and no handler failure, have stayed within a memory bound, the
canary client must have read back every record the broker acknowledged to it, and the
broker must start again with all of it.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid

import pytest

from tests.fuzz.canary import Canary, read_back
from tests.fuzz.harness import run_campaign

REQUESTS = int(os.environ.get("HEADWATER_FUZZ_REQUESTS", "12000"))
SEED = int(os.environ.get("HEADWATER_FUZZ_SEED", "16"))
PEAK_RSS_LIMIT = 1 << 30


def peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


@pytest.mark.timeout(max(300, REQUESTS // 200))
def test_fuzz_campaign(broker_factory):
    broker = broker_factory()
    canary = Canary(broker.bootstrap, f"fuzz-canary-{uuid.uuid4().hex}").start()
    try:
        stats = asyncio.run(run_campaign("127.0.0.1", broker.port, REQUESTS, SEED))
    finally:
        canary.stop()
    log = broker.log_path.read_text(errors="replace")
    rss = peak_rss(broker.proc.pid)
    print(f"\nfuzz: {stats.sent} mutated requests (seed {SEED}), {stats.answered} answered, "
          f"{stats.closed} connections closed by the broker, {stats.timeouts} timed out; "
          f"peak RSS {rss / 2**20:.0f} MiB; canary {len(canary.acked)} acked, "
          f"{len(canary.read)} read; mutations {dict(stats.ops)}")
    assert broker.proc.poll() is None, "the broker died"
    assert stats.sent >= REQUESTS
    assert "Unhandled exception" not in log and "Traceback" not in log, log[-3000:]
    failures = sorted(set(re.findall(r"handler for .* failed: .*", log)))
    assert not failures, "\n".join(failures[:20])
    assert rss < PEAK_RSS_LIMIT
    assert not canary.problems(), canary.problems()
    # Nothing the campaign sent may keep the broker from starting, or lose what it acked.
    broker.restart()
    assert len(read_back(broker.bootstrap, canary.topic)) >= len(canary.acked)
