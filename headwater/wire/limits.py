"""Limits against hostile or careless clients, with Kafka's keys.

* `max.connections` (all listeners) and `max.connections.per.ip` (with
  `max.connections.per.ip.overrides`, `host:count,...`): a connection past them is
  closed at once, with a log line;
* `connections.max.idle.ms`: a connection that completes no request and gets no
  response in that long is closed (a sweep in `KafkaServer`, nothing per request). A
  frame trickled byte by byte (slow-loris) does not count as activity, so it cannot hold
  a task or its buffer longer than this either;
* `queued.max.request.bytes`: the bytes of request frames read but not yet handed to
  their handler, over all connections; past it, connections wait before reading a
  frame's body (as Kafka mutes them), so many large requests at once cannot exhaust
  memory. A single frame larger than the whole budget is read when nothing else is.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("headwater.wire")
UNLIMITED = 2**31 - 1


class RequestMemory:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity  # <= 0: unlimited (Kafka's -1)
        self.used = 0
        self._freed = asyncio.Condition()

    async def acquire(self, size: int) -> None:
        if self.capacity <= 0:
            return
        async with self._freed:
            while self.used > 0 and self.used + size > self.capacity:
                await self._freed.wait()
            self.used += size

    async def release(self, size: int) -> None:
        if self.capacity <= 0:
            return
        async with self._freed:
            self.used -= size
            self._freed.notify_all()


@dataclass
class ConnectionLimits:
    max_connections: int = UNLIMITED
    per_ip: int = UNLIMITED
    per_ip_overrides: dict[str, int] = field(default_factory=dict)
    idle_s: float = 600.0
    memory: RequestMemory = field(default_factory=lambda: RequestMemory(-1))
    total: int = 0
    by_host: Counter[str] = field(default_factory=Counter)
    refused: int = 0

    @classmethod
    def from_config(cls, config: Any) -> ConnectionLimits:
        overrides = {}
        for entry in (config.get("max.connections.per.ip.overrides") or "").split(","):
            host, sep, count = entry.strip().rpartition(":")
            if sep and host:
                overrides[host] = int(count)
        return cls(config.get_int("max.connections"),
                   config.get_int("max.connections.per.ip"), overrides,
                   config.get_int("connections.max.idle.ms") / 1000,
                   RequestMemory(config.get_int("queued.max.request.bytes")))

    def admit(self, host: str) -> str | None:
        """None, and the connection counted; or why it is refused."""
        if self.total >= self.max_connections:
            reason = f"max.connections ({self.max_connections}) reached"
        elif self.by_host[host] >= self.per_ip_overrides.get(host, self.per_ip):
            reason = f"max.connections.per.ip ({self.per_ip_overrides.get(host, self.per_ip)})"\
                     f" reached for {host}"
        else:
            self.total += 1
            self.by_host[host] += 1
            return None
        self.refused += 1
        return reason

    def leave(self, host: str) -> None:
        self.total -= 1
        self.by_host[host] -= 1
        if self.by_host[host] <= 0:
            del self.by_host[host]
