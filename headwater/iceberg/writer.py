"""The table writer's loop: a read_committed client of its own broker that appends the
committed records of the partitions that broker leads to their topics' tables.

Every `poll_s` it reads the topics (Metadata) and their `headwater.iceberg.*` configs
(DescribeConfigs); a topic whose table is due (`headwater.iceberg.commit.interval.ms`
since its last commit here) gets one commit: from the table's current snapshot it takes
each partition's next offset (the log start for a partition never written), reads what
its broker leads from there up to the last stable offset as it was at the first read
(Fetch, read_committed: aborted transactions and markers dropped), and appends the rows
with the partitions' new next offsets in the same snapshot. A commit that finds the table
moved on (another writer, a partition's new leader) fails as a whole (the catalog's
compare-and-swap) and is done again from the table's new offsets: nothing is written
twice or skipped, whoever dies when.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException

from ..wire.client import RawClient
from .columns import RecordColumns
from .tables import offsets_property, table_offsets, topic_table

log = logging.getLogger("headwater.iceberg")

MODE = "headwater.iceberg.mode"
INTERVAL = "headwater.iceberg.commit.interval.ms"
SPEC = "headwater.iceberg.partition.spec"
TOPIC_RESOURCE = 2
READ_COMMITTED = 1
EARLIEST = -2
#: Commits a topic retries when other writers keep moving its table.
COMMIT_ATTEMPTS = 5


@dataclass(frozen=True)
class TopicTable:
    """A topic written as a table, and the partitions this writer's broker leads."""

    name: str
    mode: str
    interval_ms: int
    spec: str
    led: tuple[int, ...]


@dataclass
class WriterSettings:
    bootstrap: str  # HOST:PORT of this writer's broker
    node_id: int
    namespace: str = "db"
    poll_s: float = 1.0
    #: Record bytes one commit of one topic carries at most (the rest: the next commit).
    max_commit_bytes: int = 64 << 20
    fetch_bytes: int = 8 << 20


