"""Pure parts of the share-group source (no Spark session, no broker): options, the
offset descriptor, range arithmetic, and the runner's settle/done bookkeeping."""

from __future__ import annotations

import json

import pytest

from pyspark_headwater.options import HeadwaterOptionError
from pyspark_headwater.share_client import ACCEPT, Acquired
from pyspark_headwater.share_options import parse_share_options
from pyspark_headwater.share_source import (
    Descriptor,
    HeadwaterShareStreamReader,
    ShareRangePartition,
    compact,
    share_schema,
    spans_of,
    split_done,
)

BASE = {"kafka.bootstrap.servers": "h:1", "kafka.share.group.id": "g", "subscribe": "t"}


def test_options():
    o = parse_share_options({**BASE, "maxRecordsPerTrigger": "10",
                             "share.auto.offset.reset": "earliest",
                             "SHARE.isolation.level": "read_committed",
                             "kafka.client.id": "c"}, streaming=True)
    assert o.group == "g" and o.read.topics == ("t",)
    assert o.max_records_per_trigger == 10
    assert o.read.isolation_level == "read_committed"
    assert dict(o.group_configs) == {"share.auto.offset.reset": "earliest",
                                     "share.isolation.level": "read_committed"}
    assert o.read.client_config == {"client.id": "c", "bootstrap.servers": "h:1"}


@pytest.mark.parametrize(("options", "named"), [
    ({"subscribe": None}, "subscribe"),
    ({"startingOffsets": "earliest"}, "startingOffsets"),
    ({"endingOffsets": "latest"}, "endingOffsets"),
    ({"subscribePattern": "t.*"}, "subscribePattern"),
    ({"kafka.auto.offset.reset": "earliest"}, "share.auto.offset.reset"),
    ({"kafka.isolation.level": "read_committed"}, "share.isolation.level"),
    ({"share.isolation.level": "sometimes"}, "share.isolation.level"),
    ({"maxRecordsPerTrigger": "0"}, "maxRecordsPerTrigger"),
    ({"kafka.share.group.id": " "}, "kafka.share.group.id"),
])
def test_bad_options_name_the_option(options, named):
    opts = {k: v for k, v in {**BASE, **options}.items() if v is not None}
    with pytest.raises(HeadwaterOptionError, match=named):
        parse_share_options(opts, streaming=True)


def test_batch_reads_are_refused():
    with pytest.raises(HeadwaterOptionError, match="readStream"):
        parse_share_options(BASE, streaming=False)


def test_descriptor_round_trips_as_stable_json():
    d = Descriptor(3, "m", {("t", 10): [(5, 9, 1)], ("t", 2): [(0, 4, 2)]},
                   {("t", 2): [(7, 8)]})
    js = d.json()
    assert json.dumps(js) == ('{"v": 1, "seq": 3, "member": "m", "acquired": {"t": '
                              '{"2": [[0, 4, 2]], "10": [[5, 9, 1]]}}, "done": {"t": '
                              '{"2": [[7, 8]]}}}')
    assert Descriptor.parse(json.dumps(js)) == d
    with pytest.raises(HeadwaterOptionError, match="share-group source"):
        Descriptor.parse({"t": {"0": 5}})  # a partitioned source's checkpoint


def test_range_arithmetic():
    assert compact([(10, 19, 1), (0, 9, 1), (20, 29, 2)]) == [(0, 19, 1), (20, 29, 2)]
    fresh, done = split_done([(0, 99, 2)], [(10, 19), (50, 200)])
    assert fresh == [(0, 9, 2), (20, 49, 2)]
    assert done == [(10, 19, 2), (50, 99, 2)]


class FakeMember:
    """What the runner needs of a ShareMember, recording acknowledgements."""

    member_id = "me"

    def __init__(self, fetches: list[dict], refuse: set | None = None) -> None:
        self.fetches = fetches
        self.refuse = refuse or set()
        self.acks: list[tuple[dict, int]] = []

    def fetch(self, max_records: int, wait_ms: int) -> Acquired:
        return Acquired(self.fetches.pop(0) if self.fetches else {})

    def acknowledge(self, ranges: dict, ack_type: int = ACCEPT) -> set:
        self.acks.append((dict(ranges), ack_type))
        return {tp for tp in ranges if tp in self.refuse}

    def close(self, release: bool = True) -> None:
        pass


