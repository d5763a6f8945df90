"""Executor-side reads of exact offset ranges with raw Fetch requests.

Why not a Kafka client here: a client hands records over one Python object at a time,
which costs more than everything Spark does per row. This module sends Fetch requests
itself (kio codecs, one connection to the partition leader), walks the
returned batches in Python (a few per megabyte), and lets ``decode.ColumnBuilder`` turn
each batch's records into Arrow buffers with no per-record Python work.

Semantics follow Kafka's consumer: control batches are skipped; with read_committed,
only data below the last stable offset is returned by the broker and batches of aborted
transactions (the response lists them) are dropped, as Kafka's ``CompletedFetch`` does.
The next fetch is sent before the current response is decoded, so the broker reads
while this process decodes.

It speaks only the Kafka protocol (Metadata v4, Fetch v11), over PLAINTEXT, TLS and SASL
(``headwater.wire.client_security``); the source falls back to the librdkafka path for
security settings only librdkafka knows (see ``executor.native_supported``).
"""

from __future__ import annotations

import datetime
import logging
import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v11 import request as fetch_request
from kio.schema.fetch.v11.response import FetchResponse
from kio.schema.list_offsets.v1 import request as list_offsets_request
from kio.schema.list_offsets.v1.response import ListOffsetsResponse
from kio.schema.metadata.v4 import request as metadata_request
from kio.schema.metadata.v4.response import MetadataResponse
from kio.serial import entity_reader, entity_writer

from headwater.wire.client_security import PLAINTEXT, ClientSecurity

from .cluster import report_data_loss
from .codecs import decompress
from .decode import ColumnBuilder

log = logging.getLogger("pyspark_headwater")

CLIENT_ID = b"pyspark-headwater"
FETCH_KEY, FETCH_VERSION = 1, 11
METADATA_KEY, METADATA_VERSION = 3, 4
LIST_OFFSETS_KEY, LIST_OFFSETS_VERSION = 2, 1
EARLIEST, LATEST = -2, -1
FETCH_MAX_WAIT = datetime.timedelta(milliseconds=500)
RETRY_BACKOFF_S = 0.1
_MAX_FETCH_BYTES = 1 << 30

# RecordBatch v2 header: baseOffset, batchLength, partitionLeaderEpoch, magic, crc,
# attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordCount.
_BATCH = struct.Struct(">qiibIhiqqqhii")
_BATCH_PREFIX = 12  # baseOffset + batchLength: batchLength counts the rest
_COMPRESSION_MASK = 0x07
_LOG_APPEND_TIME = 0x08
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_ABORT_MARKER = 0
_REQUEST_HEADER = struct.Struct(">ihhih")
_SIZE = struct.Struct(">i")

_RETRIABLE = {
    ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
    ErrorCode.unknown_topic_or_partition, ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch, ErrorCode.kafka_storage_error,
    ErrorCode.request_timed_out, ErrorCode.not_coordinator,
}


class FetchError(RuntimeError):
    """The broker answered a fetch with an error that retrying does not cure."""


