"""Controller: records in __cluster_metadata are the truth; a restart is a replay."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.config import BrokerConfig, LogConfig
from headwater.log.partition_log import PartitionLog
from headwater.metadata import codec
from headwater.metadata import records as R
from headwater.metadata.controller import (
    EXCESSIVE_BATCH,
    RECORDS_PER_BATCH,
    Controller,
    ControllerError,
    NewTopic,
    segment_sized,
)
from headwater.metadata.image import TOPIC_RESOURCE
from headwater.records.batch import build_batch, iter_batches

CLOCK = [1_000]


def open_controller(path: Path) -> Controller:
    plog = PartitionLog.open(path, LogConfig(), "__cluster_metadata", 0, CLOCK[0])
    controller = Controller(plog, BrokerConfig({"num.partitions": "3"}), lambda: CLOCK[0])
    controller.load()
    return controller


def test_create_alter_delete_then_replay_gives_same_image(tmp_path):
    c = open_controller(tmp_path / "meta")
    results = c.create_topics([NewTopic("orders", configs={"retention.ms": "1000"}),
                               NewTopic("clicks", 2)])
    assert [err for _, err, _ in results] == [None, None]
    assert len(c.image.topic("orders").partitions) == 3  # num.partitions default
    c.create_partitions("clicks", 5, None)
    c.commit(c.config_records(TOPIC_RESOURCE, "orders", {"retention.ms": None,
                                                         "segment.bytes": "1048576"}))
    c.delete_topics([c.image.topic("clicks")])
    pid1, pid2 = c.allocate_producer_id(), c.allocate_producer_id()
    assert pid2 == pid1 + 1
    image = c.image
    c.log.close()

    again = open_controller(tmp_path / "meta")
    assert again.image.topics_by_name.keys() == {"orders"}
    assert again.image.topic("orders") == image.topic("orders")
    assert dict(again.image.resource_configs(TOPIC_RESOURCE, "orders")) == \
        {"segment.bytes": "1048576"}
    # Producer ids are never handed out twice across a restart.
    assert again.allocate_producer_id() > pid2


def test_validation_errors_change_nothing(tmp_path):
    c = open_controller(tmp_path / "meta")
    c.create_topics([NewTopic("a.b")])
    end = c.log.log_end_offset
    cases = [(NewTopic("a.b"), E.topic_already_exists),
             (NewTopic("a_b"), E.invalid_topic_exception),
             (NewTopic("bad name"), E.invalid_topic_exception),
             (NewTopic("x", num_partitions=0), E.invalid_partitions),
             (NewTopic("x", replication_factor=3), E.invalid_replication_factor)]
    for topic, code in cases:
        (_, err, _), = c.create_topics([topic])
        assert err is not None and err.code == code, topic
    assert c.log.log_end_offset == end
    with pytest.raises(ControllerError) as exc:
        c.create_partitions("a.b", 1, None)
    assert exc.value.code == E.invalid_partitions


def test_large_change_is_one_metadata_transaction(tmp_path):
    c = open_controller(tmp_path / "meta")
    c.create_topics([NewTopic("wide", RECORDS_PER_BATCH * 2)])
    items = []
    from headwater.records.batch import decode_records, iter_batches

    data = c.log.read(0, 1 << 24)
    for pos, h in iter_batches(data):
        items += [codec.decode(r.key, r.value) for r in decode_records(data[pos:pos + h.size])]
    assert items[0] == R.FeatureLevelRecord("metadata.version", R.METADATA_VERSION)
    assert isinstance(items[1], R.BeginTransactionRecord)
    assert isinstance(items[-1], R.EndTransactionRecord)
    assert len(c.image.topic("wide").partitions) == RECORDS_PER_BATCH * 2


def test_partial_transaction_at_startup_is_rolled_back(tmp_path):
    c = open_controller(tmp_path / "meta")
    c.create_topics([NewTopic("kept", 1)])
    # A crash after the first batch of a transaction: begin + some records, no end.
    records = [R.BeginTransactionRecord(), R.TopicRecord("ghost", R.new_topic_id())]
    entries = [(*codec.encode(r), [], CLOCK[0]) for r in records]
    c.log.append(build_batch(entries), CLOCK[0])
    c.log.close()

    again = open_controller(tmp_path / "meta")
    assert again.image.topic("ghost") is None
    assert again.image.topic("kept") is not None
    # The rollback is itself recorded, so later records apply normally.
    again.create_topics([NewTopic("after", 1)])
    again.log.close()
    third = open_controller(tmp_path / "meta")
    assert set(third.image.topics_by_name) == {"kept", "after"}


def test_a_request_of_more_than_ten_thousand_records_is_refused_whole(tmp_path):
    """Kafka's MAX_RECORDS_PER_USER_OP: every topic of the request gets POLICY_VIOLATION."""
    ctl = open_controller(tmp_path)
    results = ctl.create_topics([NewTopic("small", 1), NewTopic("huge", 10_000)])
    assert [(err.code, err.message) for _, err, _ in results] == [
        (E.policy_violation, EXCESSIVE_BATCH)] * 2
    assert ctl.image.topic("small") is None
    ctl.create_topics([NewTopic("base", 1)])
    with pytest.raises(ControllerError) as info:
        ctl.create_partitions("base", 10_002, None)
    assert info.value.code == E.policy_violation


def test_partitions_beyond_the_brokers_capacity_are_refused(tmp_path):
    ctl = open_controller(tmp_path)
    ctl.max_partitions = 10
    results = ctl.create_topics([NewTopic("a", 6), NewTopic("b", 5), NewTopic("c", 4)])
    errors = {t.name: err for t, err, _ in results}
    assert errors["a"] is None and errors["c"] is None
    assert errors["b"].code == E.policy_violation and "limit of 10" in errors["b"].message
    with pytest.raises(ControllerError, match="limit of 10"):
        ctl.create_partitions("c", 5, None)
    assert ctl.partition_count() == 10


def test_producer_id_blocks_continue_across_brokers_and_restarts(tmp_path):
    """AllocateProducerIds' allocator: each block starts where the last committed one
    ended, whichever broker asked; the controller's own ids come from such blocks, and a
    restart (another controller loading the log) continues after all of them."""
    c = open_controller(tmp_path / "meta")
    first = c.allocate_producer_ids(2, 7)
    own = c.allocate_producer_id()
    second = c.allocate_producer_ids(3)
    assert first == (0, 1000) and own == 1000 and second == (2000, 1000)
    c.log.close()
    again = open_controller(tmp_path / "meta")
    assert again.image.next_producer_id == 3000
    assert again.allocate_producer_ids(2) == (3000, 1000)
    assert again.allocate_producer_id() == 4000


def test_followed_batches_are_appended_in_runs_that_fit_a_segment():
    """A follower gets three brokers' registrations at once: no run over segment.bytes,
    every batch once and in order (a lone batch larger than a segment stays whole)."""
    batches = [build_batch([(None, b"v" * n, (), 0)], base_offset=i)
               for i, n in enumerate((3000, 3000, 3000, 9000, 10))]
    data = b"".join(batches)
    runs = list(segment_sized(data, 8192))
    assert b"".join(runs) == data
    assert [len(r) for r in runs] == [len(batches[0]) + len(batches[1]), len(batches[2]),
                                      len(batches[3]), len(batches[4])]
    assert all(len(r) <= 8192 for r in runs if len(list(iter_batches(r))) > 1)
    assert list(segment_sized(b"", 8192)) == []
