"""The share-group source: ``readStream.format("headwater")`` with ``kafka.share.group.id``.

Theory of operation. The stream *runner* (one long-lived process per query) is a member
of the share group (``share_client.ShareMember``). For each micro-batch it acquires
records with ShareFetch and writes only their offset ranges and delivery counts into
the batch's offset descriptor (Spark logs it before the batch runs)::

    {"v": 1, "seq": 42, "member": "<id>", "acquired": {"orders": {"0": [[100, 149, 1]]}},
     "done": {"orders": {"0": [[40, 59]]}}}

Executors re-read exactly those offsets with the partitioned source's reader (by
offset, in parallel, deterministic for a replay) and keep only acquired offsets, adding
``deliveryCount``. The runner renews the records' locks while the batch runs (RENEW,
KIP-1222) and acknowledges them (ACCEPT) only once the batch's sink commit is done:
``latestOffset(start)`` for batch N+1 comes after batch N's sink commit, and ``start``
is batch N's descriptor. So nothing is acknowledged whose output is not committed:
**at-least-once**.

``done`` is what makes replays and redeliveries meet exactly once. It holds ranges whose
output is committed but whose acceptance the broker has not confirmed: the descriptor of
a previous runner (a restarted query replays its last batch from the log by offset; its
acquisitions died with the old member and the broker will redeliver them) and ranges
whose ACCEPT failed (a lock that expired). When the broker redelivers records in
``done``, the runner accepts them at once and emits nothing. It travels in every
descriptor, so it survives any number of restarts. With the sink's ``exactlyOnce=true``
(which skips a replayed batch's tasks that already committed) every record is in the
output exactly once, for one query per share group: a redelivery that goes to another
member of the group is that member's to process.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import IntegerType, StructField, StructType

from .executor import RangePartition, read_range
from .options import HeadwaterOptionError, TopicPartition
from .planning import OffsetRange, split_ranges
from .schema import source_schema
from .share_client import ACCEPT, Range, ShareGroupError, ShareMember, _subtract
from .share_options import SHARE_GROUP_OPTION, ShareOptions

log = logging.getLogger("pyspark_headwater")

DONE_RETENTION_S = 600.0  # a redelivery comes within a lock duration or a session timeout
ACQUIRE_ROUNDS = 64  # ShareFetch requests per trigger at most
RECOVERY_POLL_S = 0.2  # between empty fetches while recovering from a disruption
DEFAULT_SESSION_MS = 45_000  # Kafka's group.share.session.timeout.ms
SPAN_GAP = 2048  # offsets skipped inside one executor read rather than cut into two


def share_schema(include_headers: bool) -> StructType:
    return StructType(source_schema(include_headers).fields
                      + [StructField("deliveryCount", IntegerType())])


@dataclass
class Descriptor:
    """One micro-batch's offset JSON (see the module docstring)."""

    seq: int = 0
    member: str | None = None
    acquired: dict[TopicPartition, list[Range]] = field(default_factory=dict)
    done: dict[TopicPartition, list[tuple[int, int]]] = field(default_factory=dict)

    @classmethod
    def parse(cls, value: Mapping[str, Any] | str) -> Descriptor:
        v = json.loads(value) if isinstance(value, str) else value
        if v.get("v") != 1:
            raise HeadwaterOptionError("The checkpoint's offsets were not written by the "
                                       "share-group source (or by a newer version of it)")
        return cls(int(v["seq"]), v.get("member"),
                   {(t, int(p)): [tuple(r) for r in rs] for t, ps in v["acquired"].items()
                    for p, rs in ps.items()},
                   {(t, int(p)): [tuple(r) for r in rs] for t, ps in v.get("done", {}).items()
                    for p, rs in ps.items()})

    def json(self) -> dict[str, Any]:
        def nest(m: Mapping[TopicPartition, list[Any]]) -> dict[str, dict[str, list]]:
            out: dict[str, dict[str, list]] = {}
            for (t, p) in sorted(m):
                if m[(t, p)]:
                    out.setdefault(t, {})[str(p)] = [list(r) for r in sorted(m[(t, p)])]
            return out

        return {"v": 1, "seq": self.seq, "member": self.member,
                "acquired": nest(self.acquired), "done": nest(self.done)}