class _Connection:
    """One blocking TCP (or TLS) connection speaking request/response frames,
    authenticated first when the listener wants SASL."""

    def __init__(self, host: str, port: int, timeout_s: float,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.sock: socket.socket = security.connect(host, port, timeout_s)
        self.correlation = 0
        self.pending: list[tuple[int, type]] = []

    def send(self, api_key: int, version: int, body: Any, response_type: type) -> None:
        self.correlation += 1
        payload = bytearray(_REQUEST_HEADER.pack(0, api_key, version, self.correlation,
                                                 len(CLIENT_ID)) + CLIENT_ID)
        writer = _Sink(payload)
        entity_writer(type(body))(writer, body)
        _SIZE.pack_into(payload, 0, len(payload) - 4)
        self.sock.sendall(payload)
        self.pending.append((self.correlation, response_type))

    def receive(self) -> Any:
        """The oldest pending response, decoded."""
        correlation, response_type = self.pending.pop(0)
        size = _SIZE.unpack(self._read(4))[0]
        frame = self._read(size)
        if _SIZE.unpack_from(frame, 0)[0] != correlation:
            raise ConnectionError("response out of order")
        result: Any = entity_reader(response_type)(memoryview(frame).toreadonly(), 4)
        return result[0] if isinstance(result, tuple) else result

    def _read(self, n: int) -> bytearray:
        out = bytearray(n)
        view = memoryview(out)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if not k:
                raise ConnectionError("connection closed by the broker")
            got += k
        return out

    def close(self) -> None:
        self.sock.close()


class _Sink:
    """The writable kio's entity writers expect, appending to a bytearray."""

    def __init__(self, out: bytearray) -> None:
        self.out = out

    def write(self, data: bytes) -> int:
        self.out += data
        return len(data)


def _parse_servers(bootstrap: str) -> list[tuple[str, int]]:
    servers = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        servers.append((host.strip("[]") or "localhost", int(port or 9092)))
    return servers


@dataclass
class _Leader:
    node: int
    host: str
    port: int


class Session:
    """Connections of one executor process to one cluster (cached per bootstrap)."""

    def __init__(self, bootstrap: str, timeout_s: float,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.bootstrap = _parse_servers(bootstrap)
        self.timeout_s = timeout_s
        self.security = security
        self._conns: dict[tuple[str, int], _Connection] = {}
        self._leaders: dict[tuple[str, int], _Leader] = {}

    def connection(self, host: str, port: int) -> _Connection:
        conn = self._conns.get((host, port))
        if conn is None:
            conn = self._conns[(host, port)] = _Connection(host, port, self.timeout_s,
                                                              self.security)
        return conn

    def drop(self, host: str, port: int) -> None:
        conn = self._conns.pop((host, port), None)
        if conn is not None:
            conn.close()

    def leader(self, topic: str, partition: int, refresh: bool = False) -> _Leader | None:
        key = (topic, partition)
        if refresh or key not in self._leaders:
            self._refresh(topic)
        return self._leaders.get(key)

    def _refresh(self, topic: str) -> None:
        body = metadata_request.MetadataRequest(
            topics=(metadata_request.MetadataRequestTopic(name=topic),),
            allow_auto_topic_creation=False)
        last: Exception | None = None
        for host, port in self.bootstrap:
            try:
                conn = self.connection(host, port)
                conn.send(METADATA_KEY, METADATA_VERSION, body, MetadataResponse)
                md = conn.receive()
                break
            except OSError as exc:
                self.drop(host, port)
                last = exc
        else:
            raise ConnectionError(f"no bootstrap server answered: {last}")
        nodes = {b.node_id: (b.host, b.port) for b in md.brokers}
        for t in md.topics:
            for p in t.partitions:
                if p.error_code == ErrorCode.none and p.leader_id in nodes:
                    host, port = nodes[p.leader_id]
                    self._leaders[(t.name, p.partition_index)] = _Leader(p.leader_id, host,
                                                                         port)
                else:
                    self._leaders.pop((t.name, p.partition_index), None)

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()


_sessions: dict[tuple[str, ClientSecurity], Session] = {}


def session_for(bootstrap: str, timeout_s: float,
                security: ClientSecurity = PLAINTEXT) -> Session:
    session = _sessions.get((bootstrap, security))
    if session is None:
        session = _sessions[(bootstrap, security)] = Session(bootstrap, timeout_s, security)
    return session


def drop_session(bootstrap: str) -> None:
    for key in [k for k in _sessions if k[0] == bootstrap]:
        _sessions.pop(key).close()


def _is_abort_marker(data: memoryview | bytes, start: int, end: int) -> bool:
    """Whether a control batch's first record is an ABORT marker (key: version, type)."""
    pos = start + _BATCH.size
    # record length, attributes, timestamp delta, offset delta, key length: varints
    # (the attribute is one byte); the key then starts with int16 version, int16 type.
    values = []
    pos, _ = _skip_varint(data, pos, end)  # record length
    pos += 1  # attributes
    for _ in range(3):
        pos, v = _skip_varint(data, pos, end)
        values.append(v)
    if values[2] < 4 or pos + 4 > end:
        return False
    return struct.unpack_from(">h", data, pos + 2)[0] == _ABORT_MARKER


def _skip_varint(data: memoryview | bytes, pos: int, end: int) -> tuple[int, int]:
    raw = shift = 0
    while pos < end:
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    return pos, (raw >> 1) ^ -(raw & 1)


@dataclass
class _Batches:
    """The decodable batches of one fetch response and the offset to fetch next."""

    # (start, end, base offset, record count, base or log-append timestamp, attributes)
    batches: list[tuple[int, int, int, int, int, int]]
    next_offset: int


def walk_batches(data: memoryview | bytes, pos: int, read_committed: bool,
                 aborted: list[tuple[int, int]]) -> _Batches:
    """Whole batches of a partition's records, minus control batches and (read_committed)
    batches of aborted transactions; a truncated last batch is left for the next fetch."""
    size = len(data)
    aborted = sorted(aborted, key=lambda a: a[1])
    aborted_producers: set[int] = set()
    kept = []
    next_offset = pos
    at = 0
    while at + _BATCH.size <= size:
        (base, length, _epoch, magic, _crc, attrs, last_delta, base_ts, max_ts,
         producer_id, _pepoch, _seq, count) = _BATCH.unpack_from(data, at)
        end = at + _BATCH_PREFIX + length
        if end > size:
            break
        if magic != 2:
            raise FetchError(f"unsupported record batch magic {magic} at offset {base}")
        last = base + last_delta
        start, at = at, end
        if last < next_offset:
            continue
        next_offset = last + 1
        if read_committed and producer_id >= 0:
            while aborted and aborted[0][1] <= last:
                aborted_producers.add(aborted.pop(0)[0])
            if attrs & _CONTROL:
                if _is_abort_marker(data, start, end):
                    aborted_producers.discard(producer_id)
                continue
            if attrs & _TRANSACTIONAL and producer_id in aborted_producers:
                continue
        if attrs & _CONTROL:
            continue
        # LogAppendTime: the broker stamped the batch's max timestamp; records carry that.
        kept.append((start, end, base, count,
                     max_ts if attrs & _LOG_APPEND_TIME else base_ts, attrs))
    return _Batches(kept, next_offset)


def read_range(opts: Any, schema: pa.Schema, part: Any, chunk_rows: int,
               fetch_bytes: int) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``part`` ([from_offset, until_offset)) as Arrow batches."""
    until = part.until_offset
    pos = part.from_offset
    if until <= pos:
        return
    timeout_s = opts.poll_timeout_ms / 1000
    session = session_for(opts.bootstrap, min(timeout_s, 30.0), opts.security)
    read_committed = opts.isolation_level == "read_committed"
    builder = ColumnBuilder(schema, part.topic, part.partition, opts.include_headers)
    reader = _PartitionReader(session, part.topic, part.partition, read_committed,
                              fetch_bytes, timeout_s, opts.fail_on_data_loss)
    try:
        reader.request(pos)
        while pos < until:
            answer = reader.response(pos, until)
            if answer is None:  # nothing new: an error handled, or a long poll ran out
                pos = reader.position
                if pos < until:
                    reader.request(pos)
                continue
            data, walked = answer
            lo = pos  # a batch may start below the fetch offset: never emit those records
            pos = walked.next_offset
            if pos < until:
                reader.request(pos)  # the broker reads the next range while we decode
            for start, end, base, count, base_ts, attrs in walked.batches:
                if base >= until:
                    break
                section = data[start + _BATCH.size:end]
                codec = attrs & _COMPRESSION_MASK
                if codec:
                    section = decompress(codec, section)
                builder.add_records(np.frombuffer(section, dtype=np.uint8), count, base,
                                    base_ts, bool(attrs & _LOG_APPEND_TIME), lo, until)
                if builder.rows >= chunk_rows:
                    yield builder.flush()
        if builder.rows:
            yield builder.flush()
    except BaseException:
        reader.abandon()
        raise
    reader.finish()


class _PartitionReader:
    """Fetch state of one range: the leader, the request in flight, retries."""

    def __init__(self, session: Session, topic: str, partition: int, read_committed: bool,
                 fetch_bytes: int, timeout_s: float, fail_on_data_loss: bool) -> None:
        self.session = session
        self.topic = topic
        self.partition = partition
        self.read_committed = read_committed
        self.fetch_bytes = fetch_bytes
        self.timeout_s = timeout_s
        self.fail_on_data_loss = fail_on_data_loss
        self.position = 0
        self.deadline = time.monotonic() + timeout_s
        self.conn: _Connection | None = None
        self.leader: _Leader | None = None

    def request(self, offset: int) -> None:
        self.position = offset
        while True:
            try:
                if self.conn is None:
                    self.leader = self.session.leader(self.topic, self.partition,
                                                      refresh=self.leader is not None)
                    if self.leader is None:
                        self._retry_later(f"no leader for {self.topic}-{self.partition}")
                        continue
                    self.conn = self.session.connection(self.leader.host, self.leader.port)
                self.conn.send(FETCH_KEY, FETCH_VERSION, self._body(offset), FetchResponse)
                return
            except OSError as exc:
                self._lost_connection(exc)

    def _body(self, offset: int) -> Any:
        return fetch_request.FetchRequest(
            replica_id=-1, max_wait=FETCH_MAX_WAIT, min_bytes=1,
            max_bytes=self.fetch_bytes, isolation_level=1 if self.read_committed else 0,
            session_id=0, session_epoch=-1,
            topics=(fetch_request.FetchTopic(topic=self.topic, partitions=(
                fetch_request.FetchPartition(
                    partition=self.partition, current_leader_epoch=-1, fetch_offset=offset,
                    log_start_offset=-1, partition_max_bytes=self.fetch_bytes),)),),
            forgotten_topics_data=(), rack_id="")

    def response(self, pos: int, until: int) -> tuple[Any, _Batches] | None:
        """The in-flight response as (records, walked batches), or None when it brought
        nothing to decode (the caller asks again from ``self.position``)."""
        assert self.conn is not None
        try:
            resp = self.conn.receive()
        except OSError as exc:
            self._lost_connection(exc)
            return None
        part = resp.responses[0].partitions[0] if resp.responses else None
        code = resp.error_code if part is None else part.error_code
        if code == ErrorCode.offset_out_of_range:
            self._out_of_range(pos, until)
            return None
        if code in _RETRIABLE:
            self._drop()
            self._retry_later(f"fetch of {self.topic}-{self.partition}: {code.name}")
            return None
        if code != ErrorCode.none:
            raise FetchError(f"fetch of {self.topic}-{self.partition} at offset {pos} "
                             f"failed: {code.name}")
        assert part is not None  # no partition comes with the response's error code
        data = part.records or b""
        aborted = [(a.producer_id, a.first_offset) for a in part.aborted_transactions or ()]
        walked = walk_batches(memoryview(data), pos, self.read_committed, aborted)
        if walked.next_offset > pos:
            self.deadline = time.monotonic() + self.timeout_s
            return data, walked
        if data and self.fetch_bytes < _MAX_FETCH_BYTES:
            # only part of a batch larger than the fetch size (a broker without KIP-74)
            self.fetch_bytes = min(2 * self.fetch_bytes, _MAX_FETCH_BYTES)
        elif time.monotonic() > self.deadline:
            report_data_loss(
                self.fail_on_data_loss,
                f"Timed out after kafkaConsumer.pollTimeoutMs={int(self.timeout_s * 1000)} "
                f"reading offsets [{pos}, {until}) of {self.topic}-{self.partition}")
            self.position = until
            return None
        self.position = pos
        return None

    def _out_of_range(self, pos: int, until: int) -> None:
        low, high = self._watermarks()
        where = f"{self.topic}-{self.partition}"
        if pos < low:
            report_data_loss(self.fail_on_data_loss,
                             f"Cannot fetch offset {pos} of {where}: the earliest available "
                             f"offset is {low}")
            self.position = min(low, until)
        else:
            report_data_loss(self.fail_on_data_loss,
                             f"Cannot fetch offset {pos} of {where}: the log ends at {high}")
            self.position = until

    def _watermarks(self) -> tuple[int, int]:
        """(log start offset, high watermark) from ListOffsets (earliest, latest)."""
        assert self.conn is not None and not self.conn.pending
        found = []
        for spec in (EARLIEST, LATEST):
            self.conn.send(LIST_OFFSETS_KEY, LIST_OFFSETS_VERSION, list_offsets_request.ListOffsetsRequest(
                replica_id=-1, topics=(list_offsets_request.ListOffsetsTopic(
                    name=self.topic, partitions=(list_offsets_request.ListOffsetsPartition(
                        partition_index=self.partition, timestamp=spec),)),)),
                ListOffsetsResponse)
            answer = self.conn.receive().topics[0].partitions[0]
            if answer.error_code != ErrorCode.none:
                raise FetchError(f"ListOffsets of {self.topic}-{self.partition}: "
                                 f"{answer.error_code.name}")
            found.append(answer.offset)
        return found[0], found[1]

    def _retry_later(self, why: str) -> None:
        if time.monotonic() > self.deadline:
            raise FetchError(f"{why} (gave up after {self.timeout_s:.0f} s)")
        log.info("%s; retrying", why)
        time.sleep(RETRY_BACKOFF_S)

    def _lost_connection(self, exc: OSError) -> None:
        self._drop()
        self._retry_later(f"connection to the leader of {self.topic}-{self.partition} "
                          f"failed: {exc}")

    def _drop(self) -> None:
        if self.leader is not None:
            self.session.drop(self.leader.host, self.leader.port)
        self.conn = None

    def abandon(self) -> None:
        """A response may still be in flight: the connection cannot be reused."""
        if self.conn is not None and self.conn.pending:
            self._drop()

    def finish(self) -> None:
        self.abandon()


