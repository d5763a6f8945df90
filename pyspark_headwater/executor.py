"""Executor side of the source: read exactly ``[from, until)`` of one partition and yield
Arrow record batches.

Why it is shaped like this:

* The range is fixed by the driver and written to Spark's offset log before the batch
  runs, so a replayed micro-batch reads the same offsets and yields the same rows. The
  read stops at ``until`` whatever the broker has beyond it.
* Two readers produce identical batches. The native one (``fetcher.py`` + ``decode.py``:
  raw Fetch requests, records decoded by a compiled kernel straight into Arrow buffers)
  is the default: it does no per-record Python work and is ~9x faster, over TLS and SASL
  too. The librdkafka one below is kept for ``decoder=librdkafka``, for security settings
  only librdkafka knows (cipher suites, OAUTHBEARER, ...) and for machines without numba.
* librdkafka path: records are fetched and decoded by librdkafka in C; Python pulls the
  fields out of each message with C-level ``map`` calls and builds Arrow arrays from
  buffers (``b"".join`` + numpy offsets). The end of a range is detected from a record at
  or past ``until`` or from librdkafka's end-of-partition event, which also covers ranges
  that end in control records or aborted transactional data. The cyclic GC is paused
  while reading: every ``Message`` is a GC-tracked object, and collections triggered by
  hundreds of thousands of them cost more than the decoding itself.
* Executor Python workers are reused across tasks and micro-batches, so consumers (and
  the native reader's connections) are cached per configuration at module level.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, cast

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KTopicPartition
from pyspark.sql.datasource import InputPartition

from headwater.wire.client_properties import understood

from .cluster import report_data_loss
from .options import SourceOptions

log = logging.getLogger("pyspark_headwater")

CHUNK_ROWS = 65536  # rows per Arrow batch handed to Spark
CONSUME_BATCH = 1_000  # messages per consume() call: small lists stay in CPU cache
POLL_S = 0.5
NATIVE_FETCH_BYTES = 8 << 20  # per Fetch of the native reader (the broker's max: 100 MiB)
_INT32_MAX = 2**31 - 1

# Consumer settings for exact-range reads. Performance ones may be overridden by kafka.*
# options; the semantic ones below them may not.
_PERF_DEFAULTS = {
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 262_144,
    "fetch.queue.backoff.ms": 10,
    "max.partition.fetch.bytes": 4 << 20,
    # librdkafka keeps one fetch in flight per broker: a long poll left over from the
    # previous range (parked at the end of a partition) would delay the next range's
    # first fetch by up to this long on a reused consumer (measured: 0.3 s per task).
    "fetch.wait.max.ms": 10,
    "log.connection.close": False,  # idle cached consumers get disconnected: not news
}


@dataclass
class RangePartition(InputPartition):
    """One Spark task: offsets ``[from_offset, until_offset)`` of one topic-partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    def __repr__(self) -> str:
        return f"{self.topic}-{self.partition}[{self.from_offset},{self.until_offset})"


_consumers: dict[tuple[tuple[str, str], ...], Consumer] = {}


def consumer_config(opts: SourceOptions) -> dict[str, Any]:
    return {
        **_PERF_DEFAULTS,
        **opts.client_config,
        # Never joins or commits to this group: it only satisfies the client's API.
        "group.id": "pyspark-headwater-reader",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
        "isolation.level": opts.isolation_level,
    }


def _consumer(opts: SourceOptions) -> tuple[tuple[tuple[str, str], ...], Consumer]:
    conf = consumer_config(opts)
    key = tuple(sorted((k, str(v)) for k, v in conf.items()))
    consumer = _consumers.get(key)
    if consumer is None:
        consumer = _consumers[key] = Consumer(conf)
    return key, consumer


