"""Raw-wire helpers for the share-state APIs (InitializeShareGroupState 83 ..
ReadShareGroupStateSummary 87): the integration tests and bench/share_state_bench.py
drive the share coordinator with them."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterable
from typing import Any

from headwater.share.records import StateBatch, StateWrite

from .wire import RawClient

LOAD_IN_PROGRESS = 14
#: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
MOVING = frozenset({LOAD_IN_PROGRESS, 15, 16})
_LOADED = re.compile(r"loaded __share_group_state-(\d+): (\d+) records in (\d+) ms")


def create_topic(client: RawClient, name: str, partitions: int = 1) -> uuid.UUID:
    resp = client.request(19, 7, {"topics": [{"name": name, "num_partitions": partitions,
                                              "replication_factor": 1, "assignments": [],
                                              "configs": []}],
                                  "timeout": 10_000, "validate_only": False})
    topic = resp.topics[0]
    assert int(topic.error_code) == 0, topic
    return topic.topic_id


def initialize(client: RawClient, group: str, topic_id: uuid.UUID, partition: int,
               state_epoch: int, start_offset: int) -> int:
    resp = client.request(83, 0, {"group_id": group, "topics": [{"topic_id": topic_id,
                          "partitions": [{"partition": partition, "state_epoch": state_epoch,
                                          "start_offset": start_offset}]}]})
    return int(resp.results[0].partitions[0].error_code)


def write(client: RawClient, group: str, topic_id: uuid.UUID,
          writes: Iterable[tuple[int, StateWrite]]) -> dict[int, int]:
    """One WriteShareGroupState (v1) for several partitions of a topic: partition -> code."""
    resp = client.request(85, 1, {"group_id": group, "topics": [{"topic_id": topic_id,
                          "partitions": [_write_row(p, w) for p, w in writes]}]})
    return {int(p.partition): int(p.error_code) for p in resp.results[0].partitions}


def _write_row(partition: int, w: StateWrite) -> dict[str, Any]:
    return {"partition": partition, "state_epoch": w.state_epoch,
            "leader_epoch": w.leader_epoch, "start_offset": w.start_offset,
            "delivery_complete_count": w.delivery_complete_count,
            "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                               "delivery_state": b.delivery_state,
                               "delivery_count": b.delivery_count} for b in w.state_batches]}


def read(client: RawClient, group: str, topic_id: uuid.UUID, partition: int,
         leader_epoch: int = 0) -> tuple[int, int, int, tuple[StateBatch, ...]]:
    """ReadShareGroupState: (error code, state epoch, start offset, batches)."""
    resp = client.request(84, 0, {"group_id": group, "topics": [{"topic_id": topic_id,
                          "partitions": [{"partition": partition,
                                          "leader_epoch": leader_epoch}]}]})
    p = resp.results[0].partitions[0]
    return (int(p.error_code), p.state_epoch, p.start_offset,
            tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state,
                             b.delivery_count) for b in p.state_batches))


def read_when_loaded(client: RawClient, group: str, topic_id: uuid.UUID, partition: int,
                     timeout: float = 60.0) -> tuple[int, int, int, tuple[StateBatch, ...]]:
    """`read`, polled while the state partition is still loading after a start (or, on
    a cluster, while its shard is still moving to the broker that keeps it:
    NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE, which a leader retries too)."""
    deadline = time.monotonic() + timeout
    while True:
        result = read(client, group, topic_id, partition)
        if result[0] not in MOVING or time.monotonic() > deadline:
            return result
        time.sleep(0.02)


def load_times(log_text: str) -> dict[int, tuple[int, int]]:
    """From the broker's log: state partition -> (records replayed, ms), last start."""
    out: dict[int, tuple[int, int]] = {}
    for m in _LOADED.finditer(log_text):
        out[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
    return out
