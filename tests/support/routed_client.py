"""A raw client that sends each request where a Kafka client would, for the client-facing
suite on three brokers (`--storage=cluster`).

Tests speak the protocol by hand to `broker.port`; on a cluster that is broker 1, which
leads only some partitions and coordinates only some groups. For a port registered by
`BrokerTrio` (`route_port`), `tests.support.wire.RawClient(...)` builds a `RoutedClient`:
a group's or a transactional id's request goes to its coordinator (FindCoordinator), a
partition's request (Produce, Fetch, ListOffsets, ShareFetch, ...) to the leader of the
first partition it names (Metadata; a ShareFetch or ShareAcknowledge naming none to the
broker of the member's share session, as a share consumer keeps one per broker; a Fetch
in a fetch session to the broker that opened the session), a share-state request
(83..87, what a share-partition leader sends) to the share coordinator of each
share-partition it names (FindCoordinator key type 2, the share key; split per
coordinator and the answers merged, as Kafka's persister does), anything else to the
bootstrap broker; a connection per broker, kept. A request sent already encoded
(`send_bytes`, e.g. the admin code's DescribeTransactions) is decoded to be routed the
same way, and its answer read from the connection it went to (`recv_frame`,
`response`); bytes that are not one whole request go to the bootstrap broker.
Elsewhere (one node) `RawClient` is the plain client, unchanged.
"""

from __future__ import annotations

import dataclasses
import struct
import time
import uuid
from typing import Any

from headwater.share.coordinator import coordinator_key
from headwater.wire.client import RawClient as PlainClient
from headwater.wire.codec import decode_request
from headwater.wire.header import parse_request_header, skip_tagged_fields
from headwater.wire.schemas import load_request_schema

from .routing import _once

_ROUTED: set[int] = set()
FETCH = 1

#: API key -> (body field naming the key, FindCoordinator key type), for requests a client
#: sends to a coordinator. A list field routes by its first element.
COORDINATED: dict[int, tuple[str, int]] = {
    8: ("group_id", 0), 9: ("group_id", 0), 11: ("group_id", 0), 12: ("group_id", 0),
    13: ("group_id", 0), 14: ("group_id", 0), 15: ("groups", 0), 42: ("groups_names", 0),
    47: ("group_id", 0), 68: ("group_id", 0), 69: ("group_ids", 0), 76: ("group_id", 0),
    77: ("group_ids", 0), 88: ("group_id", 0), 89: ("group_ids", 0), 90: ("groups", 0),
    91: ("group_id", 0), 92: ("group_id", 0),
    22: ("transactional_id", 1), 24: ("transactional_id", 1),
    25: ("transactional_id", 1), 26: ("transactional_id", 1),
    28: ("group_id", 0),  # TxnOffsetCommit goes to the group's coordinator
    65: ("transactional_ids", 1),
}
#: API key -> (topics field, topic name/id field, partitions field, partition index field)
PARTITIONED: dict[int, tuple[str, tuple[str, ...], str, str]] = {
    0: ("topic_data", ("name", "topic_id"), "partition_data", "index"),
    1: ("topics", ("topic", "topic_id"), "partitions", "partition"),
    2: ("topics", ("name",), "partitions", "partition_index"),
    21: ("topics", ("name",), "partitions", "partition_index"),
    23: ("topics", ("topic",), "partitions", "partition"),
    35: ("topics", ("topic",), "partitions", ""),  # DescribeLogDirs: the replica's broker
    61: ("topics", ("name",), "partition_indexes", ""),
    78: ("topics", ("topic_id",), "partitions", "partition_index"),
    79: ("topics", ("topic_id",), "partitions", "partition_index"),
}

#: InitializeShareGroupState .. ReadShareGroupStateSummary: {group_id, topics: [{topic_id,
#: partitions: [{partition, ...}]}]}, answered {results: [{topic_id, partitions}]}.
SHARE_STATE = frozenset({83, 84, 85, 86, 87})
SHARE_KEY_TYPE = 2
#: ShareFetch, ShareAcknowledge: a share session is a broker's (the leader's of the
#: partitions it names); a request that names none goes where the member's session is.
SHARE_SESSION = frozenset({78, 79})
LEADER_NOT_AVAILABLE = 5
#: How long a partition request waits for its partition to have a live leader.
LEADER_WAIT_S = 10.0


