"""This broker's place in a cluster, as the API handlers ask about it: which brokers are
live, who leads a partition, who the controller is, and how a metadata change reaches
the controller (`forward.py`) and comes back (`metadata_log.py`)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable
from typing import Any

from ..wire.dispatch import RequestContext
from .cluster import BrokerInfo
from .forward import ForwardError, call, forward
from .metadata_log import SharedMetadata
from .store import SharedStore

CONTROLLER_WAIT_S = 10.0
COORDINATOR_TIMEOUT_S = 10.0
LIST_OFFSETS = 2
log = logging.getLogger("headwater.shared")


class ClusterNode:
    def __init__(self, store: SharedStore, metadata: SharedMetadata) -> None:
        self.store = store
        self.metadata = metadata

    @property
    def node_id(self) -> int:
        return self.store.node_id

    def brokers(self) -> list[BrokerInfo]:
        """The live brokers (this one always among them)."""
        live = dict(self.store.view.brokers)
        live.setdefault(self.node_id, self.store.advertised)
        return [live[n] for n in sorted(live)]

    def broker(self, node_id: int) -> BrokerInfo | None:
        if node_id == self.node_id:
            return self.store.advertised
        return self.store.view.brokers.get(node_id)

    def is_controller(self) -> bool:
        return self.metadata.active

    def controller_id(self) -> int:
        if self.metadata.active:
            return self.node_id
        return self.store.view.controller

    def coordinator(self, key: str) -> BrokerInfo | None:
        """The broker coordinating `key` (a group id, a transactional id, a share key):
        the controller's until coordinator shards get leases of their own (issue 24).
        None while no controller is live."""
        return self.broker(self.controller_id())

    # ---- share/remote.py's CoordinatorChannel -------------------------------------------
    def remote(self, group_id: str) -> bool:
        found = self.coordinator(group_id)
        return found is None or found.node_id != self.node_id

    async def ask(self, group_id: str, api_key: int, version: int,
                  body: dict[str, Any]) -> Any | None:
        target = self.coordinator(group_id)
        if target is None or target.node_id == self.node_id:
            return None
        try:
            return await call(target.host, target.port, api_key, version, body,
                              COORDINATOR_TIMEOUT_S)
        except ForwardError as exc:
            log.info("coordinator of %r (broker %d) not reached: %s", group_id,
                     target.node_id, exc)
            return None

    async def end_offset(self, topic: str, topic_id: uuid.UUID, partition: int
                         ) -> int | None:
        """A partition's high watermark as its leader answers ListOffsets (latest); None
        if it cannot be asked or answers an error."""
        part = self.store.partition(topic, partition)
        if part is not None:
            return part.high_watermark
        leader, _epoch = self.leader(topic, topic_id, partition)
        target = self.broker(leader) if leader != self.node_id else None
        if target is None:
            return None
        body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}]}]}
        try:
            response = await call(target.host, target.port, LIST_OFFSETS, 7, body,
                                  COORDINATOR_TIMEOUT_S)
        except ForwardError as exc:
            log.info("end offset of %s-%d: broker %d not reached: %s", topic, partition,
                     target.node_id, exc)
            return None
        for t in response.topics:
            for p in t.partitions:
                if t.name == topic and p.partition_index == partition and not p.error_code:
                    return int(p.offset)
        return None

    def leader(self, topic: str, topic_id: uuid.UUID, partition: int) -> tuple[int, int]:
        """(leader, leader epoch) of a partition on the shared log."""
        part = self.store.partition(topic, partition)
        if part is not None:
            return self.node_id, part.leader_epoch
        return self.store.view.leader(topic_id, partition)

    def durable(self) -> Awaitable[None] | None:
        return self.metadata.durable()

    async def forward(self, ctx: RequestContext, request: Any) -> bytes:
        """The controller's answer to a metadata change asked of this broker."""
        deadline = asyncio.get_running_loop().time() + CONTROLLER_WAIT_S
        while True:
            target = self.broker(self.controller_id())
            if target is not None and target.node_id != self.node_id:
                return await forward(target.host, target.port, ctx, request,
                                     CONTROLLER_WAIT_S)
            if asyncio.get_running_loop().time() >= deadline:
                raise ForwardError("no controller is live")
            await asyncio.sleep(0.1)

    async def follow_now(self, timeout_s: float) -> None:
        await self.metadata.caught_up(timeout_s)
