"""The hand-written ShareFetch / ShareAcknowledge response encoders write exactly the
bytes kio's generic writer does, for every version we serve."""

from __future__ import annotations

import uuid

import pytest

from headwater.api.share_wire import (
    PartitionEntry,
    share_acknowledge_response,
    share_fetch_response,
)
from headwater.wire.codec import encode_response

T1, T2 = uuid.uuid4(), uuid.uuid4()
BIG = bytes(range(256)) * 200  # kept by reference (over 32 KiB)


class _Out:
    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, b: bytes) -> int:
        self.data += b
        return len(b)


def kio_bytes(api_key: int, version: int, response: dict) -> bytes:
    out = _Out()
    encode_response(api_key, version, response, out)
    return bytes(out.data)


def fetch_dict(lock_ms: int, topics: list) -> dict:
    return {"throttle_time": 0, "error_code": 0, "error_message": None,
            "acquisition_lock_timeout": lock_ms, "node_endpoints": (),
            "responses": [{"topic_id": tid, "partitions": [
                {"partition_index": p.index, "error_code": p.error_code,
                 "error_message": p.error_message,
                 "acknowledge_error_code": p.acknowledge_error_code,
                 "current_leader": {"leader_id": p.leader_id, "leader_epoch": p.leader_epoch},
                 "records": p.records,
                 "acquired_records": [{"first_offset": a, "last_offset": b,
                                       "delivery_count": c} for a, b, c in p.acquired]}
                for p in parts]} for tid, parts in topics]}


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("case", ["empty", "mixed", "big", "null topic id"])
def test_share_fetch_response_matches_kio(version: int, case: str) -> None:
    topics: list = {
        "empty": [],
        "mixed": [(T1, [PartitionEntry(0, leader_id=1, records=b"abc",
                                       acquired=[(0, 9, 1), (12, 12, 3)]),
                        PartitionEntry(3, error_code=100, error_message="nope",
                                       acknowledge_error_code=121, leader_id=1)]),
                  (T2, [PartitionEntry(7, leader_id=1, records=b"")])],
        "big": [(T1, [PartitionEntry(2, leader_id=0, records=BIG,
                                     acquired=[(5, 5000, 2)])])],
        "null topic id": [(None, [PartitionEntry(0, error_code=100)])],  # found by fuzzing
    }[case]
    ours = b"".join(share_fetch_response(0, None, 30_000, topics))
    assert ours == kio_bytes(78, version, fetch_dict(30_000, topics))


@pytest.mark.parametrize("version", [1, 2])
def test_share_acknowledge_response_matches_kio(version: int) -> None:
    topics = [(T1, [(0, 0, 1), (4, 121, 1)]), (T2, [(1, 3, 1)]), (None, [(0, 100, 1)])]
    ours = b"".join(share_acknowledge_response(version, 0, None, 15_000, topics))
    expected = kio_bytes(79, version, {
        "throttle_time": 0, "error_code": 0, "error_message": None,
        "acquisition_lock_timeout": 15_000, "node_endpoints": (),
        "responses": [{"topic_id": tid, "partitions": [
            {"partition_index": i, "error_code": c,
             "current_leader": {"leader_id": leader, "leader_epoch": 0}}
            for i, c, leader in parts]} for tid, parts in topics]})
    assert ours == expected


def test_large_records_are_not_copied() -> None:
    parts = share_fetch_response(0, None, 1, [(T1, [PartitionEntry(0, records=BIG)])])
    assert any(p is BIG for p in parts)
