"""Raw requests sent where a Kafka client would send them, so that a scenario written
against one broker runs unchanged on a cluster (`--storage=cluster`) and on Kafka.

A group's or a transactional id's request goes to its coordinator (FindCoordinator on the
bootstrap broker, asked again after NOT_COORDINATOR); ListGroups goes to every broker
Metadata lists, and the groups are merged, as Kafka's AdminClient does. On one broker all
of this is that broker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from headwater.wire.client import RawClient

#: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
RETRY = frozenset({14, 15, 16})

Code = Callable[[Any], int]


def _once(port: int, key: int, version: int, body: dict) -> Any:
    raw = RawClient("127.0.0.1", port, timeout=30)
    try:
        return raw.request(key, version, body)
    finally:
        raw.close()


def coordinator(bootstrap_port: int, coordinator_key: str, key_type: int = 0,
                timeout: float = 60.0) -> int:
    """The port of `coordinator_key`'s coordinator (0 group, 1 transaction, 2 share)."""
    deadline = time.monotonic() + timeout
    while True:
        found = _once(bootstrap_port, 10, 4, {"key_type": key_type,
                                              "coordinator_keys": [coordinator_key]})
        c = found.coordinators[0]
        if int(c.error_code) == 0:
            return int(c.port)
        assert time.monotonic() < deadline, f"no coordinator for {coordinator_key}: {c}"
        time.sleep(0.2)


def to_coordinator(bootstrap_port: int, key: int, version: int, body: dict,
                   coordinator_key: str, key_type: int = 0,
                   code: Code = lambda r: r.error_code, timeout: float = 60.0) -> Any:
    """The request at `coordinator_key`'s coordinator, asked again (the coordinator found
    again) while `code(response)` is one of RETRY, for up to `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        port = coordinator(bootstrap_port, coordinator_key, key_type, timeout)
        resp = _once(port, key, version, body)
        if int(code(resp)) not in RETRY or time.monotonic() > deadline:
            return resp
        time.sleep(0.2)


def broker_ports(bootstrap_port: int) -> list[int]:
    """Every broker Metadata lists."""
    md = _once(bootstrap_port, 3, 12, {"topics": [], "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False})
    return sorted(int(b.port) for b in md.brokers)


def leaders(bootstrap_port: int, topic: str) -> dict[int, int]:
    """Partition -> leader id of `topic`, as Metadata on the bootstrap broker says."""
    md = _once(bootstrap_port, 3, 12, {"topics": [{"name": topic, "topic_id": None}],
                                       "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False})
    return {int(p.partition_index): int(p.leader_id) for t in md.topics for p in t.partitions}


def led_together(bootstrap_port: int, topic: str, count: int = 2,
                 timeout: float = 30.0) -> list[int]:
    """The first `count` partitions of `topic` with the same leader (every partition on
    one node; on a cluster, partitions one fetch session or one request can serve
    together, as a client groups them by leader)."""
    deadline = time.monotonic() + timeout
    while True:
        by_leader: dict[int, list[int]] = {}
        for partition, leader in sorted(leaders(bootstrap_port, topic).items()):
            if leader >= 0:
                by_leader.setdefault(leader, []).append(partition)
        found = [ps[:count] for ps in by_leader.values() if len(ps) >= count]
        if found:
            return min(found)
        assert time.monotonic() < deadline, f"no {count} partitions of {topic} led together"
        time.sleep(0.2)


def list_groups(bootstrap_port: int, body: dict, timeout: float = 60.0) -> list[Any]:
    """ListGroups v5 at every broker, the groups of all of them (each broker lists the
    groups it coordinates)."""
    groups: list[Any] = []
    deadline = time.monotonic() + timeout
    for port in broker_ports(bootstrap_port):
        while True:
            resp = _once(port, 16, 5, body)
            if int(resp.error_code) not in RETRY or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        groups.extend(resp.groups)
    return groups


def _routing_key(body: dict) -> tuple[str, int] | None:
    """(coordinator key, key type) a client would route `body` by; None: any broker."""
    if body.get("transactional_id"):
        return body["transactional_id"], 1
    if "group_id" in body:
        return body["group_id"], 0
    for field in ("groups", "group_ids", "groups_names"):
        items = body.get(field)
        if items:
            first = items[0]
            return (first["group_id"] if isinstance(first, dict) else first), 0
    return None


def call(bootstrap_port: int, key: int, version: int, body: dict,
         code: Code = lambda r: r.error_code, timeout: float = 60.0) -> Any:
    """A raw request as a client routes it: to the coordinator of the (first) group or
    transactional id it names, ListGroups to every broker (the answer's `groups` those of
    all), anything else to the bootstrap broker; asked again while `code` is one of RETRY."""
    if key == 16:
        from types import SimpleNamespace
        return SimpleNamespace(error_code=0, groups=list_groups(bootstrap_port, body, timeout))
    routed = None if key == 10 else _routing_key(body)
    if routed is not None:
        return to_coordinator(bootstrap_port, key, version, body, routed[0], routed[1],
                              code, timeout)
    deadline = time.monotonic() + timeout
    while True:
        resp = _once(bootstrap_port, key, version, body)
        if int(code(resp)) not in RETRY or time.monotonic() > deadline:
            return resp
        time.sleep(0.2)
