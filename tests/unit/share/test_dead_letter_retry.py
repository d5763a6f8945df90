"""A share-partition's dead-letter write that fails is tried again on a timer, not only
at the partition's next state write: a partition nobody fetches from any more kept its
ARCHIVING records, and their dead letters, waiting (on three brokers, a dead-letter
partition just created refuses the first write until its leader takes it)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.share import manager as manager_module
from headwater.share.manager import SharePartitionManager, _Leader
from headwater.share.outcomes import DeadLetter
from headwater.share.record_state import DeadLetterReason
from headwater.storage.errors import LogError


class _Part:
    def __init__(self) -> None:
        self.pending = [DeadLetter(3, 3, 1, DeadLetterReason.REJECTED)]
        self.leader_epoch = 0

    def dead_letters(self) -> list[DeadLetter]:
        return list(self.pending)

    def dead_lettered(self, letters: list[DeadLetter], now: int) -> Any:
        self.pending = []
        return SimpleNamespace(released=len(letters), write=None)


class _Writer:
    """Refuses the first write as a dead-letter partition not yet led would."""

    def __init__(self) -> None:
        self.calls = 0
        self.done: list[Any] = []

    async def write(self, *_args: Any, **_kwargs: Any) -> None:
        self.calls += 1
        if self.calls == 1:
            raise LogError(E.not_leader_or_follower, "dlq.x-0 is being taken")

    def finished(self, key: Any, letters: Any) -> None:
        self.done.append(key)


def test_a_failed_dead_letter_write_is_tried_again_on_its_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manager_module, "DEAD_LETTER_RETRY_S", 0.01)
    key = ("g", uuid.uuid4(), 0)
    manager = object.__new__(SharePartitionManager)
    leader = _Leader(key, _Part(), "src")  # type: ignore[arg-type]
    writer = _Writer()
    manager._leaders = {key: leader}
    manager.dead_letters = writer  # type: ignore[assignment]
    manager.group_config = lambda group_id: {}  # type: ignore[method-assign]
    manager._clock = lambda: 0
    manager.counts = Counter()
    manager.wake = lambda *_args: None  # type: ignore[method-assign]

    async def story() -> None:
        await manager._dead_letter(leader)
        assert writer.calls == 1 and leader.dead_letters_due
        deadline = asyncio.get_running_loop().time() + 5
        while leader.dead_letters_due:
            assert asyncio.get_running_loop().time() < deadline, "never tried again"
            await asyncio.sleep(0.01)

    asyncio.run(story())
    assert writer.calls == 2 and writer.done == [key]
    assert manager.counts["dead_lettered"] == 1 and leader.dead_letter_retry is None
