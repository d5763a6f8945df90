"""Pure parts of the connector (no Spark session, no broker): options, offset JSON,
admission control and range splitting, checked against Spark's Kafka semantics."""

from __future__ import annotations

import json

import pytest

from pyspark_headwater.options import (
    HeadwaterOptionError,
    offsets_from_json,
    offsets_json,
    parse_duration_ms,
    parse_sink_options,
    parse_source_options,
)
from pyspark_headwater.planning import OffsetRange, rate_limit, split_ranges
from pyspark_headwater.source import HeadwaterStreamReader

BASE = {"kafka.bootstrap.servers": "h:1"}


def test_options_are_case_insensitive_and_typed():
    o = parse_source_options({**BASE, "SUBSCRIBE": "a, b,", "maxOffsetsPerTrigger": "10",
                              "kafka.group.id": "g", "kafka.client.id": "c"}, streaming=True)
    assert o.topics == ("a", "b")
    assert o.max_offsets_per_trigger == 10
    assert o.starting.kind == "latest"  # streaming default
    assert o.commit_offsets and o.group_id == "g"
    assert o.client_config == {"client.id": "c", "bootstrap.servers": "h:1"}
    assert parse_source_options({**BASE, "subscribe": "a"}, streaming=False).starting.kind \
        == "earliest"


@pytest.mark.parametrize(("options", "named"), [
    ({"subscribe": "a", "minOffsetsPerTrigger": "0"}, "minOffsetsPerTrigger"),
    ({"subscribe": "a", "maxTriggerDelay": "soon", "minOffsetsPerTrigger": "5"},
     "maxTriggerDelay"),
    ({"subscribe": "a", "commitOffsets": "true"}, "kafka.group.id"),
    ({"assign": '{"a":[0,1]}', "startingOffsets": '{"a":{"0":5}}'}, "startingOffsets"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":-3}}'}, "startingOffsets"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":9}}', "endingOffsets": '{"a":{"0":3}}'},
     "startingOffsets"),
    ({"subscribe": "a", "kafka.enable.auto.commit": "false"}, "enable.auto.commit"),
    ({"subscribe": "a", "kafka.value.deserializer": "x"}, "value.deserializer"),
    ({"subscribe": "a", "startingOffsetsByTimestampStrategy": "closest"},
     "startingOffsetsByTimestampStrategy"),
    ({"subscribe": "a", "startingTimestamp": "yesterday"}, "startingTimestamp"),
])
def test_bad_source_options_name_the_option(options, named):
    with pytest.raises(HeadwaterOptionError, match=named):
        parse_source_options({**BASE, **options}, streaming=False)


TABLE = {"historyFromTable": "true", "iceberg.uri": "sqlite:////d/catalog.db",
         "iceberg.warehouse": "file:///d"}


@pytest.mark.parametrize(("options", "named"), [
    ({"assign": '{"a":[0]}', **TABLE}, "subscribe"),
    ({"subscribe": "a", **TABLE, "startingOffsets": "latest"}, "starting"),
    ({"subscribe": "a", **TABLE, "kafka.isolation.level": "read_uncommitted"},
     "read_committed"),
    ({"subscribe": "a", "historyFromTable": "true", "iceberg.uri": "sqlite:///c"},
     "iceberg.warehouse"),
    ({"subscribe": "a", "iceberg.uri": "sqlite:///c"}, "iceberg.uri"),  # unknown without
])
def test_bad_history_from_table_options(options, named):
    with pytest.raises(HeadwaterOptionError, match=named):
        parse_source_options({**BASE, **options}, streaming=True)


def test_history_from_table_reads_committed_with_the_catalog_given():
    o = parse_source_options({**BASE, "subscribe": "a", **TABLE, "iceberg.namespace": "n",
                              "iceberg.s3.endpoint": "http://h:2"}, streaming=True)
    assert o.isolation_level == "read_committed"
    assert dict(o.history_table or ()) == {
        "uri": "sqlite:////d/catalog.db", "warehouse": "file:///d", "namespace": "n",
        "s3.endpoint": "http://h:2"}
    assert parse_source_options({**BASE, "subscribe": "a"}).history_table is None


def test_the_table_marker_is_not_an_offset():
    from pyspark_headwater.table_history import MARKER, split_marker

    plain, snapshots = split_marker({"a": {"0": 5}, MARKER: {"a": 7}})
    assert offsets_from_json(plain) == {("a", 0): 5} and snapshots == {"a": 7}
    assert split_marker({"a": {"0": 5}}) == ({"a": {"0": 5}}, None)


def test_bad_sink_options():
    with pytest.raises(HeadwaterOptionError, match="transactionalIdPrefix"):
        parse_sink_options({**BASE, "transactionalIdPrefix": "p"})
    with pytest.raises(HeadwaterOptionError, match="enable.idempotence"):
        parse_sink_options({**BASE, "exactlyOnce": "true", "kafka.enable.idempotence": "false"})
    with pytest.raises(HeadwaterOptionError, match="transactional.id"):
        parse_sink_options({**BASE, "kafka.transactional.id": "x"})
    with pytest.raises(HeadwaterOptionError, match="kafka.bootstrap.servers"):
        parse_sink_options({"topic": "t"})
    assert parse_sink_options({**BASE, "checkpointLocation": "/c", "topic": " t "}).topic == "t"


