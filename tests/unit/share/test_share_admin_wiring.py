"""ShareAdmin built with fakes: it forgets leaders through what it was given, and a
group shard's load starts the deletions a crash interrupted there."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

from headwater.share.admin import ShareAdmin


class FakeLeaders:
    def __init__(self) -> None:
        self.forgotten: list[tuple[str, uuid.UUID, int]] = []

    def forget(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        self.forgotten.append((group_id, topic_id, partition))


def admin_with(pending: dict[int, list[str]]) -> tuple[ShareAdmin, FakeLeaders]:
    runtime = SimpleNamespace(read=lambda partition, fn: pending.get(partition, []))
    groups: Any = SimpleNamespace(runtime=runtime)
    leaders = FakeLeaders()
    unused: Any = None
    return ShareAdmin(groups, unused, leaders, image=unused, partitions=unused), leaders


def test_forget_goes_to_the_leaders_it_was_given() -> None:
    admin, leaders = admin_with({})
    tid = uuid.uuid4()
    admin._forget("g", tid, 3)
    assert leaders.forgotten == [("g", tid, 3)]


def test_a_loaded_group_partition_with_pending_deletions_finishes_them() -> None:
    admin, _ = admin_with({4: ["g"]})
    finished: list[int] = []

    async def finish_pending(partition: int) -> None:
        finished.append(partition)

    admin.finish_pending = finish_pending  # type: ignore[method-assign]

    async def scenario() -> None:
        admin.group_partition_loaded(3)  # nothing pending there
        admin.group_partition_loaded(4)
        for _ in range(3):
            await asyncio.sleep(0)

    asyncio.run(scenario())
    assert finished == [4]