def reader(member: FakeMember) -> HeadwaterShareStreamReader:
    r = HeadwaterShareStreamReader(parse_share_options(BASE, True), share_schema(False))
    r._member = member  # type: ignore[assignment]
    return r


def test_runner_accepts_a_batch_only_when_the_next_one_is_asked_for():
    tp = ("t", 0)
    # a trigger fetches until a fetch brings nothing
    m = FakeMember([{tp: [(0, 9, 1)]}, {}, {}, {tp: [(10, 19, 1)]}])
    r = reader(m)
    b1 = r.latestOffset(r.initialOffset(), None)
    assert Descriptor.parse(b1).acquired == {tp: [(0, 9, 1)]} and m.acks == []
    parts = r.partitions(r.initialOffset(), b1)
    assert parts == [ShareRangePartition("t", 0, 0, 10, [(0, 9, 1)], 0)]
    assert r.latestOffset(b1, None) == b1  # nothing new: no batch, batch 1 accepted
    assert m.acks == [({tp: [(0, 9)]}, ACCEPT)]
    r.commit(b1)  # Spark's late commit() changes nothing
    b2 = r.latestOffset(b1, None)
    assert len(m.acks) == 1 and Descriptor.parse(b2).seq == 2


def test_a_previous_runs_batch_is_replayed_and_its_redelivery_skipped():
    """The restarted query replays the old member's batch by offset (deliveryCount + 1),
    then remembers it as done: the broker's redelivery is accepted, not emitted."""
    tp = ("t", 0)
    old = Descriptor(4, "old", {tp: [(0, 9, 1)]}, {tp: [(100, 104)]}).json()
    m = FakeMember([{tp: [(0, 9, 2), (100, 104, 2), (105, 109, 1)]}])
    r = reader(m)
    r._member = None  # type: ignore[assignment]  # replay planning comes before any fetch
    assert r.partitions(old, old)[0].bump == 1
    r._member = m  # type: ignore[assignment]
    new = Descriptor.parse(r.latestOffset(old, None))
    assert new.acquired == {tp: [(105, 109, 1)]}
    assert m.acks == [({tp: [(0, 9), (100, 104)]}, ACCEPT)]
    assert new.done == {}  # confirmed by the broker: forgotten


def test_a_refused_accept_is_remembered_as_done():
    tp = ("t", 0)
    m = FakeMember([{tp: [(0, 9, 1)]}, {}], refuse={tp})
    r = reader(m)
    b1 = r.latestOffset(r.initialOffset(), None)
    m.fetches = [{tp: [(20, 29, 1)]}]
    b2 = Descriptor.parse(r.latestOffset(b1, None))
    assert b2.done == {tp: [(0, 9)]}
    assert b2.acquired == {tp: [(20, 29, 1)]}


def test_on_read_accepts_at_acquisition():
    tp = ("t", 0)
    m = FakeMember([{tp: [(0, 9, 1)]}, {}, {}])
    r = HeadwaterShareStreamReader(parse_share_options({**BASE, "share.acknowledge": "onRead"},
                                                       True), share_schema(False))
    r._member = m  # type: ignore[assignment]
    b1 = r.latestOffset(r.initialOffset(), None)
    assert m.acks == [({tp: [(0, 9)]}, ACCEPT)]  # before the batch runs: at-most-once
    r.latestOffset(b1, None)
    assert len(m.acks) == 1


def test_spans_skip_large_gaps_held_by_other_members():
    spans = spans_of("t", 0, [(0, 9, 1), (20, 29, 1), (10_000, 10_009, 2)])
    assert [(s.from_offset, s.until_offset) for s in spans] == [(0, 30), (10_000, 10_010)]
    r = reader(FakeMember([]))
    desc = Descriptor(1, "me", {("t", 0): [(0, 9, 1), (10_000, 10_009, 2)]}).json()
    parts = r.partitions(desc, desc)
    assert [(p.from_offset, p.until_offset, p.ranges) for p in parts] == \
        [(0, 10, [(0, 9, 1)]), (10_000, 10_010, [(10_000, 10_009, 2)])]
