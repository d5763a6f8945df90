"""Hostile input: the offending connection is answered or closed; others keep working."""

from __future__ import annotations

import os
import struct

import pytest

from headwater.records.batch import build_batch
from tests.support.wire import RawClient, encode_request


def healthy(broker) -> None:
    """A second client still gets answers."""
    client = RawClient("127.0.0.1", broker.port)
    try:
        resp = client.request(18, 3, {"client_software_name": "ok",
                                      "client_software_version": "1"})
        assert int(resp.error_code) == 0
        assert any(k.api_key == 0 for k in resp.api_keys)
    finally:
        client.close()


@pytest.fixture
def raw(broker):
    client = RawClient("127.0.0.1", broker.port)
    yield client
    client.close()


def test_random_bytes(broker, raw):
    raw.send_bytes(struct.pack(">i", 64) + os.urandom(64))
    assert raw.is_closed_by_peer()
    healthy(broker)


def test_two_gigabyte_size_prefix(broker, raw):
    raw.send_bytes(struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 16)
    assert raw.is_closed_by_peer()
    healthy(broker)


def test_negative_size_prefix(broker, raw):
    raw.send_bytes(struct.pack(">i", -5))
    assert raw.is_closed_by_peer()
    healthy(broker)


def test_truncated_frame_then_disconnect(broker, raw):
    frame = encode_request(3, 1, {"topics": None})
    raw.send_bytes(frame[: len(frame) // 2])
    raw.close()
    healthy(broker)


def test_header_truncated_inside_frame(broker, raw):
    raw.send_bytes(struct.pack(">i", 3) + b"\x00\x03\x00")
    assert raw.is_closed_by_peer()
    healthy(broker)


def test_unknown_api_key(broker, raw):
    raw.send_bytes(struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1))
    assert raw.is_closed_by_peer()
    healthy(broker)


def test_unsupported_version_of_other_api_closes(broker, raw):
    raw.send_bytes(struct.pack(">i", 10) + struct.pack(">hhih", 3, 99, 1, -1))
    assert raw.is_closed_by_peer()
    healthy(broker)


def test_undecodable_body(broker, raw):
    body = struct.pack(">hhih", 3, 4, 7, -1) + b"\xff\xff\xff\x7f"  # topic array of 2^31
    raw.send_bytes(struct.pack(">i", len(body)) + body)
    assert raw.is_closed_by_peer()
    healthy(broker)


def test_api_versions_unsupported_version_gets_v0_error(broker, raw):
    body = struct.pack(">hhih", 18, 99, 42, 4) + b"test"
    raw.send_bytes(struct.pack(">i", len(body)) + body)
    frame = raw.recv_frame()
    cid, err, count = struct.unpack_from(">ihi", frame, 0)
    assert (cid, err) == (42, 35)
    keys = {struct.unpack_from(">hhh", frame, 10 + 6 * i)[0] for i in range(count)}
    assert {0, 1, 3, 18} <= keys
    healthy(broker)


def test_bad_crc_batch_gets_corrupt_message(broker, raw, topic_name):
    raw.request(19, 4, {"topics": [{"name": topic_name, "num_partitions": 1,
                                    "replication_factor": 1, "assignments": (),
                                    "configs": ()}], "timeout": 5000, "validate_only": False})
    batch = bytearray(build_batch([(b"k", b"v", [], 1000)]))
    batch[-1] ^= 0xFF
    resp = raw.request(0, 9, {"acks": -1, "timeout": 5000, "topic_data": [
        {"name": topic_name, "partition_data": [{"index": 0, "records": bytes(batch)}]}]},
        correlation_id=2)
    part = resp.responses[0].partition_responses[0]
    assert int(part.error_code) == 2  # CORRUPT_MESSAGE
    good = raw.request(0, 9, {"acks": -1, "timeout": 5000, "topic_data": [
        {"name": topic_name, "partition_data": [
            {"index": 0, "records": build_batch([(b"k", b"v", [], 1000)])}]}]},
        correlation_id=3)
    assert int(good.responses[0].partition_responses[0].error_code) == 0
    assert good.responses[0].partition_responses[0].base_offset == 0
    healthy(broker)


def test_oversized_batch_gets_message_too_large(broker, raw, topic_name):
    raw.request(19, 4, {"topics": [{"name": topic_name, "num_partitions": 1,
                                    "replication_factor": 1, "assignments": (),
                                    "configs": [{"name": "max.message.bytes",
                                                 "value": "1000"}]}],
                        "timeout": 5000, "validate_only": False})
    batch = build_batch([(None, b"x" * 5000, [], 1000)])
    resp = raw.request(0, 9, {"acks": 1, "timeout": 5000, "topic_data": [
        {"name": topic_name, "partition_data": [{"index": 0, "records": batch}]}]},
        correlation_id=2)
    assert int(resp.responses[0].partition_responses[0].error_code) == 10


def test_pipelined_requests_answered_in_order(broker, raw):
    frames = b"".join(encode_request(18, 3, {"client_software_name": "p",
                                             "client_software_version": "1"},
                                     correlation_id=i) for i in range(1, 51))
    raw.send_bytes(frames)
    cids = [struct.unpack_from(">i", raw.recv_frame(), 0)[0] for _ in range(50)]
    assert cids == list(range(1, 51))


# Issue 16: this ListOffsets v7 frame (its topics array claims 2^32 - 2 entries) made
# kio's native reader ask for ~100 GB and abort the whole broker process.
LIST_OFFSETS_KILLER = bytes.fromhex(
    "000000330002000700000005000772646b61666b6100ffffffff01ffffffff33363963"
    "020000000000000000fffffffffffffffe000000")


def test_array_length_past_the_frame_closes_only_that_connection(broker, raw):
    raw.send_bytes(LIST_OFFSETS_KILLER)
    assert raw.is_closed_by_peer()
    assert broker.proc.poll() is None
    healthy(broker)
    assert "topics array past the end" in broker.logs()


def test_null_where_schema_forbids_it_is_refused(broker, raw):
    """OffsetFetch v1 with a null topics array (non-nullable before v2) used to reach the
    handler and raise TypeError there."""
    body = struct.pack(">hhih", 9, 1, 3, -1) + struct.pack(">h", 1) + b"g" + struct.pack(">i", -1)
    raw.send_bytes(struct.pack(">i", len(body)) + body)
    assert raw.is_closed_by_peer()
    healthy(broker)
    assert "Unhandled exception" not in broker.logs()


def test_join_group_repeating_a_protocol_is_answered(broker, raw):
    """Found by the fuzzer: a JoinGroup listing "range" twice counted two votes for its
    one member, so completing the join raised in a timer and no answer ever came."""
    body = {"group_id": "dup-protocols", "session_timeout": 10000, "rebalance_timeout": 10000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"\x00\x01"}] * 2}
    first = raw.request(11, 5, body)
    assert int(first.error_code) == 79  # MEMBER_ID_REQUIRED
    raw.sock.settimeout(30)
    joined = raw.request(11, 5, {**body, "member_id": first.member_id}, correlation_id=2)
    assert int(joined.error_code) == 0 and joined.protocol_name == "range"
    healthy(broker)
    assert "Traceback" not in broker.logs()


