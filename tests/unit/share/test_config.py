"""share.auto.offset.reset and the share-partition settings."""

from __future__ import annotations

import pytest

from headwater.share import OffsetReset, SharePartitionConfig, initial_start_offset
from headwater.share.config import parse_duration_ms


def test_defaults_are_kafkas():
    c = SharePartitionConfig()
    assert (c.record_lock_duration_ms, c.delivery_count_limit, c.max_record_locks) == (
        30_000, 5, 2000)
    assert [SharePartitionConfig(delivery_count_limit=n).throttle_limit
            for n in (2, 3, 5, 6, 10)] == [2, 2, 3, 3, 5]


@pytest.mark.parametrize("text,ms", [("PT1H", 3_600_000), ("P1D", 86_400_000),
                                     ("PT1M30S", 90_000), ("PT0.5S", 500),
                                     ("P1DT2H", 93_600_000)])
def test_durations(text: str, ms: int):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("bad", ["", "P", "PT", "1H", "PT1X", "by_duration"])
def test_bad_resets(bad: str):
    with pytest.raises(ValueError):
        OffsetReset.parse(bad if bad == "by_duration" else f"by_duration:{bad}")


def test_initial_start_offset():
    # SharePartitionTest: testMaybeInitializeWithLatest/Earliest/ByDurationResetStrategy
    lookups: list[int] = []

    def by_time(ts: int) -> int | None:
        lookups.append(ts)
        return 42 if ts >= 0 else None

    assert initial_start_offset(OffsetReset.parse("latest"), 10, 100, by_time, 0) == 100
    assert initial_start_offset(OffsetReset.parse("EARLIEST"), 10, 100, by_time, 0) == 10
    reset = OffsetReset.parse("by_duration:PT1S")
    assert initial_start_offset(reset, 10, 100, by_time, 5_000) == 42
    assert lookups == [4_000]
    assert initial_start_offset(reset, 10, 100, by_time, 500) == 100  # nothing that late
    with pytest.raises(ValueError):
        OffsetReset.parse("none")
