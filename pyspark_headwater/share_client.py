"""Driver-side share-group member for the share source (KIP-932, KIP-1222 RENEW).

Why a client of our own rather than confluent-kafka's ``ShareConsumer``: the source
needs (1) the acquired offset ranges and delivery counts, not the records (executors
re-read the records by offset, so the driver is not a bottleneck); (2) to hold a whole
micro-batch of acquired records across several fetches until Spark's sink commit
(``ShareConsumer`` in explicit mode refuses to poll before the previous poll is
acknowledged); (3) RENEW acknowledgements, which librdkafka 2.16 does not offer. So this
speaks ShareGroupHeartbeat v1, ShareFetch v2 and ShareAcknowledge v2 itself with kio's
codecs, one share session per partition leader.

Threading: the stream runner calls :meth:`ShareMember.fetch` / :meth:`acknowledge` from
its main thread; a daemon thread heartbeats and renews the locks of records still in
flight (acquired, not yet acknowledged). One lock serialises every request, because a
share session's epoch must advance one request at a time.
"""

from __future__ import annotations

import datetime
import logging
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import request as fc_req
from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
from kio.schema.metadata.v12 import request as md_req
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.share_acknowledge.v2 import request as ack_req
from kio.schema.share_acknowledge.v2.response import ShareAcknowledgeResponse
from kio.schema.share_fetch.v2 import request as sf_req
from kio.schema.share_fetch.v2.response import ShareFetchResponse
from kio.schema.share_group_heartbeat.v1 import request as hb_req
from kio.schema.share_group_heartbeat.v1.response import ShareGroupHeartbeatResponse
from kio.serial import entity_reader, entity_writer

from headwater.wire.client_security import PLAINTEXT, ClientSecurity

log = logging.getLogger("pyspark_headwater")

CLIENT_ID = b"pyspark-headwater-share"
ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4
# ShareFetch v2's ShareAcquireMode (KIP-1206): batch_optimized hands out whole producer
# batches (MaxRecords is a soft bound); record_limit never more than MaxRecords, cutting
# a batch, which is what an exact maxRecordsPerTrigger needs.
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1
TopicPartition = tuple[str, int]
Range = tuple[int, int, int]  # first offset, last offset (inclusive), delivery count

_HEADER = struct.Struct(">ihhih")
_SIZE = struct.Struct(">i")
_KEYS = {FindCoordinatorResponse: (10, 4), MetadataResponse: (3, 12),
         ShareGroupHeartbeatResponse: (76, 1), ShareFetchResponse: (78, 2),
         ShareAcknowledgeResponse: (79, 2)}


class ShareGroupError(RuntimeError):
    """The broker refused the member (a group of another type, an unknown topic, ...)."""


# Errors a broker gives while it (re)starts or moves leadership: retried.
_RETRIABLE_TEXT = ("coordinator_not_available", "not_coordinator",
                   "coordinator_load_in_progress", "not_leader_or_follower",
                   "leader_not_available", "unknown_topic_or_partition",
                   "share_session_not_found", "invalid_share_session_epoch")


