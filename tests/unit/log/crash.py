"""Simulated process death during a log clean, for the crash-safety tests."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.log import swap
from headwater.log.cleaner import LogCleaner
from headwater.log.partition_log import PartitionLog


class Crash(BaseException):
    """Stands for the process dying at the patched step (BaseException: nothing in the
    log code may catch it, as nothing would survive a real death)."""


def clean_until_crash(monkeypatch: pytest.MonkeyPatch, plog: PartitionLog, target: Any,
                      name: str, calls: int = 1, now_ms: int = 0) -> None:
    """Run a clean that dies at the `calls`-th call of target.name, leaving its files."""
    real = getattr(target, name)
    count = [0]

    def dying(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        if count[0] == calls:
            raise Crash
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, dying)
    monkeypatch.setattr(swap, "discard", lambda *a: None)  # a dead process cleans nothing
    with pytest.raises(Crash):
        LogCleaner(lambda: now_ms).clean(plog, now_ms)
    monkeypatch.undo()
