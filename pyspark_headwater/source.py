"""Batch and streaming readers.

Which process runs what (PySpark 4.3, measured in the research note):

* ``HeadwaterBatchReader.partitions()`` runs in a short-lived planner; it resolves the
  starting/ending offsets against the broker and cuts them into ``RangePartition``s.
* ``HeadwaterStreamReader`` lives twice. The *runner* (one long-lived process per query)
  gets ``initialOffset``/``latestOffset``/``partitions``/``commit`` and keeps state:
  the AvailableNow target, the trigger-delay clock, the last group commit. A *pickled
  planner copy* is what executors call ``read()`` on, so ``read()`` may use nothing but
  the options and the partition it is given.

Offsets are Spark-Kafka's JSON (``{"topic": {"0": 42}}``, next offset to read), so a
checkpoint's offsets can be pasted into ``startingOffsets``. Spark's checkpoint is the
source of truth; the optional commit to ``kafka.group.id`` is advisory, for lag
monitoring. ``commit(end)`` comes one batch late and never for the last batch, so the
same commit is also made from ``latestOffset(start)``: the engine calls it after the
previous batch's sink commit, on every trigger, including the final one of an
AvailableNow run (where ``start`` is the end of the last batch).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from .cluster import Cluster, report_data_loss
from .executor import RangePartition, read_range
from .options import (
    EARLIEST,
    LATEST,
    HeadwaterOptionError,
    OffsetSpec,
    SourceOptions,
    TopicPartition,
    offsets_from_json,
    offsets_json,
)
from .planning import OffsetRange, pending, rate_limit, split_ranges
from .table_history import (
    MARKER,
    TablePartition,
    TableSource,
    read_table,
    split_marker,
    table_partitions,
    table_start,
)

log = logging.getLogger("pyspark_headwater")


def _tp(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


class _ReaderBase:
    """State shared by the batch and stream readers: options, schema, a lazy cluster
    client that is never pickled, and the executor-side ``read()``."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._cluster: Cluster | None = None
        self._arrow: pa.Schema | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_cluster"] = None  # a live client must not travel to executors
        state["_arrow"] = None
        return state

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.opts)
        return self._cluster

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if self._arrow is None:
            self._arrow = to_arrow_schema(self.schema, timezone="UTC")
        if isinstance(partition, TablePartition):
            return read_table(TableSource.of(self.opts), self._arrow, partition)
        if not isinstance(partition, RangePartition):
            # Spark substitutes one placeholder partition when planning returned none.
            return iter(())
        return read_range(self.opts, self._arrow, partition)

    # ---- historyFromTable (driver side) --------------------------------------------------
    def _table_start(self, tps: list[TopicPartition]
                     ) -> tuple[dict[str, int], dict[TopicPartition, int]]:
        """The tables' snapshots and where the topic goes on from: each partition at the
        offset its table ends at, or at its start when the table holds none of it."""
        snapshots, ends = table_start(TableSource.of(self.opts), sorted({t for t, _ in tps}))
        start = {tp: off for tp, off in ends.items() if tp in tps}
        start.update(self.cluster.earliest([tp for tp in tps if tp not in start]))
        return snapshots, start

    def _table_partitions(self, snapshots: dict[str, int]) -> list[InputPartition]:
        if not snapshots:
            return []
        types = self.cluster.timestamp_types(sorted(snapshots))
        return list(table_partitions(TableSource.of(self.opts), snapshots, types,
                                     self.opts.min_partitions or 1))

    # ---- offset resolution (driver side) -------------------------------------------------
    def _resolve_start(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """startingOffsets / startingTimestamp / startingOffsetsByTimestamp -> offsets."""
        spec = self.opts.starting
        if not tps:
            return {}
        if spec.kind == "earliest":
            return self.cluster.earliest(tps)
        if spec.kind == "latest":
            return self.cluster.latest(tps)
        if spec.kind == "offsets":
            return self._specific(spec, tps, "startingOffsets", start=True)
        stamps = self._stamps(spec, tps, "startingOffsetsByTimestamp")
        found = self.cluster.for_timestamps(stamps)
        missing = sorted(tp for tp, off in found.items() if off < 0)
        if missing:
            if self.opts.no_match_strategy == "error":
                raise HeadwaterOptionError(
                    "No offset matched the starting timestamp for "
                    + ", ".join(f"{_tp(tp)} (timestamp {stamps[tp]})" for tp in missing)
                    + ". Set 'startingOffsetsByTimestampStrategy' to 'latest' to start "
                    "those partitions at the latest offset instead.")
            found.update(self.cluster.latest(missing))
        return found

    def _resolve_end(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """endingOffsets / endingTimestamp / endingOffsetsByTimestamp -> offsets (batch)."""
        spec = self.opts.ending
        if not tps:
            return {}
        if spec.kind == "latest":
            return self.cluster.latest(tps)
        if spec.kind == "offsets":
            return self._specific(spec, tps, "endingOffsets", start=False)
        found = self.cluster.for_timestamps(self._stamps(spec, tps, "endingOffsetsByTimestamp"))
        missing = [tp for tp, off in found.items() if off < 0]
        if missing:  # no record at or after the timestamp: read to the end, as Spark does
            found.update(self.cluster.latest(missing))
        return found

    def _stamps(self, spec: OffsetSpec, tps: list[TopicPartition], name: str
                ) -> dict[TopicPartition, int]:
        if spec.kind == "timestamp":
            return dict.fromkeys(tps, spec.timestamp)
        self._check_covers(spec, tps, name)
        return {tp: spec.offsets[tp] for tp in tps}

    def _check_covers(self, spec: OffsetSpec, tps: list[TopicPartition], name: str) -> None:
        if set(spec.offsets) != set(tps):
            raise HeadwaterOptionError(
                f"Option '{name}' contains specific offsets, so it must name every "
                f"partition of the source: expected [{', '.join(map(_tp, tps))}], got "
                f"[{', '.join(map(_tp, sorted(spec.offsets)))}]")

    def _specific(self, spec: OffsetSpec, tps: list[TopicPartition], name: str,
                  start: bool) -> dict[TopicPartition, int]:
        self._check_covers(spec, tps, name)
        earliest = self.cluster.earliest(tps)
        latest = self.cluster.latest(tps)
        out = {}
        for tp in tps:
            off = spec.offsets[tp]
            if off == EARLIEST:
                off = earliest[tp]
            elif off == LATEST:
                off = latest[tp]
            elif off < earliest[tp]:
                report_data_loss(self.opts.fail_on_data_loss,
                                 f"{name} for {_tp(tp)} was {off} but the earliest available "
                                 f"offset is {earliest[tp]}.")
                off = earliest[tp]
            elif off > latest[tp]:
                if not start:
                    raise HeadwaterOptionError(
                        f"Option '{name}' for {_tp(tp)} is {off}, after the end of the "
                        f"partition ({latest[tp]})")
                report_data_loss(self.opts.fail_on_data_loss,
                                 f"{name} for {_tp(tp)} was {off} but the latest offset is "
                                 f"{latest[tp]}.")
                off = latest[tp]
            out[tp] = off
        return out

    def _input_partitions(self, ranges: list[OffsetRange]) -> list[InputPartition]:
        pieces = split_ranges(ranges, self.opts.min_partitions,
                              self.opts.max_records_per_partition)
        return [RangePartition(r.topic, r.partition, r.from_offset, r.until_offset)
                for r in pieces]


class HeadwaterBatchReader(_ReaderBase, DataSourceReader):
    """``spark.read.format("headwater")``: one fixed range per partition."""

    def partitions(self) -> Sequence[InputPartition]:
        tps = self.cluster.partitions()
        history: list[InputPartition] = []
        if self.opts.history_table is not None:
            snapshots, start = self._table_start(tps)
            history = self._table_partitions(snapshots)
        else:
            start = self._resolve_start(tps)
        end = self._resolve_end(tps)
        ranges = []
        for tp in tps:
            if end[tp] < start[tp]:
                raise HeadwaterOptionError(
                    f"For {_tp(tp)} the starting offset {start[tp]} is after the ending "
                    f"offset {end[tp]}: check the starting/ending options")
            ranges.append(OffsetRange(tp[0], tp[1], start[tp], end[tp]))
        self.cluster.close()
        return history + self._input_partitions(ranges)


class HeadwaterStreamReader(_ReaderBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("headwater")`` with admission control and AvailableNow."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        super().__init__(opts, schema)
        self._initial: dict[str, dict[str, int]] | None = None
        self._target: dict[TopicPartition, int] | None = None  # AvailableNow end
        self._latest: dict[TopicPartition, int] | None = None
        self._last_trigger_ms = 0.0  # as Spark: the first trigger is never delayed
        self._committed: dict[TopicPartition, int] | None = None

    # ---- runner ---------------------------------------------------------------------
    def initialOffset(self) -> dict:
        # Called twice at query start: resolve once so both calls agree.
        if self._initial is None:
            tps = self.cluster.partitions()
            if self.opts.history_table is None:
                self._initial = offsets_json(self._resolve_start(tps))
            else:  # the first batch reads the snapshots named under MARKER
                snapshots, start = self._table_start(tps)
                self._initial = {**offsets_json(start), MARKER: snapshots}
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.cluster.latest(self.cluster.partitions())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        plain, snapshots = split_marker(start)
        start_map = offsets_from_json(plain)
        self._commit_group(start_map)  # everything before `start` is through the sink
        if self._target is not None:
            latest = dict(self._target)
        else:
            latest = self.cluster.latest(self.cluster.partitions())
        self._latest = latest
        base = {tp: off for tp, off in start_map.items() if tp in latest}
        new = [tp for tp in latest if tp not in start_map]
        if new:
            base.update(self.cluster.earliest(new))
        end = latest
        if not isinstance(limit, ReadAllAvailable):
            min_rows = (limit.min_rows if isinstance(limit, ReadMinRows)
                        else self.opts.min_offsets_per_trigger)
            if min_rows is not None and self._delay_batch(min_rows, base, latest):
                return start
            if isinstance(limit, ReadMaxRows):
                end = rate_limit(limit.max_rows, base, latest)
        if end == start_map and snapshots is None:
            return start  # unchanged: the engine compares offsets as JSON text
        return offsets_json(end)  # after a MARKER: a batch, if only of the table's rows

    def _delay_batch(self, min_rows: int, base: Mapping[TopicPartition, int],
                     latest: Mapping[TopicPartition, int]) -> bool:
        """minOffsetsPerTrigger + maxTriggerDelay, as Spark's ``delayBatch``: wait for
        enough new records unless the delay has passed; never under AvailableNow."""
        if self._target is not None:
            return False
        now = time.time() * 1000
        if now - self._last_trigger_ms >= self.opts.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return False
        if pending(base, latest) < min_rows:
            return True
        self._last_trigger_ms = now
        return False

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else offsets_json(self._latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        plain, snapshots = split_marker(start)
        s, e = offsets_from_json(plain), offsets_from_json(end)
        fail = self.opts.fail_on_data_loss
        deleted = sorted(set(s) - set(e))
        if deleted:
            report_data_loss(fail, f"Partitions {', '.join(map(_tp, deleted))} have been "
                             "deleted.")
        new = [tp for tp in e if tp not in s]
        earliest = self.cluster.earliest(new) if new else {}
        for tp, off in sorted(earliest.items()):
            if off != 0:
                report_data_loss(fail, f"Added partition {_tp(tp)} starts from {off} instead "
                                 "of 0. Some data may have been missed.")
        ranges = []
        for tp, until in sorted(e.items()):
            frm = s[tp] if tp in s else earliest[tp]
            if until < frm:
                report_data_loss(fail, f"Partition {_tp(tp)}'s offset was changed from {frm} "
                                 f"to {until}, some data may have been missed.")
                continue
            ranges.append(OffsetRange(tp[0], tp[1], frm, until))
        history = self._table_partitions(snapshots) if snapshots else []
        return history + self._input_partitions(ranges)

    def commit(self, end: dict) -> None:
        self._commit_group(offsets_from_json(split_marker(end)[0]))

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.close()

    def _commit_group(self, offsets: dict[TopicPartition, int]) -> None:
        if not self.opts.commit_offsets or not offsets or offsets == self._committed:
            return
        assert self.opts.group_id is not None
        if self.cluster.commit_group(self.opts.group_id, offsets):
            self._committed = dict(offsets)