# ---- found by the grammar-based fuzzer (tests/fuzz/generated.py) -----------------------

def test_a_zero_topic_id_is_an_unknown_topic_id_not_a_crash(broker, raw):
    """Produce v13 and OffsetCommit/OffsetFetch v10 name topics by id only; an all-zero id
    (kio's None) once made their handlers fail and close the connection."""
    produce = raw.request(0, 13, {
        "transactional_id": None, "acks": 1, "timeout": 1000, "topic_data": [
            {"topic_id": None, "partition_data": [
                {"index": 0, "records": build_batch([(None, b"v", [], 0)])}]}]})
    assert int(produce.responses[0].partition_responses[0].error_code) == 100
    commit = raw.request(8, 10, {
        "group_id": "zero-id", "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [
            {"topic_id": None, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": None}]}]})
    assert int(commit.topics[0].partitions[0].error_code) == 100
    fetched = raw.request(9, 10, {"groups": [
        {"group_id": "zero-id", "member_id": None, "member_epoch": -1,
         "topics": [{"topic_id": None, "partition_indexes": [0]}]}],
        "require_stable": False})
    # Produce and OffsetCommit answer as Kafka 4.3.1 does (UNKNOWN_TOPIC_ID); an
    # unknown id has no committed offsets to list.
    assert int(fetched.groups[0].error_code) == 0 and fetched.groups[0].topics == ()
    healthy(broker)


def test_a_quota_entity_with_a_repeated_type_is_refused(broker, raw):
    resp = raw.request(49, 1, {"validate_only": False, "entries": [
        {"entity": [{"entity_type": "user", "entity_name": None},
                    {"entity_type": "user", "entity_name": "a"}],
         "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False}]}]})
    assert int(resp.entries[0].error_code) == 42
    healthy(broker)