def route_port(port: int) -> None:
    """Requests to `port` are routed from now on (a BrokerTrio's bootstrap broker)."""
    _ROUTED.add(port)


def routed(port: int) -> bool:
    return port in _ROUTED


def _first(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return value[0] if value else None
    return value


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


class RoutedClient:
    def __init__(self, host: str, port: int, timeout: float = 10.0, **kwargs: Any) -> None:
        self._host, self._timeout, self._kwargs = host, timeout, kwargs
        self.bootstrap_port = port
        self._boot = PlainClient(host, port, timeout, **kwargs)
        self._conns: dict[int, PlainClient] = {port: self._boot}
        #: (group, member) -> the broker of its share session: a ShareFetch or
        #: ShareAcknowledge naming no partition (an incremental fetch) goes there.
        self._share_sessions: dict[tuple[str, str], int] = {}
        #: fetch session id -> the port of the broker that opened it
        self._sessions: dict[int, int] = {}
        #: Where the last `send_bytes` went: its answer is read there.
        self._sent = self._boot

    def __getattr__(self, name: str) -> Any:  # sock, client_id, ...
        return getattr(self._boot, name)

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()

    def request(self, api_key: int, version: int, body: Any, correlation_id: int = 1) -> Any:
        if api_key in SHARE_STATE and isinstance(body, dict):
            return self._share_state(api_key, version, body, correlation_id)
        port = self._route(api_key, body)
        response = self._conn(port).request(api_key, version, body, correlation_id)
        if api_key == FETCH and getattr(response, "session_id", 0):
            # a fetch session lives on the broker that opened it: a client sends the
            # session's next fetches there (an incremental one may name no partition)
            self._sessions[int(response.session_id)] = port
        return response

    def _route(self, api_key: int, body: Any) -> int:
        if api_key == FETCH and isinstance(body, dict) and body.get("session_id"):
            port = self._sessions.get(int(body["session_id"]))
            if port is not None:
                return port
        target = self._target(api_key, body)
        if api_key in SHARE_SESSION and isinstance(body, dict):
            member = (str(body.get("group_id")), str(body.get("member_id")))
            target = target or self._share_sessions.get(member)
            if target is not None:
                self._share_sessions[member] = target
        return target or self.bootstrap_port

    def _conn(self, port: int) -> PlainClient:
        conn = self._conns.get(port)
        if conn is None:
            conn = self._conns[port] = PlainClient(self._host, port, self._timeout,
                                                   **self._kwargs)
        return conn

    def _share_state(self, api_key: int, version: int, body: dict, correlation_id: int) -> Any:
        """A share-state request at the share coordinator of each share-partition it
        names: one request per coordinator, the answers' results merged in the order the
        request named them."""
        parts = self._share_targets(body)
        ports = list(dict.fromkeys(port for port, _t, _p in parts))
        if len(ports) <= 1 or not all(isinstance(t, dict) for _p, t, _x in parts):
            port = ports[0] if ports else self.bootstrap_port
            return self._conn(port).request(api_key, version, body, correlation_id)
        answers = []
        for port in ports:
            topics: dict[Any, dict] = {}
            for at, topic, part in parts:
                if at == port:
                    topics.setdefault(topic["topic_id"], {**topic, "partitions": []}
                                      )["partitions"].append(part)
            answers.append(self._conn(port).request(
                api_key, version, {**body, "topics": list(topics.values())}, correlation_id))
        results: dict[Any, list] = {}
        firsts: dict[Any, Any] = {}
        for answer in answers:
            for result in answer.results:
                firsts.setdefault(result.topic_id, result)
                results.setdefault(result.topic_id, []).extend(result.partitions)
        return dataclasses.replace(answers[0], results=tuple(
            dataclasses.replace(firsts[tid], partitions=tuple(ps))
            for tid, ps in results.items()))

    def _share_targets(self, body: dict) -> list[tuple[int, dict, Any]]:
        """(coordinator port, topic, partition) of every share-partition `body` names."""
        group = body.get("group_id")
        out = []
        for topic in body.get("topics") or ():
            for part in _field(topic, "partitions") or ():
                tid, index = _field(topic, "topic_id"), _field(part, "partition")
                port = None
                if isinstance(group, str) and isinstance(tid, uuid.UUID) and index is not None:
                    port = self._coordinator(coordinator_key(group, tid, int(index)),
                                             SHARE_KEY_TYPE)
                out.append((port or self.bootstrap_port, topic, part))
        return out

    def send_bytes(self, data: bytes) -> None:
        port = self._frame_target(data) or self.bootstrap_port
        self._sent = self._conn(port)
        self._sent.send_bytes(data)

    def recv_frame(self) -> bytes:
        return self._sent.recv_frame()

    def response(self, api_key: int, version: int, correlation_id: int = 1) -> Any:
        return self._sent.response(api_key, version, correlation_id)

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        return self._sent.is_closed_by_peer(timeout)

    def _frame_target(self, data: bytes) -> int | None:
        """Where one whole encoded request would be routed; None for anything else."""
        if len(data) < 4 or struct.unpack_from(">i", data)[0] != len(data) - 4:
            return None
        frame = bytes(data[4:])
        try:
            header = parse_request_header(frame)
            if header.api_key not in COORDINATED and header.api_key not in PARTITIONED:
                return None
            pos = header.body_offset
            if load_request_schema(header.api_key, header.api_version).__flexible__:
                pos = skip_tagged_fields(frame, pos)
            body = decode_request(header.api_key, header.api_version, frame, pos)
        except Exception:  # not a request we can read: as sent, to the bootstrap broker
            return None
        return self._target(header.api_key, body)

    def _target(self, api_key: int, body: Any) -> int | None:
        """`body`: a request as a dict, or decoded (kio's entity)."""
        if body is None:
            return None
        if api_key in COORDINATED:
            field, key_type = COORDINATED[api_key]
            key = _first(_field(body, field))
            if key is None and api_key == 9:  # OffsetFetch v8+: a batch of groups
                key = _first(_field(body, "groups"))
            if key is not None and not isinstance(key, str):
                key = _field(key, "group_id")
            if api_key == 24 and key is None:  # AddPartitionsToTxn v3-: its own field
                key = _field(body, "v3_and_below_transactional_id")
            if api_key == 24 and key is None:  # AddPartitionsToTxn v4+: a batch
                key = _field(_first(_field(body, "transactions")), "transactional_id")
            return self._coordinator(key, key_type) if isinstance(key, str) and key else None
        if api_key in PARTITIONED:
            topics, names, parts, index = PARTITIONED[api_key]
            topic = _first(_field(body, topics))
            if topic is None:
                return None
            ident = next((v for n in names if (v := _field(topic, n)) not in (None, "")
                          and v != uuid.UUID(int=0)), None)
            part = _first(_field(topic, parts))
            partition = part if not index else _field(part, index)
            if ident is None or partition is None:
                return None
            return self._leader(ident, int(partition))
        return None

    def _coordinator(self, key: str, key_type: int) -> int | None:
        found = _once(self.bootstrap_port, 10, 4, {"key_type": key_type,
                                                   "coordinator_keys": [key]})
        c = found.coordinators[0]
        return int(c.port) if int(c.error_code) == 0 else None

    def _leader(self, topic: str | uuid.UUID, partition: int,
                timeout: float = LEADER_WAIT_S) -> int | None:
        """The port of the partition's leader; while the topic exists but the partition
        has no live leader yet (a new topic, a lease moving) Metadata is asked again, as
        a client waits for a leader, for up to `timeout` seconds. None: no such
        partition (the bootstrap broker answers the error), or still no leader."""
        by_id = isinstance(topic, uuid.UUID)
        deadline = time.monotonic() + timeout
        while True:
            md = _once(self.bootstrap_port, 3, 12, {
                "topics": [{"name": None if by_id else topic,
                            "topic_id": topic if by_id else None}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False})
            ports = {int(b.node_id): int(b.port) for b in md.brokers}
            waiting = False
            for t in md.topics:
                for p in t.partitions:
                    if int(p.partition_index) != partition:
                        continue
                    if int(p.leader_id) in ports:
                        return ports[int(p.leader_id)]
                    waiting = True
                if int(t.error_code) == LEADER_NOT_AVAILABLE:
                    waiting = True
            if not waiting or time.monotonic() > deadline:
                return None
            time.sleep(0.1)
