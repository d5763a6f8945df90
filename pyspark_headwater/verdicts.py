"""Verdicts: how a pipeline releases or rejects single records of a share-group source.

The runner acknowledges a batch only after its sink commit, but it never sees what the
pipeline did with each row. So the pipeline tells it through a topic: with the source
option ``share.verdictTopic`` set, rows made by :func:`verdicts` and written to that
topic by the query's own sink (with ``exactlyOnce=true`` in the same transactions as the
rest of the batch's output) name records to RELEASE (delivered again, deliveryCount + 1)
or REJECT (archived, or sent to the group's dead-letter topic). When the runner settles
a batch, it reads the verdict topic (read_committed) and acknowledges those records with
their verdict, the others with ACCEPT.

A verdict is ``{"t": topic, "p": partition, "o": offset, "d": deliveryCount, "a":
"release"|"reject"}``; it applies only to that delivery of that record, so an old
verdict read again (the runner reads the topic from its start when it starts) never
touches a later delivery. Keep the verdict topic's retention short.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any

from pyspark.sql.pandas.types import to_arrow_schema

from .cluster import Cluster
from .executor import RangePartition, read_range
from .options import SourceOptions, TopicPartition
from .schema import source_schema
from .share_client import REJECT, RELEASE

log = logging.getLogger("pyspark_headwater")

ACTIONS = {"release": RELEASE, "reject": REJECT}
Key = tuple[str, int, int, int]  # topic, partition, offset, delivery count


def verdicts(df: Any, verdict_topic: str, action: str = "reject") -> Any:
    """Rows for the sink that release or reject the source records in ``df`` (which has
    the share source's ``topic``, ``partition``, ``offset`` and ``deliveryCount``):
    columns ``topic`` (the verdict topic), ``key`` (null) and ``value`` (the verdict)."""
    from pyspark.sql import functions as F

    if action not in ACTIONS:
        raise ValueError(f"action must be one of {', '.join(ACTIONS)}, got {action!r}")
    return df.select(
        F.lit(verdict_topic).alias("topic"), F.lit(None).cast("binary").alias("key"),
        F.to_json(F.struct(F.col("topic").alias("t"), F.col("partition").alias("p"),
                           F.col("offset").alias("o"), F.col("deliveryCount").alias("d"),
                           F.lit(action).alias("a"))).alias("value"))


class VerdictReader:
    """The runner's reader of the verdict topic: exact ranges up to the last stable
    offset (ListOffsets under read_committed), read with the source's own reader, so a
    read never waits for records that are not there."""

    def __init__(self, read: SourceOptions, topic: str) -> None:
        self.opts = replace(read, strategy="subscribe", topics=(topic,), pattern="",
                            assigned=(), isolation_level="read_committed",
                            include_headers=False, min_partitions=None,
                            max_records_per_partition=None)
        self.topic = topic
        self.cluster = Cluster(self.opts)
        self.schema = to_arrow_schema(source_schema(False), timezone="UTC")
        self.positions: dict[TopicPartition, int] = {}
        self.pending: dict[Key, int] = {}

    def poll(self) -> dict[Key, int]:
        """Read what was committed since the last call; returns all verdicts so far."""
        tps = self.cluster.partitions()
        new = [tp for tp in tps if tp not in self.positions]
        if new:
            self.positions.update(self.cluster.earliest(new))
        if not tps:
            return self.pending
        for tp, end in self.cluster.latest(tps).items():
            start = self.positions[tp]
            if end <= start:
                continue
            for batch in read_range(self.opts, self.schema,
                                    RangePartition(tp[0], tp[1], start, end)):
                for raw in batch.column(1).to_pylist():
                    self._add(raw)
            self.positions[tp] = end
        return self.pending

    def _add(self, raw: bytes | None) -> None:
        try:
            v = json.loads(raw or b"")
            self.pending[(v["t"], int(v["p"]), int(v["o"]), int(v["d"]))] = ACTIONS[v["a"]]
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring a malformed verdict in %s: %r", self.topic, raw[:200]
                        if raw else raw)

    def close(self) -> None:
        self.cluster.close()
