"""A cluster broker's producer ids (txn/producer_id_blocks.py): handed out from blocks
the controller allocates, the next one asked for at 90%, COORDINATOR_LOAD_IN_PROGRESS
while none is here, failed asks retried."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.coordinator.runtime import NotReady
from headwater.txn.producer_id_blocks import ProducerIdBlocks


class Controller:
    def __init__(self, size: int = 10) -> None:
        self.size = size
        self.next = 0
        self.asked = 0
        self.failures = 0  # the next asks that fail
        self.gate: asyncio.Event | None = None
        self.answers: list[tuple[int, int]] = []  # answered as is, before any block

    async def fetch(self) -> tuple[int, int]:
        self.asked += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.failures:
            self.failures -= 1
            raise ConnectionError("controller unreachable")
        if self.answers:
            return self.answers.pop(0)
        start, self.next = self.next, self.next + self.size
        return start, self.size


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_ids_come_from_blocks_and_the_next_is_prefetched() -> None:
    async def story() -> None:
        controller = Controller()
        blocks = ProducerIdBlocks(controller.fetch)
        with pytest.raises(NotReady) as caught:
            blocks.allocate_producer_id()
        assert caught.value.code == E.coordinator_load_in_progress
        await settle()
        assert [blocks.allocate_producer_id() for _ in range(8)] == list(range(8))
        assert controller.asked == 1
        blocks.allocate_producer_id()  # the 9th of 10: the next block is asked for
        await settle()
        assert controller.asked == 2 and blocks.available() == 11
        assert [blocks.allocate_producer_id() for _ in range(11)] == list(range(9, 20))
        await blocks.stop()
    asyncio.run(story())


def test_no_id_while_the_block_is_asked_for_then_the_client_retries() -> None:
    async def story() -> None:
        controller = Controller()
        controller.gate = asyncio.Event()
        blocks = ProducerIdBlocks(controller.fetch)
        blocks.start()
        for _ in range(3):  # one ask in flight, however many producers wait
            with pytest.raises(NotReady):
                blocks.allocate_producer_id()
        await settle()
        assert controller.asked == 1
        controller.gate.set()
        await settle()
        assert blocks.allocate_producer_id() == 0
        await blocks.stop()
    asyncio.run(story())


def test_failed_and_invalid_asks_are_retried() -> None:
    async def story() -> None:
        controller = Controller()
        controller.failures = 2
        blocks = ProducerIdBlocks(controller.fetch, retry_backoff_s=0.001)
        blocks.start()
        deadline = asyncio.get_running_loop().time() + 5
        while blocks.available() == 0:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.001)
        assert controller.asked == 3
        assert blocks.allocate_producer_id() == 0
        # a block that does not come after the current one is refused and asked again
        controller.answers = [(0, 10), (-5, 10), (0, 0)]
        assert [blocks.allocate_producer_id() for _ in range(9)] == list(range(1, 10))
        while blocks.available() <= 1:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.001)
        assert controller.asked == 7
        assert [blocks.allocate_producer_id() for _ in range(10)] == list(range(10, 20))
        await blocks.stop()
    asyncio.run(story())