@dataclass
class TableWriter:
    settings: WriterSettings
    catalog: Catalog
    clock: Callable[[], float] = time.monotonic
    #: When each topic's table was last committed here (monotonic seconds).
    last_commit: dict[str, float] = field(default_factory=dict)
    _client: RawClient | None = None

    # ---- the wire ------------------------------------------------------------------
    def _request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        if self._client is None:
            host, _, port = self.settings.bootstrap.rpartition(":")
            self._client = RawClient(host, int(port), timeout=30)
        try:
            return self._client.request(api_key, version, body)
        except Exception:
            self.close()
            raise

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # ---- what to write -------------------------------------------------------------
    def topics(self) -> list[TopicTable]:
        """The topics with a table, with the partitions this writer's broker leads."""
        meta = self._request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
        led = {t.name: tuple(sorted(p.partition_index for p in t.partitions
                                    if p.leader_id == self.settings.node_id))
               for t in meta.topics if not int(t.error_code) and not t.is_internal}
        if not led:
            return []
        described = self._request(32, 4, {
            "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name,
                           "configuration_keys": [MODE, INTERVAL, SPEC]}
                          for name in sorted(led)],
            "include_synonyms": False, "include_documentation": False})
        out = []
        for result in described.results:
            if int(result.error_code):
                continue
            configs = {c.name: c.value for c in result.configs}
            mode = configs.get(MODE) or "disabled"
            if mode == "disabled":
                continue
            out.append(TopicTable(result.resource_name, mode,
                                  int(configs.get(INTERVAL) or 60000),
                                  configs.get(SPEC) or "hour(timestamp)",
                                  led[result.resource_name]))
        return out

    def step(self) -> int:
        """One pass: commit every table that is due. Returns the rows written."""
        rows = 0
        now = self.clock()
        for topic in self.topics():
            due = self.last_commit.get(topic.name, float("-inf")) + topic.interval_ms / 1000
            if topic.led and now >= due:
                rows += self.commit(topic)
                self.last_commit[topic.name] = now
        return rows

    def run(self, stop: Callable[[], bool]) -> None:
        failures = 0
        while not stop():
            try:
                self.step()
                failures = 0
            except Exception as exc:  # the broker restarting, the catalog away: again
                failures += 1
                if failures == 1 or failures % 60 == 0:
                    log.warning("table writer: %s: %s (trying again every %.0f s)",
                                type(exc).__name__, exc, self.settings.poll_s)
            time.sleep(self.settings.poll_s)
        self.close()

    # ---- one commit ----------------------------------------------------------------
    def commit(self, topic: TopicTable) -> int:
        """Append what `topic`'s led partitions hold past the table's offsets, with the
        new offsets, in one snapshot; done again from the table's new state when another
        writer committed first. Returns the rows written."""
        for _attempt in range(COMMIT_ATTEMPTS):
            table = topic_table(self.catalog, self.settings.namespace, topic.name,
                                topic.spec)
            base = table_offsets(table)
            starts = {p: base[p] for p in topic.led if p in base}
            missing = [p for p in topic.led if p not in base]
            if missing:
                starts.update(self._log_starts(topic.name, missing))
            columns = RecordColumns()
            ends = dict(starts)
            for p in topic.led:
                if columns.bytes >= self.settings.max_commit_bytes:
                    break
                ends[p] = self._read(topic.name, p, starts[p], columns)
            if ends == {p: base.get(p) for p in ends} or not len(columns):
                return 0  # nothing new (markers alone wait for records to follow)
            try:
                table.append(columns.table(table.schema().as_arrow()),
                             snapshot_properties=offsets_property({**base, **ends}))
            except CommitFailedException:
                continue  # the table moved on: read its offsets again
            log.info("table %s.%s: %d rows, offsets %s", self.settings.namespace,
                     topic.name, len(columns), ends)
            return len(columns)
        log.warning("table %s.%s: %d commits in a row found the table moved on; trying "
                    "at the next interval", self.settings.namespace, topic.name,
                    COMMIT_ATTEMPTS)
        return 0

    def _log_starts(self, topic: str, partitions: list[int]) -> dict[int, int]:
        resp = self._request(2, 7, {"replica_id": -1, "isolation_level": READ_COMMITTED,
                                    "topics": [{"name": topic, "partitions": [
                                        {"partition_index": p, "current_leader_epoch": -1,
                                         "timestamp": EARLIEST} for p in partitions]}]})
        return {p.partition_index: int(p.offset) for t in resp.topics for p in t.partitions
                if not int(p.error_code)}

    def _read(self, topic: str, partition: int, start: int, columns: RecordColumns) -> int:
        """Add the partition's committed records from `start` up to its last stable
        offset (as of the first read) to `columns`; the next offset to read."""
        offset, upto = start, None
        while columns.bytes < self.settings.max_commit_bytes:
            resp = self._request(1, 12, {
                "replica_id": -1, "max_wait": 0, "min_bytes": 0,
                "max_bytes": self.settings.fetch_bytes, "isolation_level": READ_COMMITTED,
                "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [{
                    "partition": partition, "current_leader_epoch": -1,
                    "fetch_offset": offset, "last_fetched_epoch": -1, "log_start_offset": -1,
                    "partition_max_bytes": self.settings.fetch_bytes}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            data = resp.responses[0].partitions[0]
            if int(data.error_code):
                log.info("table writer: %s-%d at %d: error %s", topic, partition, offset,
                         data.error_code)
                break
            if upto is None:
                upto = int(data.last_stable_offset)
            following = columns.add(partition, bytes(data.records or b""),
                                    [(int(a.producer_id), int(a.first_offset))
                                     for a in data.aborted_transactions or ()],
                                    offset, upto)
            if following <= offset or following >= upto:
                return following
            offset = following
        return offset
