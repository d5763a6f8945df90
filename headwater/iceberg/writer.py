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
twice or skipped, whoever dies when. After each commit the partitions' new offsets go to
the table's progress group (`progress.py`), where operators' tools show the table's lag.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException

from ..wire.client import RawClient
from . import progress
from .columns import RecordColumns
from .tables import key_value_schema, offsets_property, table_offsets, topic_table
from .upsert import commit_upsert
from .value_schema import DLQ_SUFFIX, ValueSchema, ValueSchemaError, dead_letter_schema, split

log = logging.getLogger("headwater.iceberg")

KEY_VALUE_ARROW = key_value_schema().as_arrow()

MODE = "headwater.iceberg.mode"
INTERVAL = "headwater.iceberg.commit.interval.ms"
SPEC = "headwater.iceberg.partition.spec"
CLEANUP = "cleanup.policy"
VALUE_SCHEMA = "headwater.iceberg.value.schema"
VALUE_ENCODING = "headwater.iceberg.value.encoding"
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
    #: `cleanup.policy` has `compact`: the table keeps each key's latest value.
    compacted: bool = False
    #: `headwater.iceberg.value.schema` (mode value_schema): the value's Avro schema.
    value_schema: str = ""
    #: `headwater.iceberg.value.encoding`: json, avro or confluent-avro.
    value_encoding: str = "json"


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
    wall_clock: Callable[[], float] = time.time
    #: When each topic's table was last committed here (monotonic seconds).
    last_commit: dict[str, float] = field(default_factory=dict)
    #: The offsets last committed to each topic's progress group (`progress.py`).
    reported: dict[str, dict[int, int]] = field(default_factory=dict)
    _client: RawClient | None = None
    #: Connections to the progress groups' coordinators (HOST:PORT), other brokers of a
    #: cluster; one node's is its own.
    _coordinators: dict[str, RawClient] = field(default_factory=dict)

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
        for client in self._coordinators.values():
            client.close()
        self._coordinators.clear()

    def _coordinator_request(self, group: str, api_key: int, version: int,
                             body: dict[str, Any]) -> Any:
        """A request to `group`'s coordinator (FindCoordinator first: on a cluster it
        may be another broker than this writer's)."""
        found = self._request(10, 4, {"key_type": 0, "coordinator_keys": [group]})
        c = found.coordinators[0]
        if int(c.error_code):
            raise ConnectionError(f"FindCoordinator {group}: error {c.error_code}")
        address = f"{c.host}:{c.port}"
        if address == self.settings.bootstrap:
            return self._request(api_key, version, body)
        client = self._coordinators.get(address)
        if client is None:
            client = self._coordinators[address] = RawClient(c.host, int(c.port), timeout=30)
        try:
            return client.request(api_key, version, body)
        except Exception:
            self._coordinators.pop(address, None)
            client.close()
            raise

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
                           "configuration_keys": [MODE, INTERVAL, SPEC, CLEANUP,
                                                  VALUE_SCHEMA, VALUE_ENCODING]}
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
                                  led[result.resource_name],
                                  "compact" in (configs.get(CLEANUP) or ""),
                                  configs.get(VALUE_SCHEMA) or "",
                                  configs.get(VALUE_ENCODING) or "json"))
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
        values = None
        if topic.mode == "value_schema":
            try:
                values = ValueSchema(topic.value_schema, topic.value_encoding)
            except ValueSchemaError as exc:
                log.warning("table %s.%s: %s=%r: %s; not written until it is fixed",
                            self.settings.namespace, topic.name, VALUE_SCHEMA,
                            topic.value_schema[:200], exc)
                return 0
        for _attempt in range(COMMIT_ATTEMPTS):
            table = topic_table(self.catalog, self.settings.namespace, topic.name,
                                topic.spec, values.table_schema() if values else None)
            base = table_offsets(table)
            starts = {p: base[p] for p in topic.led if p in base}
            missing = [p for p in topic.led if p not in base]
            if missing:  # a partition whose leader just moved may not answer: next time
                starts.update(self._log_starts(topic.name, missing))
            arrow_schema = table.schema().as_arrow()
            columns = RecordColumns()
            ends = dict(starts)
            for p in sorted(starts):
                if columns.record_bytes >= self.settings.max_commit_bytes:
                    break
                ends[p] = self._read(topic.name, p, starts[p], columns)
            if not len(columns):  # nothing new, or markers and aborted records alone:
                self._report(topic.name, ends)  # the table lacks nothing before `ends`
                return 0  # (its snapshot's offsets move with the next records)
            properties = offsets_property({**base, **ends})
            try:
                if values is None:
                    rows = columns.table(arrow_schema)
                else:
                    rows, dead = split(columns.table(KEY_VALUE_ARROW), values, arrow_schema)
                    self._dead_letters(topic, dead, ends)
                    if not rows.num_rows:  # every value bad: the dead letters hold them
                        self._report(topic.name, ends)  # (read again, none twice, until
                        return 0  # a good value moves the table's offsets past them)
                if topic.compacted:
                    written = commit_upsert(table, rows, properties)
                else:
                    table.append(rows, snapshot_properties=properties)
                    written = rows.num_rows
            except CommitFailedException:
                continue  # the table moved on: read its offsets again
            log.info("table %s.%s: %d rows%s, offsets %s", self.settings.namespace,
                     topic.name, written, " (upserted)" if topic.compacted else "", ends)
            self._report(topic.name, ends)
            return len(columns)
        log.warning("table %s.%s: %d commits in a row found the table moved on; trying "
                    "at the next interval", self.settings.namespace, topic.name,
                    COMMIT_ATTEMPTS)
        return 0

    def _dead_letters(self, topic: TopicTable, rows: pa.Table, ends: dict[int, int]) -> None:
        """Values that did not parse, to `<topic>~dlq`, before the topic's table commits:
        that table's own offsets say what it holds, so a retry (the topic's table moved
        on, or a writer killed between the two) adds none twice."""
        table = topic_table(self.catalog, self.settings.namespace, topic.name + DLQ_SUFFIX,
                            "none", dead_letter_schema())
        done = table_offsets(table)
        fresh = rows.filter(pc.greater_equal(
            rows["offset"], pa.array([done.get(p, 0) for p in rows["partition"].to_pylist()],
                                     pa.int64())))
        if fresh.num_rows:
            log.info("table %s.%s: %d values did not parse, to %s%s",
                     self.settings.namespace, topic.name, fresh.num_rows, topic.name,
                     DLQ_SUFFIX)
            table.append(fresh.cast(table.schema().as_arrow()),
                         snapshot_properties=offsets_property({**done, **ends}))

    def _report(self, topic: str, offsets: dict[int, int]) -> None:
        """The table's new offsets to its progress group (a mirror for operators: a
        failure here is logged, and the next commit reports again)."""
        if not offsets or self.reported.get(topic) == offsets:
            return
        note = progress.metadata(int(self.wall_clock() * 1000))
        try:
            group = progress.group_of(topic)
            resp = self._coordinator_request(group, 8, 8, {
                "group_id": group, "generation_id_or_member_epoch": -1,
                "member_id": "", "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                     "committed_metadata": note} for p, o in sorted(offsets.items())]}]})
            codes = {int(p.error_code) for t in resp.topics for p in t.partitions}
        except Exception as exc:  # noqa: BLE001 - the table commit stands; report next time
            codes = {-1}
            log.info("table writer: progress of %s not committed: %s", topic, exc)
        if codes - {0}:
            log.info("table writer: progress of %s answered %s", topic, sorted(codes))
        else:
            self.reported[topic] = dict(offsets)

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
        while columns.record_bytes < self.settings.max_commit_bytes:
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