class _Conn:
    """One blocking connection speaking flexible (header v2 / v1) request/response,
    over TLS and authenticated first when the listener wants it."""

    def __init__(self, host: str, port: int, timeout_s: float,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.sock: socket.socket = security.connect(host, port, timeout_s)
        self.correlation = 0

    def call(self, body: Any, response_type: type) -> Any:
        key, version = _KEYS[response_type]
        self.correlation += 1
        out = bytearray(_HEADER.pack(0, key, version, self.correlation, len(CLIENT_ID))
                        + CLIENT_ID + b"\x00")

        class _W:
            def write(self, data: bytes) -> int:
                out.extend(data)
                return len(data)

        entity_writer(type(body))(_W(), body)
        _SIZE.pack_into(out, 0, len(out) - 4)
        self.sock.sendall(out)
        size = _SIZE.unpack(self._read(4))[0]
        frame = self._read(size)
        if _SIZE.unpack_from(frame, 0)[0] != self.correlation:
            raise ConnectionError("response out of order")
        result: Any = entity_reader(response_type)(memoryview(frame).toreadonly(), 5)
        return result[0] if isinstance(result, tuple) else result

    def _read(self, n: int) -> bytearray:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if not k:
                raise ConnectionError("connection closed by the broker")
            got += k
        return buf

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _ms(td: Any) -> int:
    return int(td.total_seconds() * 1000) if isinstance(td, datetime.timedelta) else int(td)


@dataclass
class _Session:
    """The share session with one partition leader."""

    node: int
    epoch: int = 0
    partitions: set[tuple[uuid.UUID, int]] = field(default_factory=set)


@dataclass
class Acquired:
    """What one :meth:`ShareMember.fetch` acquired: ranges per partition."""

    ranges: dict[TopicPartition, list[Range]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(last - first + 1 for rs in self.ranges.values() for first, last, _ in rs)


class ShareMember:
    """One member of share group ``group`` subscribed to ``topics``."""

    def __init__(self, bootstrap: str, group: str, topics: Iterable[str],
                 timeout_s: float = 30.0, fetch_bytes: int = 8 << 20,
                 security: ClientSecurity = PLAINTEXT,
                 acquire_mode: int = RECORD_LIMIT) -> None:
        self.bootstrap = [(h.strip("[]") or "localhost", int(p or 9092)) for h, _, p in
                          (s.strip().rpartition(":") for s in bootstrap.split(","))]
        self.group = group
        self.topics = sorted(set(topics))
        self.timeout_s = timeout_s
        self.fetch_bytes = fetch_bytes
        self.acquire_mode = acquire_mode
        self.security = security
        self.member_id = uuid.uuid4().hex
        self.epoch = 0
        self.lock_ms = 30_000
        self.heartbeat_ms = 5_000
        self.assignment: set[tuple[uuid.UUID, int]] = set()
        self.in_flight: dict[TopicPartition, list[Range]] = {}
        self._nodes: dict[int, tuple[str, int]] = {}
        self._conns: dict[int, _Conn] = {}
        self._leaders: dict[TopicPartition, int] = {}
        self._ids: dict[str, uuid.UUID] = {}
        self._names: dict[uuid.UUID, str] = {}
        self._coordinator: int | None = None
        self._sessions: dict[int, _Session] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_heartbeat = 0.0
        self._last_renew = 0.0
        self.error: BaseException | None = None  # from the background thread
        #: When the member last lost its coordinator, a broker or its membership
        #: (monotonic seconds): records may be held by its earlier self until then.
        self.disrupted_at = float("-inf")

    # ---- connections and metadata ---------------------------------------------------------
    def _conn(self, node: int) -> _Conn:
        conn = self._conns.get(node)
        if conn is None:
            host, port = self._nodes[node]
            conn = self._conns[node] = _Conn(host, port, self.timeout_s, self.security)
        return conn

    def _any_call(self, body: Any, response_type: type) -> Any:
        last: Exception | None = None
        for host, port in self.bootstrap:
            try:
                conn = _Conn(host, port, self.timeout_s, self.security)
            except OSError as exc:
                last = exc
                continue
            try:
                return conn.call(body, response_type)
            except OSError as exc:
                last = exc
            finally:
                conn.close()
        raise ConnectionError(f"no bootstrap server answered: {last}")

    def _call(self, node: int, body: Any, response_type: type) -> Any:
        try:
            return self._conn(node).call(body, response_type)
        except OSError:
            self._drop(node)
            raise

    def _drop(self, node: int) -> None:
        conn = self._conns.pop(node, None)
        if conn is not None:
            conn.close()
        self._sessions.pop(node, None)  # its share session is gone with the connection

    def refresh_metadata(self) -> None:
        md = self._any_call(md_req.MetadataRequest(
            topics=tuple(md_req.MetadataRequestTopic(name=t, topic_id=None)
                         for t in self.topics),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False),
            MetadataResponse)
        self._nodes = {b.node_id: (b.host, b.port) for b in md.brokers}
        for t in md.topics:
            if t.error_code != ErrorCode.none or t.name is None:
                continue
            self._ids[t.name] = t.topic_id
            self._names[t.topic_id] = t.name
            for p in t.partitions:
                if p.error_code == ErrorCode.none and p.leader_id >= 0:
                    self._leaders[(t.name, p.partition_index)] = p.leader_id
        fc = self._any_call(fc_req.FindCoordinatorRequest(key_type=0,
                                                          coordinator_keys=(self.group,)),
                            FindCoordinatorResponse)
        coord = fc.coordinators[0]
        if coord.error_code != ErrorCode.none:
            raise ConnectionError(f"FindCoordinator for {self.group}: {coord.error_code.name}")
        self._nodes.setdefault(coord.node_id, (coord.host, coord.port))
        self._coordinator = coord.node_id

    def topic_partitions(self, tp_ids: Iterable[tuple[uuid.UUID, int]]) -> list[TopicPartition]:
        return sorted((self._names[t], p) for t, p in tp_ids if t in self._names)

    # ---- membership ---------------------------------------------------------------------------
    def join(self, assignment_wait_s: float = 10.0) -> None:
        """Join, and wait (heartbeating) until the group assigns partitions: a query's
        first trigger must not find "nothing available" because the assignment lags."""
        with self._lock:
            self.refresh_metadata()
            self._heartbeat(subscribe=True)
            deadline = time.monotonic() + assignment_wait_s
            while not self.assignment and time.monotonic() < deadline:
                time.sleep(0.1)
                self._heartbeat()
        if self._thread is None:
            self._thread = threading.Thread(target=self._background, daemon=True,
                                            name="headwater-share-member")
            self._thread.start()

    def _heartbeat(self, subscribe: bool = False) -> None:
        if self._coordinator is None:
            self.refresh_metadata()
        assert self._coordinator is not None
        body = hb_req.ShareGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
            rack_id=None, subscribed_topic_names=tuple(self.topics)
            if subscribe or self.epoch == 0 else None)
        resp = self._call(self._coordinator, body, ShareGroupHeartbeatResponse)
        self._last_heartbeat = time.monotonic()
        code = resp.error_code
        if code in (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id):
            log.warning("share member %s was fenced (%s): rejoining", self.member_id,
                        code.name)
            self.epoch = 0
            self.assignment = set()
            self.in_flight = {}  # its acquisitions are gone: they will be redelivered
            self.disrupted_at = time.monotonic()
            self._heartbeat(subscribe=True)
            return
        if code in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                    ErrorCode.coordinator_load_in_progress):
            self.disrupted_at = time.monotonic()
            self.refresh_metadata()
            return
        if code != ErrorCode.none:
            raise ShareGroupError(f"ShareGroupHeartbeat for group '{self.group}' failed: "
                                  f"{code.name}: {resp.error_message or ''}".rstrip(": "))
        self.epoch = resp.member_epoch
        self.heartbeat_ms = max(100, _ms(resp.heartbeat_interval))
        if resp.assignment is not None:
            self.assignment = {(tp.topic_id, p) for tp in resp.assignment.topic_partitions
                               for p in tp.partitions}
            if any(t not in self._names for t, _ in self.assignment):
                self.refresh_metadata()

    def _background(self) -> None:
        """Heartbeats, and RENEW for in-flight records every half lock duration."""
        while not self._stop.wait(0.05):
            now = time.monotonic()
            try:
                with self._lock:
                    if now - self._last_heartbeat >= self.heartbeat_ms / 1000:
                        self._heartbeat()
                    if self.in_flight and now - self._last_renew >= self.lock_ms / 2000:
                        self._renew()
            except Exception as exc:  # retried on the next turn; surfaced if it persists
                log.warning("share member background work failed: %s", exc)
                self.error = exc
                self.disrupted_at = time.monotonic()
                self._stop.wait(1.0)
            else:
                self.error = None

    def _renew(self) -> None:
        self._last_renew = time.monotonic()
        failed = self._acknowledge(self.in_flight, RENEW)
        for tp in failed:
            log.warning("renewing the locks of %s-%d failed: its records will be "
                        "redelivered", *tp)

    # ---- fetch and acknowledge -------------------------------------------------------------
    def _by_leader(self, tps: Iterable[tuple[uuid.UUID, int]]
                   ) -> dict[int, list[tuple[uuid.UUID, int]]]:
        out: dict[int, list[tuple[uuid.UUID, int]]] = {}
        for tid, p in tps:
            leader = self._leaders.get((self._names.get(tid, ""), p))
            if leader is not None:
                out.setdefault(leader, []).append((tid, p))
        return out

    def fetch(self, max_records: int, wait_ms: int, retry_s: float = 120.0) -> Acquired:
        """One ShareFetch per leader of the assigned partitions; the acquired ranges are
        added to :attr:`in_flight` (renewed until acknowledged). A lost broker (restart,
        leader change) is retried for ``retry_s``: the member rejoins, and what it held
        comes back to the group when the locks expire."""
        deadline = time.monotonic() + retry_s
        while True:
            try:
                return self._fetch_once(max_records, wait_ms)
            except (OSError, ShareGroupError) as exc:
                retriable = isinstance(exc, OSError) or any(
                    code in str(exc) for code in _RETRIABLE_TEXT)
                if not retriable or time.monotonic() > deadline:
                    raise
                log.warning("share fetch failed (%s): reconnecting", exc)
                self.disrupted_at = time.monotonic()
                with self._lock:
                    for node in list(self._conns):
                        self._drop(node)
                    self._coordinator = None
                time.sleep(0.5)

    def _fetch_once(self, max_records: int, wait_ms: int) -> Acquired:
        got = Acquired()
        with self._lock:
            if self.epoch == 0 or self._coordinator is None:
                self.join()
            by_leader = self._by_leader(self.assignment)
            for node in set(self._sessions) - set(by_leader):
                self._close_session(node)
            for node, tps in sorted(by_leader.items()):
                left = max_records - got.count
                if left <= 0:
                    break
                self._fetch_from(node, tps, left, wait_ms, got)
            for tp, ranges in got.ranges.items():
                self.in_flight.setdefault(tp, []).extend(ranges)
        return got

    def _fetch_from(self, node: int, tps: list[tuple[uuid.UUID, int]], max_records: int,
                    wait_ms: int, got: Acquired) -> None:
        session = self._sessions.get(node)
        if session is None:
            session = self._sessions[node] = _Session(node)
        wanted = set(tps)
        added = wanted - session.partitions if session.epoch else wanted
        removed = session.partitions - wanted if session.epoch else set()
        topics: dict[uuid.UUID, list[int]] = {}
        for tid, p in sorted(added, key=lambda x: (str(x[0]), x[1])):
            topics.setdefault(tid, []).append(p)
        forgotten: dict[uuid.UUID, list[int]] = {}
        for tid, p in removed:
            forgotten.setdefault(tid, []).append(p)
        body = sf_req.ShareFetchRequest(
            group_id=self.group, member_id=self.member_id, share_session_epoch=session.epoch,
            max_wait=datetime.timedelta(milliseconds=wait_ms), min_bytes=1,
            max_bytes=self.fetch_bytes, max_records=max_records,
            batch_size=min(max_records, 10_000), share_acquire_mode=self.acquire_mode,
            is_renew_ack=False,
            topics=tuple(sf_req.FetchTopic(topic_id=t, partitions=tuple(
                sf_req.FetchPartition(partition_index=p, acknowledgement_batches=())
                for p in ps)) for t, ps in topics.items()),
            forgotten_topics_data=tuple(sf_req.ForgottenTopic(topic_id=t, partitions=tuple(ps))
                                        for t, ps in forgotten.items()))
        resp = self._call(node, body, ShareFetchResponse)
        if resp.error_code in (ErrorCode.share_session_not_found,
                               ErrorCode.invalid_share_session_epoch):
            self._sessions.pop(node, None)  # reopened on the next fetch
            return
        if resp.error_code != ErrorCode.none:
            raise ShareGroupError(f"ShareFetch failed: {resp.error_code.name}: "
                                  f"{resp.error_message or ''}")
        session.epoch += 1
        session.partitions = wanted
        self.lock_ms = _ms(resp.acquisition_lock_timeout) or self.lock_ms
        for t in resp.responses:
            name = self._names.get(t.topic_id)
            for p in t.partitions:
                if p.error_code != ErrorCode.none:
                    if p.error_code in (ErrorCode.not_leader_or_follower,
                                        ErrorCode.unknown_topic_or_partition):
                        self.refresh_metadata()
                    log.warning("ShareFetch %s-%d: %s", name, p.partition_index,
                                p.error_code.name)
                    continue
                if name is None or not p.acquired_records:
                    continue
                got.ranges.setdefault((name, p.partition_index), []).extend(
                    (r.first_offset, r.last_offset, r.delivery_count)
                    for r in p.acquired_records)

    def acknowledge(self, ranges: Mapping[TopicPartition, Iterable[tuple[int, int]]],
                    ack_type: int = ACCEPT) -> set[TopicPartition]:
        """Acknowledge offset ranges; returns the partitions the broker refused (their
        records come back when their locks expire). The ranges leave :attr:`in_flight`."""
        with self._lock:
            failed = self._acknowledge(ranges, ack_type)
            for tp, acked in ranges.items():
                left = _subtract(self.in_flight.get(tp, []), acked)
                if left:
                    self.in_flight[tp] = left
                else:
                    self.in_flight.pop(tp, None)
            return failed

    def _acknowledge(self, ranges: Mapping[TopicPartition, Iterable[Any]],
                     ack_type: int) -> set[TopicPartition]:
        failed: set[TopicPartition] = set()
        per_node: dict[int, dict[uuid.UUID, list[Any]]] = {}
        for (topic, part), rs in ranges.items():
            rs = list(rs)
            tid = self._ids.get(topic)
            node = self._leaders.get((topic, part))
            session = self._sessions.get(node) if node is not None else None
            if not rs:
                continue
            if tid is None or session is None or not session.epoch:
                failed.add((topic, part))  # no session: the broker released them anyway
                continue
            per_node.setdefault(node, {}).setdefault(tid, []).append(
                ack_req.AcknowledgePartition(partition_index=part, acknowledgement_batches=tuple(
                    ack_req.AcknowledgementBatch(first_offset=r[0], last_offset=r[1],
                                                 acknowledge_types=(ack_type,))
                    for r in sorted(rs))))
        for node, topics in per_node.items():
            session = self._sessions[node]
            body = ack_req.ShareAcknowledgeRequest(
                group_id=self.group, member_id=self.member_id,
                share_session_epoch=session.epoch, is_renew_ack=ack_type == RENEW,
                topics=tuple(ack_req.AcknowledgeTopic(topic_id=t, partitions=tuple(ps))
                             for t, ps in topics.items()))
            try:
                resp = self._call(node, body, ShareAcknowledgeResponse)
            except OSError as exc:
                log.warning("ShareAcknowledge to node %d failed: %s", node, exc)
                failed |= {(self._names[t], p.partition_index) for t, ps in topics.items()
                           for p in ps}
                continue
            if resp.error_code != ErrorCode.none:
                self._sessions.pop(node, None)
                failed |= {(self._names[t], p.partition_index) for t, ps in topics.items()
                           for p in ps}
                continue
            session.epoch += 1
            for t in resp.responses:
                for p in t.partitions:
                    if p.error_code != ErrorCode.none:
                        failed.add((self._names[t.topic_id], p.partition_index))
        return failed

    # ---- leaving ------------------------------------------------------------------------------
    def _close_session(self, node: int) -> None:
        session = self._sessions.pop(node, None)
        if session is None or not session.epoch:
            return
        try:
            self._call(node, sf_req.ShareFetchRequest(
                group_id=self.group, member_id=self.member_id, share_session_epoch=-1,
                max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=0, max_records=0,
                batch_size=0, topics=(), forgotten_topics_data=()), ShareFetchResponse)
        except OSError:
            pass

    def close(self, release: bool = True) -> None:
        """Release what is in flight (when asked), close the sessions, leave the group."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            try:
                if release and self.in_flight:
                    self._acknowledge(self.in_flight, RELEASE)
                for node in list(self._sessions):
                    self._close_session(node)
                if self.epoch > 0 and self._coordinator is not None:
                    self._call(self._coordinator, hb_req.ShareGroupHeartbeatRequest(
                        group_id=self.group, member_id=self.member_id, member_epoch=-1,
                        rack_id=None, subscribed_topic_names=None),
                        ShareGroupHeartbeatResponse)
            except (OSError, ShareGroupError) as exc:
                log.warning("leaving share group %s: %s", self.group, exc)
            finally:
                self.in_flight = {}
                for node in list(self._conns):
                    self._drop(node)


def _subtract(ranges: list[Range], remove: Iterable[Any]) -> list[Range]:
    """``ranges`` minus the offsets of ``remove`` ((first, last, ...) tuples)."""
    out = list(ranges)
    for r in remove:
        lo, hi = r[0], r[1]
        nxt: list[Range] = []
        for first, last, dc in out:
            if last < lo or first > hi:
                nxt.append((first, last, dc))
                continue
            if first < lo:
                nxt.append((first, lo - 1, dc))
            if last > hi:
                nxt.append((hi + 1, last, dc))
        out = nxt
    return out