def _binary(items: list[bytes | None], n: int) -> pa.Array:
    """A ``binary`` array from Python bytes without per-item Arrow conversion."""
    nulls = items.count(None)
    if nulls == n:
        return pa.nulls(n, pa.binary())
    validity = None
    if nulls:
        mask = np.fromiter((x is not None for x in items), dtype=bool, count=n)
        validity = pa.py_buffer(np.packbits(mask, bitorder="little"))
        items = [b"" if x is None else x for x in items]
    present = cast("list[bytes]", items)  # no None left
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, present), dtype=np.int64, count=n), out=offsets[1:])
    if offsets[-1] > _INT32_MAX:  # only for >2 GiB per chunk: let Arrow pick its layout
        return pa.array(present, pa.large_binary()).cast(pa.binary())
    data = b"".join(present)
    return pa.Array.from_buffers(pa.binary(), n, [validity,
                                                  pa.py_buffer(offsets.astype(np.int32)),
                                                  pa.py_buffer(data)], null_count=nulls)


def _constant_string(value: str, n: int) -> pa.Array:
    raw = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(raw * n)])


_ts_type = itemgetter(0)
_ts_value = itemgetter(1)


class _BatchBuilder:
    """Accumulates message fields column by column, then emits one RecordBatch."""

    def __init__(self, schema: pa.Schema, topic: str, partition: int, headers: bool) -> None:
        self.schema = schema
        self.topic = topic
        self.partition = partition
        self.with_headers = headers
        self._reset()

    def _reset(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.stamps: list[tuple[int, int]] = []
        self.headers: list[object] = []
        self.segments: list[tuple[int, int] | np.ndarray] = []  # (first, count) or offsets
        self.rows = 0

    def add(self, msgs: list[Message]) -> None:
        n = len(msgs)
        if not n:
            return
        first, last = msgs[0].offset(), msgs[-1].offset()
        if last - first + 1 == n:  # no gaps (the usual case): offsets need no Python work
            self.segments.append((first, n))  # type: ignore[arg-type]  # offset() of a consumed message is an int
        else:  # gaps from compaction, control records or aborted transactions
            self.segments.append(np.fromiter(map(Message.offset, msgs), np.int64, count=n))
        self.keys += map(Message.key, msgs)
        self.values += map(Message.value, msgs)
        self.stamps += map(Message.timestamp, msgs)
        if self.with_headers:
            self.headers += map(Message.headers, msgs)
        self.rows += n

    def flush(self) -> pa.RecordBatch:
        n = self.rows
        offsets = np.concatenate([
            np.arange(s[0], s[0] + s[1], dtype=np.int64) if isinstance(s, tuple) else s
            for s in self.segments])
        millis = np.fromiter(map(_ts_value, self.stamps), np.int64, count=n)
        # librdkafka: 0 not available, 1 CreateTime, 2 LogAppendTime; Kafka ids: -1, 0, 1
        types = np.fromiter(map(_ts_type, self.stamps), np.int32, count=n) - 1
        columns = [
            _binary(self.keys, n),
            _binary(self.values, n),
            _constant_string(self.topic, n),
            pa.array(np.full(n, self.partition, dtype=np.int32)),
            pa.array(offsets),
            pa.array(millis * 1000, self.schema.field("timestamp").type),
            pa.array(types),
        ]
        if self.with_headers:
            columns.append(pa.array(self.headers, self.schema.field("headers").type))
        self._reset()
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


def _first_at_or_after(msgs: list[Message], until: int) -> int:
    """Index of the first message with offset >= until (messages are in offset order)."""
    lo, hi = 0, len(msgs)
    while lo < hi:
        mid = (lo + hi) // 2
        if msgs[mid].offset() < until:
            lo = mid + 1
        else:
            hi = mid
    return lo


def read_range(opts: SourceOptions, schema: pa.Schema, part: RangePartition,
               chunk_rows: int = CHUNK_ROWS) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``part`` as Arrow batches; exactly ``[from, until)``.

    The native reader (raw Fetch + compiled decoder, ``fetcher.py``) is used unless the
    ``decoder`` option asks for librdkafka, a security setting only librdkafka knows is
    given (``client_security.understood``), or numba is not installed."""
    if native_supported(opts):
        from . import fetcher

        fetch_bytes = int(dict(opts.kafka).get("max.partition.fetch.bytes", NATIVE_FETCH_BYTES))
        return fetcher.read_range(opts, schema, part, chunk_rows, fetch_bytes)
    return read_range_librdkafka(opts, schema, part, chunk_rows)


def native_supported(opts: SourceOptions) -> bool:
    if opts.decoder != "native":
        return False
    if not understood(dict(opts.kafka)):
        return False
    try:
        from . import decode  # noqa: F401 - numba present and importable
    except ImportError as exc:
        log.warning("numba is not available (%s): reading through librdkafka", exc)
        return False
    return True


def read_range_librdkafka(opts: SourceOptions, schema: pa.Schema, part: RangePartition,
                          chunk_rows: int = CHUNK_ROWS) -> Iterator[pa.RecordBatch]:
    """The librdkafka path of :func:`read_range`."""
    until = part.until_offset
    if until <= part.from_offset:
        return
    key, consumer = _consumer(opts)
    tp = KTopicPartition(part.topic, part.partition, part.from_offset)
    consumer.assign([tp])
    builder = _BatchBuilder(schema, part.topic, part.partition, opts.include_headers)
    pos = part.from_offset
    timeout_s = opts.poll_timeout_ms / 1000
    gc_enabled = gc.isenabled()
    gc.disable()
    try:
        deadline = time.monotonic() + timeout_s
        while pos < until:
            msgs = consumer.consume(CONSUME_BATCH, POLL_S)
            if not msgs:
                if time.monotonic() > deadline:
                    report_data_loss(
                        opts.fail_on_data_loss,
                        f"Timed out after kafkaConsumer.pollTimeoutMs={opts.poll_timeout_ms} "
                        f"reading offsets [{pos}, {until}) of {part.topic}-{part.partition}")
                    break
                continue
            deadline = time.monotonic() + timeout_s
            errors = list(map(Message.error, msgs))
            # any() and not list.count(None): KafkaError's == against None is broken in
            # confluent-kafka 2.16 (it leaves a TypeError set).
            if not any(errors):
                last = msgs[-1].offset()
                if msgs[0].offset() < pos:  # defensive: never emit an offset twice
                    msgs = msgs[_first_at_or_after(msgs, pos):]
                if last >= until:
                    msgs = msgs[:_first_at_or_after(msgs, until)]
                    pos = until
                else:
                    pos = max(pos, last + 1)
                builder.add(msgs)
            else:
                pos = _slow_path(opts, consumer, tp, msgs, errors, pos, until, builder)
            if builder.rows >= chunk_rows:
                yield builder.flush()
        if builder.rows:
            yield builder.flush()
    except KafkaException as exc:
        if exc.args and isinstance(exc.args[0], KafkaError) and exc.args[0].fatal():
            _consumers.pop(key, None)
        raise
    finally:
        if gc_enabled:
            gc.enable()
        try:
            consumer.unassign()
        except KafkaException:
            _consumers.pop(key, None)


def _slow_path(opts: SourceOptions, consumer: Consumer, tp: KTopicPartition,
               msgs: list[Message], errors: list[KafkaError | None], pos: int, until: int,
               builder: _BatchBuilder) -> int:
    """Messages mixed with events: end of partition, offset out of range, errors.
    Returns the new position (``until`` when the range is complete)."""
    run: list[Message] = []
    for m, err in zip(msgs, errors, strict=True):
        if err is None:
            off = m.offset()
            if off >= until:
                builder.add(run)
                return until
            if off >= pos:
                run.append(m)
                pos = off + 1
            continue
        builder.add(run)
        run = []
        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            if m.offset() >= until:
                return until
        elif code == KafkaError._AUTO_OFFSET_RESET:  # offset out of range
            low, high = consumer.get_watermark_offsets(tp, timeout=30)
            where = f"{tp.topic}-{tp.partition}"
            if pos < low:
                report_data_loss(opts.fail_on_data_loss,
                                 f"Cannot fetch offset {pos} of {where}: the earliest "
                                 f"available offset is {low}")
                if low >= until:
                    return until
                consumer.assign([KTopicPartition(tp.topic, tp.partition, low)])
                return low
            report_data_loss(opts.fail_on_data_loss,
                             f"Cannot fetch offset {pos} of {where}: the log ends at {high}")
            return until
        elif err.fatal():
            raise KafkaException(err)
        else:
            log.warning("consumer event while reading %s-%d: %s", tp.topic, tp.partition, err)
    builder.add(run)
    return pos
