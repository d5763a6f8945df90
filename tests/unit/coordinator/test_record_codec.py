import uuid

import pytest

from headwater.coordinator.hashing import java_string_hash, partition_for
from headwater.coordinator.record_codec import CodecError, CoordinatorRecord
from headwater.group import records as R


def test_offset_commit_record_has_kafka_layout():
    rec = R.offset_commit("g", "t", 3, 42, 7, "meta", 1234)
    key, value = R.CODEC.encode(rec)
    # key: int16 type 1, string group, string topic, int32 partition
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    # value: int16 version 3, offset, leader epoch, metadata, commit timestamp
    assert value[:2] == b"\x00\x03" and len(value) == 2 + 8 + 4 + 2 + 4 + 8
    assert R.CODEC.decode(key, value) == rec


def test_round_trip_nested_and_tombstone():
    tid = uuid.uuid4()
    rec = CoordinatorRecord(R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                            {"group_id": "g", "member_id": "m+/=="},
                            {"member_epoch": 5, "previous_member_epoch": 4, "state": 1,
                             "assigned_partitions": [{"topic_id": tid, "partitions": [0, 2]}],
                             "partitions_pending_revocation": []})
    assert R.CODEC.decode(*R.CODEC.encode(rec)) == rec
    tomb = CoordinatorRecord(R.CONSUMER_GROUP_METADATA, {"group_id": "g"}, None)
    key, value = R.CODEC.encode(tomb)
    assert value is None and R.CODEC.decode(key, None) == tomb


def test_unknown_type_is_skipped_and_garbage_raises():
    assert R.CODEC.decode(b"\x00\x63abc", b"\x00\x00") is None
    with pytest.raises(CodecError):
        R.CODEC.decode(b"\x00\x01\x00\x05ab", None)


def test_java_hash_and_partition():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("é") == 233  # UTF-16 code unit, not UTF-8 bytes
    assert java_string_hash("\U0001F600") == 1772899  # surrogate pair like Java
    assert 0 <= partition_for("my-group", 50) < 50
    assert partition_for("my-group", 50) == abs(java_string_hash("my-group")) % 50