def compact(ranges: list[Range]) -> list[Range]:
    """Adjacent ranges with the same delivery count merged (a descriptor stays small)."""
    out: list[Range] = []
    for first, last, dc in sorted(ranges):
        if out and out[-1][1] + 1 == first and out[-1][2] == dc:
            out[-1] = (out[-1][0], last, dc)
        else:
            out.append((first, last, dc))
    return out


def split_done(ranges: list[Range], done: list[tuple[int, int]]
               ) -> tuple[list[Range], list[Range]]:
    """(parts of ``ranges`` outside ``done``, parts inside it)."""
    inside: list[Range] = []
    for first, last, dc in ranges:
        for lo, hi in done:
            a, b = max(first, lo), min(last, hi)
            if a <= b:
                inside.append((a, b, dc))
    return _subtract(ranges, inside), inside


def spans_of(topic: str, partition: int, ranges: list[Range]) -> list[OffsetRange]:
    """The offset spans executors read for one partition's acquired ranges: one span,
    cut where a gap of more than SPAN_GAP offsets (records other members hold) would
    be read for nothing."""
    spans: list[OffsetRange] = []
    first = last = None
    for f, l_, _ in sorted(ranges):
        if first is not None and last is not None and f - last - 1 <= SPAN_GAP:
            last = max(last, l_)
            continue
        if first is not None and last is not None:
            spans.append(OffsetRange(topic, partition, first, last + 1))
        first, last = f, l_
    if first is not None and last is not None:
        spans.append(OffsetRange(topic, partition, first, last + 1))
    return spans


