"""KRaft's layout of metadata records, and the conversion of a JSON-era log."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from headwater.config import BrokerConfig, LogConfig
from headwater.log.partition_log import PartitionLog
from headwater.metadata import codec, kraft
from headwater.metadata import records as R
from headwater.metadata.controller import (
    Controller,
    NewTopic,  # noqa: I001
)
from headwater.metadata.convert import BACKUP, CONVERTING, convert_json_log, needs_conversion
from headwater.records.batch import build_batch, decode_records, iter_batches

CLOCK = [1_000]


def open_controller(path: Path) -> Controller:
    plog = PartitionLog.open(path, LogConfig(), "__cluster_metadata", 0, CLOCK[0])
    controller = Controller(plog, BrokerConfig({}), lambda: CLOCK[0])
    controller.load()
    return controller

TID = "6f2f2f55-7d3a-4d2e-9a34-0a1b2c3d4e5f"

ALL = [
    R.TopicRecord("orders", TID),
    R.PartitionRecord(TID, 2, (1, 2), (1,), 1, 4, 7),
    R.ConfigRecord(2, "orders", "retention.ms", "1000"),
    R.ConfigRecord(2, "orders", "retention.ms", None),
    R.RemoveTopicRecord(TID),
    R.ProducerIdsRecord(1, -1, 2000),
    R.FeatureLevelRecord("metadata.version", 25),
    R.BeginTransactionRecord(), R.BeginTransactionRecord("create wide"),
    R.EndTransactionRecord(),
    R.AbortTransactionRecord(), R.AbortTransactionRecord("append failed"),
]


@pytest.mark.parametrize("record", ALL, ids=lambda r: type(r).__name__)
def test_every_record_type_round_trips_without_a_key(record):
    key, value = codec.encode(record)
    assert key is None
    assert codec.decode(None, value) == record


def test_a_topic_record_is_laid_out_as_kafka_serde_writes_it():
    _, value = codec.encode(R.TopicRecord("a", TID))
    # frame version 1, api key 2, version 0; compact string "a"; the uuid; no tags
    assert value == b"\x01\x02\x00" + b"\x02a" + uuid.UUID(TID).bytes + b"\x00"


def test_a_partition_record_of_a_later_version_is_read():
    """Kafka 4.3 writes PartitionRecord v2 (directories, ELR as tags); we read it."""
    body = (b"\x00\x00\x00\x05" + uuid.UUID(TID).bytes + b"\x02\x00\x00\x00\x01"
            + b"\x02\x00\x00\x00\x01" + b"\x01" + b"\x01" + b"\x00\x00\x00\x01"
            + b"\x00\x00\x00\x03" + b"\x00\x00\x00\x09" + b"\x02" + bytes(16)
            + b"\x01\x01\x01\x01")  # one tag (1: ELR) of one byte: an empty array
    rec = kraft.decode(b"\x01\x03\x02" + body)
    assert rec == R.PartitionRecord(TID, 5, (1,), (1,), 1, 3, 9)


@pytest.mark.parametrize("value, message", [
    (b"\x02\x02\x00", "frame version"),
    (b"\x01\x1c\x00", "type 28"),  # ClearElrRecord: not one headwater reads
    (b"\x01\x02\x01\x02a" + bytes(16) + b"\x00", "version 1"),
    (b"\x01\x02\x00\x05ab", "truncated"),
    (b"\x01\x09\x00" + bytes(16) + b"\x00\x00", "bytes left"),
])
def test_unreadable_values_are_a_clear_error(value, message):
    with pytest.raises(kraft.KraftDecodeError, match=message):
        kraft.decode(value)


def test_json_records_are_still_read():
    rec = R.TopicRecord("orders", TID)
    assert codec.decode(b"TopicRecord", R.encode_json(rec)) == rec


def write_json_log(path: Path) -> None:
    """A metadata log as headwater wrote it before the KRaft layout."""
    plog = PartitionLog.open(path, LogConfig(), "__cluster_metadata", 0, CLOCK[0])
    batches = [[R.TopicRecord("old", TID), R.PartitionRecord(TID, 0, (1,), (1,), 1),
                R.ConfigRecord(2, "old", "retention.ms", "5000")],
               [R.BeginTransactionRecord(), R.TopicRecord("ghost", str(uuid.uuid4()))],
               [R.AbortTransactionRecord("open at startup")],
               [R.ProducerIdsRecord(1, -1, 3000)]]
    for records in batches:
        entries = [(r.TYPE.encode(), R.encode_json(r), [], CLOCK[0]) for r in records]
        plog.append(build_batch(entries), CLOCK[0])
    plog.close()


def kinds(path: Path) -> list[tuple[bool, str]]:
    out = []
    for seg in sorted(path.glob("*.log")):
        data = seg.read_bytes()
        for pos, h in iter_batches(data):
            for rec in decode_records(data[pos:pos + h.size]):
                out.append((rec.key is None, type(codec.decode(rec.key, rec.value)).__name__))
    return out


def test_a_json_log_is_converted_once_and_replays_to_the_same_image(tmp_path):
    meta = tmp_path / "__cluster_metadata-0"
    write_json_log(meta)
    before = open_controller(meta).image
    # open_controller appended nothing: the log was not empty
    assert needs_conversion(meta)
    assert convert_json_log(meta) == 8  # 7 records and the metadata.version first
    assert kinds(meta) == [(True, "FeatureLevelRecord"), (True, "TopicRecord"),
                           (True, "PartitionRecord"), (True, "ConfigRecord"),
                           (True, "BeginTransactionRecord"), (True, "TopicRecord"),
                           (True, "AbortTransactionRecord"), (True, "ProducerIdsRecord")]
    assert (tmp_path / ("__cluster_metadata-0" + BACKUP)).is_dir()
    assert not needs_conversion(meta) and convert_json_log(meta) == 0
    after = open_controller(meta)
    assert after.image.topics_by_name == before.topics_by_name
    assert after.image.configs == before.configs
    assert after.image.next_producer_id == before.next_producer_id == 3000
    assert after.image.topic("ghost") is None
    after.create_topics([NewTopic("new", 1)])
    assert set(open_controller(meta).image.topics_by_name) == {"old", "new"}


def test_a_conversion_interrupted_between_its_renames_is_finished(tmp_path):
    meta = tmp_path / "__cluster_metadata-0"
    write_json_log(meta)
    convert_json_log(meta)
    # As if the process died after moving the JSON log aside, before the new one moved in.
    os.rename(meta, tmp_path / ("__cluster_metadata-0" + CONVERTING))
    assert convert_json_log(meta) == 0
    assert set(open_controller(meta).image.topics_by_name) == {"old"}


def test_a_new_log_starts_with_metadata_version(tmp_path):
    c = open_controller(tmp_path / "meta")
    assert kinds(tmp_path / "meta") == [(True, "FeatureLevelRecord")]
    c.log.close()
    open_controller(tmp_path / "meta")  # written once, not at every start
    assert kinds(tmp_path / "meta") == [(True, "FeatureLevelRecord")]
