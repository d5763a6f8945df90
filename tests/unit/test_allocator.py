"""The broker fixes glibc's mmap and trim thresholds (headwater/allocator.py)."""

from __future__ import annotations

import platform

import pytest

from headwater import allocator


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_tune_sets_the_thresholds_on_glibc() -> None:
    assert allocator.tune() is True


def test_tune_without_a_c_library_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator.ctypes.util, "find_library", lambda name: None)
    assert allocator.tune() is False


def test_the_trim_threshold_is_above_the_mmap_threshold() -> None:
    # a heap top given back below the mmap threshold is taken again by the next request
    # of that size: the 1 KiB produce rate fell by a quarter (docs/operations.md)
    assert allocator.TRIM_THRESHOLD >= 2 * allocator.MMAP_THRESHOLD