@dataclass
class ShareRangePartition(InputPartition):
    """One Spark task: acquired ranges within ``[from_offset, until_offset)`` of one
    topic-partition. ``bump`` is added to the delivery counts: 1 when a restarted query
    replays a batch of its previous run (the records' second delivery)."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int
    ranges: list[Range]
    bump: int = 0


def read_share_range(opts: ShareOptions, schema: pa.Schema, part: ShareRangePartition
                     ) -> Iterator[pa.RecordBatch]:
    """The acquired records of ``part`` with their delivery counts, read by offset."""
    base = pa.schema(list(schema)[:-1])
    firsts = np.array([r[0] for r in part.ranges], np.int64)
    lasts = np.array([r[1] for r in part.ranges], np.int64)
    counts = np.array([r[2] + part.bump for r in part.ranges], np.int32)
    span = RangePartition(part.topic, part.partition, part.from_offset, part.until_offset)
    for batch in read_range(opts.read, base, span):
        offsets = batch.column(4).to_numpy()
        idx = np.searchsorted(firsts, offsets, side="right") - 1
        keep = (idx >= 0) & (offsets <= lasts[np.maximum(idx, 0)])
        if not keep.all():
            batch = batch.filter(pa.array(keep))
            idx = idx[keep]
        if batch.num_rows:
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array(counts[idx])], schema=schema)


class HeadwaterShareStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Runner state: the share member, what was settled, the ``done`` ranges."""

    def __init__(self, opts: ShareOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._arrow: pa.Schema | None = None
        self._member: ShareMember | None = None
        self._settled = -1
        self._loaded = False
        self._available_now = False
        self._verdict_reader: Any = None
        self._done: dict[TopicPartition, list[tuple[int, int, float]]] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_member"] = None  # a live member must not travel to executors
        state["_verdict_reader"] = None
        state["_arrow"] = None
        return state

    # ---- runner ----------------------------------------------------------------------
    @property
    def member(self) -> ShareMember:
        if self._member is None:
            self._set_group_configs()
            member = ShareMember(self.opts.read.bootstrap, self.opts.group,
                                 self.opts.read.topics, security=self.opts.read.security)
            try:
                member.join()
            except OSError as exc:  # the broker is away: fetch() rejoins, with retries
                log.warning("joining share group %s failed (%s): retrying on fetch",
                            self.opts.group, exc)
            except ShareGroupError as exc:
                member.close(release=False)
                if "INCONSISTENT_GROUP_PROTOCOL" in str(exc).upper() or \
                        "GROUP_ID_NOT_FOUND" in str(exc).upper():
                    raise HeadwaterOptionError(
                        f"Option '{SHARE_GROUP_OPTION}': group '{self.opts.group}' exists "
                        "and is not a share group (a consumer group of that name?): "
                        f"{exc}") from None
                raise
            self._member = member
        return self._member

    def _set_group_configs(self) -> None:
        if not self.opts.group_configs:
            return
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import (
            AdminClient,
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
        )

        admin = AdminClient(self.opts.read.client_config)
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in self.opts.group_configs]
        try:
            for f in admin.incremental_alter_configs(
                    [ConfigResource("group", self.opts.group,
                                    incremental_configs=entries)]).values():
                f.result(30)
        except KafkaException as exc:
            raise HeadwaterOptionError(
                f"Setting the share group's configs "
                f"({', '.join(k for k, _ in self.opts.group_configs)}) on "
                f"'{self.opts.group}' failed: {exc.args[0]}") from None

    def initialOffset(self) -> dict:
        return Descriptor().json()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.opts.max_records_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        """Nothing to snapshot: an AvailableNow run stops at the first trigger that
        acquires nothing (unless the member lost a broker or its membership within a
        session timeout and a lock duration: records it held may still come back), and
        then leaves the group (Spark's ``stop()`` is not reliably called)."""
        self._available_now = True

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        desc = Descriptor.parse(start)
        member = self.member
        self._settle(desc)
        # ReadAllAvailable (Trigger.Once, ...) still takes one micro-batch's worth: a
        # queue has no "all".
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else \
            self.opts.max_records_per_trigger
        emit = self._acquire(max_rows)
        while not emit and self._available_now and self._recovering():
            # Nothing now, but the member lost a broker or its membership lately: records
            # it held before may still come back (their locks expire, the group
            # rebalances); an AvailableNow run that stopped here would not drain.
            time.sleep(RECOVERY_POLL_S)
            emit = self._acquire(max_rows)
        if not emit:
            if self._available_now:  # the run ends here: leave, so others get our share
                self.stop()
            return start
        if self.opts.ack_mode == "onRead":  # at-most-once: accepted before processing
            member.acknowledge({tp: [(f, last) for f, last, _ in rs]
                                for tp, rs in emit.items()}, ACCEPT)
        return Descriptor(desc.seq + 1, member.member_id, emit, self._done_json()).json()

    def _recovering(self) -> bool:
        """Within a session timeout and a lock duration of the member's last disruption
        (the group's own `share.session.timeout.ms` if the query set one, else Kafka's
        default 45 s)."""
        try:
            session_ms = int(dict(self.opts.group_configs)["share.session.timeout.ms"])
        except (KeyError, ValueError):
            session_ms = DEFAULT_SESSION_MS
        window_s = (session_ms + self.member.lock_ms) / 1000
        return time.monotonic() - self.member.disrupted_at < window_s

    def _acquire(self, max_rows: int) -> dict[TopicPartition, list[Range]]:
        """Fetch until ``max_rows`` are acquired or a fetch brings nothing; redeliveries
        of ``done`` ranges are accepted at once and not emitted."""
        member = self.member
        emit: dict[TopicPartition, list[Range]] = {}
        count = 0
        wait = self.opts.fetch_wait_ms
        for _ in range(ACQUIRE_ROUNDS):
            got = member.fetch(max_rows - count, wait)
            if not got.ranges:
                break
            wait = 0
            settle: dict[TopicPartition, list[Range]] = {}
            for tp, ranges in got.ranges.items():
                done = [(lo, hi) for lo, hi, _ in self._done.get(tp, [])]
                fresh, redelivered = split_done(ranges, done) if done else (ranges, [])
                if redelivered:
                    settle[tp] = redelivered
                if fresh:
                    emit.setdefault(tp, []).extend(fresh)
                    count += sum(last - first + 1 for first, last, _ in fresh)
            if settle:
                failed = member.acknowledge(
                    {tp: [(f, last) for f, last, _ in rs] for tp, rs in settle.items()},
                    ACCEPT)
                for tp, rs in settle.items():
                    if tp not in failed:
                        self._forget_done(tp, rs)
                log.info("share source: %d redelivered record(s) already in the output "
                         "accepted without emitting them",
                         sum(r[1] - r[0] + 1 for rs in settle.values() for r in rs))
            if count >= max_rows:
                break
        return {tp: compact(rs) for tp, rs in emit.items()}

    def _settle(self, desc: Descriptor) -> None:
        """``desc``'s batch is through the sink: accept its records (or, when another
        run acquired them, remember them as done until the broker redelivers them)."""
        if not self._loaded:
            now = time.monotonic()
            for tp, done_ranges in desc.done.items():
                self._done.setdefault(tp, []).extend((lo, hi, now) for lo, hi in done_ranges)
            self._loaded = True
        if desc.seq <= self._settled:
            return
        if desc.member == self.member.member_id:
            accept, special = self._verdicts(desc.acquired)
            failed: set[TopicPartition] = set()
            if self.opts.ack_mode == "afterCommit":
                failed = self.member.acknowledge(
                    {tp: [(f, last) for f, last, _ in rs] for tp, rs in accept.items()},
                    ACCEPT)
                for ack_type, ranges in special.items():
                    self.member.acknowledge(ranges, ack_type)
            # A lost lock: the records come back; what the pipeline released or rejected
            # is not "done" (it is emitted again, for a new verdict).
            late = {tp: rs for tp, rs in accept.items() if tp in failed}
        else:
            late = desc.acquired
        now = time.monotonic()
        for tp, late_ranges in late.items():
            self._done.setdefault(tp, []).extend((f, last, now) for f, last, _ in late_ranges)
        self._settled = desc.seq
        self._prune_done()

    def _verdicts(self, acquired: dict[TopicPartition, list[Range]]
                  ) -> tuple[dict[TopicPartition, list[Range]],
                             dict[int, dict[TopicPartition, list[tuple[int, int]]]]]:
        """Split a settled batch into the ranges to accept and the records the pipeline
        released or rejected (``share.verdictTopic``)."""
        if self.opts.verdict_topic is None:
            return acquired, {}
        if self._verdict_reader is None:
            from .verdicts import VerdictReader

            self._verdict_reader = VerdictReader(self.opts.read, self.opts.verdict_topic)
        pending = self._verdict_reader.poll()
        accept = dict(acquired)
        special: dict[int, dict[TopicPartition, list[tuple[int, int]]]] = {}
        for key in list(pending):
            topic, part, offset, count = key
            rs = accept.get((topic, part))
            if not rs or not any(f <= offset <= last and dc == count for f, last, dc in rs):
                continue
            ack_type = pending.pop(key)
            special.setdefault(ack_type, {}).setdefault((topic, part), []).append(
                (offset, offset))
            accept[(topic, part)] = _subtract(rs, [(offset, offset)])
        return accept, special

    def _forget_done(self, tp: TopicPartition, ranges: list[Range]) -> None:
        kept = _subtract([(lo, hi, int(t * 1000)) for lo, hi, t in self._done.get(tp, [])],
                         ranges)
        if kept:
            self._done[tp] = [(lo, hi, t / 1000) for lo, hi, t in kept]
        else:
            self._done.pop(tp, None)

    def _prune_done(self) -> None:
        cutoff = time.monotonic() - DONE_RETENTION_S
        for tp in list(self._done):
            kept = [r for r in self._done[tp] if r[2] >= cutoff]
            if kept:
                self._done[tp] = kept
            else:
                del self._done[tp]

    def _done_json(self) -> dict[TopicPartition, list[tuple[int, int]]]:
        return {tp: [(lo, hi) for lo, hi, _ in rs] for tp, rs in self._done.items()}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        desc = Descriptor.parse(end)
        own = self._member is not None and desc.member == self._member.member_id
        bump = 0 if own else 1  # a replay of the previous run's batch: a second delivery
        spans = [span for (t, p), rs in sorted(desc.acquired.items())
                 for span in spans_of(t, p, rs)]
        pieces = split_ranges(spans, self.opts.read.min_partitions,
                              self.opts.read.max_records_per_partition)
        out: list[InputPartition] = []
        for piece in pieces:
            rs = [(max(f, piece.from_offset), min(last, piece.until_offset - 1), dc)
                  for f, last, dc in desc.acquired[(piece.topic, piece.partition)]
                  if f < piece.until_offset and last >= piece.from_offset]
            if rs:
                out.append(ShareRangePartition(piece.topic, piece.partition,
                                               piece.from_offset, piece.until_offset, rs,
                                               bump))
        return out

    def commit(self, end: dict) -> None:
        if self._member is not None:
            self._settle(Descriptor.parse(end))

    def stop(self) -> None:
        if self._member is not None:
            self._member.close(release=True)
            self._member = None

    # ---- executors ---------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ShareRangePartition):
            return iter(())
        if self._arrow is None:
            self._arrow = to_arrow_schema(self.schema, timezone="UTC")
        return read_share_range(self.opts, self._arrow, partition)