def test_durations_like_spark():
    assert parse_duration_ms("15m", "x") == 900_000
    assert parse_duration_ms("30s", "x") == 30_000
    assert parse_duration_ms("250", "x") == 250
    assert parse_duration_ms("1h", "x") == 3_600_000


def test_offsets_json_round_trips_in_spark_form():
    offsets = {("b", 10): 5, ("b", 2): 7, ("a", 0): 1}
    js = offsets_json(offsets)
    assert json.dumps(js) == '{"a": {"0": 1}, "b": {"2": 7, "10": 5}}'  # numeric order
    assert offsets_from_json(json.loads(json.dumps(js))) == offsets


def test_rate_limit_is_proportional_and_never_starves():
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}
    latest = {("t", 0): 1000, ("t", 1): 10, ("t", 2): 100}
    end = rate_limit(101, start, latest)
    assert end == {("t", 0): 100, ("t", 1): 1, ("t", 2): 100}
    assert rate_limit(10_000, start, latest) == latest


def test_split_ranges_like_spark():
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 0, 100), OffsetRange("t", 2, 5, 5)]
    assert split_ranges(ranges, None, None) == ranges[:2]
    pieces = split_ranges(ranges, 5, None)
    assert len(pieces) == 6  # Java's Math.round(2.5) == 3 pieces each
    assert sum(p.size for p in pieces) == 200
    assert [(p.from_offset, p.until_offset) for p in pieces if p.partition == 0] == \
        [(0, 33), (33, 66), (66, 100)]
    small = split_ranges([OffsetRange("t", 0, 0, 10)], None, 4)
    assert [(p.from_offset, p.until_offset) for p in small] == [(0, 3), (3, 6), (6, 10)]


class _FakeCluster:
    def __init__(self, latest):
        self.latest_offsets = latest

    def partitions(self):
        return sorted(self.latest_offsets)

    def latest(self, tps):
        return {tp: self.latest_offsets[tp] for tp in tps}

    def earliest(self, tps):
        return dict.fromkeys(tps, 0)

    def commit_group(self, group, offsets):
        return True


def _reader(**options):
    from pyspark_headwater.schema import source_schema

    opts = parse_source_options({**BASE, "subscribe": "t", **options}, streaming=True)
    r = HeadwaterStreamReader(opts, source_schema(False))
    return r


def test_min_offsets_per_trigger_waits_until_enough_or_delay():
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMinRows

    r = _reader(minOffsetsPerTrigger="100", maxTriggerDelay="1h")
    r._cluster = _FakeCluster({("t", 0): 50})
    start = {"t": {"0": 0}}
    assert r.getDefaultReadLimit() == ReadMinRows(100)
    # the first trigger is never delayed (Spark: lastTriggerMillis starts at 0)
    assert r.latestOffset(start, ReadMinRows(100)) == {"t": {"0": 50}}
    start = {"t": {"0": 50}}
    r._cluster = _FakeCluster({("t", 0): 120})
    assert r.latestOffset(start, ReadMinRows(100)) is start  # 70 < 100: wait
    r._cluster = _FakeCluster({("t", 0): 150})
    assert r.latestOffset(start, ReadMinRows(100)) == {"t": {"0": 150}}
    # ReadAllAvailable (e.g. Trigger.Once) ignores the minimum
    r._cluster = _FakeCluster({("t", 0): 151})
    assert r.latestOffset({"t": {"0": 150}}, ReadAllAvailable()) == {"t": {"0": 151}}


def test_available_now_stops_at_the_target_and_ignores_the_minimum():
    from pyspark.sql.streaming.datasource import ReadMaxRows, ReadMinRows

    r = _reader(maxOffsetsPerTrigger="40", minOffsetsPerTrigger="30")
    r._cluster = _FakeCluster({("t", 0): 100})
    r.prepareForTriggerAvailableNow()
    r._cluster = _FakeCluster({("t", 0): 500})  # data arriving later is not read
    assert r.getDefaultReadLimit() == ReadMaxRows(40)
    ends, start = [], {"t": {"0": 0}}
    while True:
        end = r.latestOffset(start, ReadMaxRows(40))
        if end is start:
            break
        ends.append(end["t"]["0"])
        start = end
    assert ends == [40, 80, 100]
    assert r.latestOffset({"t": {"0": 95}}, ReadMinRows(30)) == {"t": {"0": 100}}


def test_table_files_are_packed_into_tasks_of_at_most_128_mib():
    from types import SimpleNamespace

    from pyspark_headwater.table_history import pack

    def files(*mib: int) -> list:
        return [SimpleNamespace(file=SimpleNamespace(file_size_in_bytes=m << 20), n=i)
                for i, m in enumerate(mib)]

    sizes = lambda groups: [[t.file.file_size_in_bytes >> 20 for t in g] for g in groups]  # noqa: E731
    assert sizes(pack(files(*[1] * 300))) == [[1] * 128, [1] * 128, [1] * 44]
    assert sizes(pack(files(200, 1, 1))) == [[200], [1, 1]]  # a big file alone
    assert sizes(pack(files(*[1] * 8), at_least=4)) == [[1, 1]] * 4  # minPartitions
    assert pack([]) == []
