"""The bounds pre-pass: every length from the wire is checked before kio decodes.

A length kio cannot satisfy aborts the whole process inside kio's Rust reader, so these
tests decode in-process on purpose: if the guard let one through, pytest itself dies.
"""

from __future__ import annotations

import struct

import pytest

from headwater.wire.codec import build, decode_request
from headwater.wire.guard import MalformedRequest, body_checker
from headwater.wire.header import parse_request_header, skip_tagged_fields
from headwater.wire.schemas import load_request_schema
from tests.support.wire import encode_request

# Issue 16: a ListOffsets v7 frame whose topics array claims 2^32 - 2 entries.
KILLER = bytes.fromhex(
    "000000330002000700000005000772646b61666b6100ffffffff01ffffffff33363963"
    "020000000000000000fffffffffffffffe000000")


def every_schema() -> list[tuple[int, int]]:
    """Every request schema kio knows: a superset of what the broker serves."""
    found = []
    for key in range(100):
        for version in range(20):
            try:
                load_request_schema(key, version)
            except Exception:
                continue
            found.append((key, version))
    return found


def body_of(frame: bytes) -> tuple[int, int, bytes, int]:
    frame = frame[4:]
    header = parse_request_header(frame)
    pos = header.body_offset
    if load_request_schema(header.api_key, header.api_version).__flexible__:
        pos = skip_tagged_fields(frame, pos)
    return header.api_key, header.api_version, frame, pos


def test_the_issue_frame_is_refused_before_kio_sees_it():
    key, version, frame, pos = body_of(KILLER)
    with pytest.raises(MalformedRequest, match="topics array past the end"):
        decode_request(key, version, frame, pos)


@pytest.mark.parametrize("key,version", every_schema())
def test_every_served_schema_accepts_a_well_formed_request(key, version):
    """An all-defaults request (empty arrays, zero values) walks to the frame's end."""
    cls = load_request_schema(key, version)
    frame = encode_request(key, version, build(cls, {}))
    k, v, body, pos = body_of(frame)
    assert body_checker(k, v)(body, pos) == len(body)


@pytest.mark.parametrize("key,version", every_schema())
def test_every_truncation_is_refused_or_decodes(key, version):
    """Cutting a request anywhere never gets a length past the guard."""
    frame = encode_request(key, version, build(load_request_schema(key, version), {}))
    _, _, body, pos = body_of(frame)
    for cut in range(pos, len(body)):
        with pytest.raises(Exception):  # noqa: B017  MalformedRequest or kio's underflow
            decode_request(key, version, body[:cut], pos)


def test_huge_counts_in_every_position_of_a_produce():
    frame = encode_request(0, 9, {"transactional_id": None, "acks": 1, "timeout": 1000,
                                  "topic_data": [{"name": "t", "partition_data": [
                                      {"index": 0, "records": b"x" * 40}]}]})
    _, _, body, pos = body_of(frame)
    huge = b"\xff\xff\xff\xff\x0f"  # compact length 2^32 - 1
    for at in range(pos, len(body)):
        mutated = body[:at] + huge + body[at + 1:]
        try:
            decode_request(0, 9, mutated, pos)
        except Exception:
            pass  # refused; what matters is that the process is still here


def test_null_only_where_the_schema_allows_it():
    # ListOffsets v1 (legacy): replica id, then topics = null (-1): Kafka forbids it.
    body = struct.pack(">ii", -1, -1)
    with pytest.raises(MalformedRequest, match="topics"):
        decode_request(2, 1, body, 0)
    # Metadata v4: topics null means "all topics", allowed.
    assert decode_request(3, 4, struct.pack(">i?", -1, True), 0).topics is None
    # A legacy length below -1 is never valid.
    with pytest.raises(MalformedRequest, match="bad length"):
        decode_request(3, 4, struct.pack(">i?", -2, True), 0)


def fetch_v12_body() -> tuple[bytes, int]:
    """An empty Fetch v12 request's frame and where its body starts; the body ends with
    its (empty) top-level tagged-field section."""
    frame = encode_request(1, 12, {"replica_id": -1, "max_wait": 0, "min_bytes": 1,
                                   "max_bytes": 1, "isolation_level": 0, "session_id": 0,
                                   "session_epoch": -1, "topics": [],
                                   "forgotten_topics_data": [], "rack_id": ""})
    _, _, body, pos = body_of(frame)
    assert body.endswith(b"\x00")
    return body, pos


def test_known_tagged_field_is_checked_inside_its_own_size():
    # Fetch v12's tag 0 is cluster_id (a compact string). Declared size 2, but the
    # string inside claims 100 bytes.
    body, pos = fetch_v12_body()
    bad = body[:-1] + b"\x01" + b"\x00\x02" + b"\x65a" + b"x" * 200
    with pytest.raises(MalformedRequest, match="cluster_id runs past the end"):
        body_checker(1, 12)(bad, pos)


def _metadata_v12(topic_tags: bytes, top_tags: bytes) -> bytes:
    """MetadataRequest v12, one topic named "a", with the given tagged sections."""
    return (b"\x02" + bytes(16) + b"\x02a" + topic_tags  # topics: [topic id, name, tags]
            + b"\x01\x00" + top_tags)  # allow auto creation, authorized operations, tags


def test_unknown_tagged_fields_are_ignored_as_kip_482_asks():
    # kio raises KeyError on a tag it does not know; the guard strips them first, at the
    # top level and inside an array element, and decodes the rest unchanged.
    plain = decode_request(3, 12, _metadata_v12(b"\x00", b"\x00"), 0)
    unknown = bytes([2, 77, 3]) + b"xyz" + bytes([90, 0])  # tags 77 (3 bytes), 90 (empty)
    assert decode_request(3, 12, _metadata_v12(unknown, unknown), 0) == plain
    # ApiVersions v3: one unknown tag among none known.
    body = b"\x04abc\x041.0" + bytes([1, 99, 2]) + b"hi"
    assert decode_request(18, 3, body, 0).client_software_name == "abc"


def test_unknown_tags_next_to_a_known_one_keep_the_known_one():
    # Fetch v12's top-level tag 0 is cluster_id (known to kio); tags 5 and 200 are not.
    body, pos = fetch_v12_body()
    section = (bytes([3]) + bytes([0, 3, 3]) + b"c1" + bytes([5, 1]) + b"!"
               + bytes([0xC8, 0x01, 0]))
    got = decode_request(1, 12, body[:-1] + section, pos)
    assert got.cluster_id == "c1"
    assert got == decode_request(1, 12, body[:-1] + bytes([1, 0, 3, 3]) + b"c1", pos)
