import datetime
import io
import struct

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from headwater.wire.codec import build, encode_response
from headwater.wire.header import HeaderError, parse_request_header, skip_tagged_fields
from tests.support.wire import encode_request


def test_header_round_trip_v2_with_tagged_fields():
    frame = encode_request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False},
                           correlation_id=77, client_id="abc")[4:]
    header = parse_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (3, 12, 77)
    assert header.client_id == "abc"
    assert skip_tagged_fields(frame, header.body_offset) == header.body_offset + 1


def test_null_client_id_and_truncated_header():
    frame = struct.pack(">hhih", 18, 0, 5, -1)
    assert parse_request_header(frame).client_id is None
    with pytest.raises(HeaderError):
        parse_request_header(frame[:5])
    with pytest.raises(HeaderError):
        parse_request_header(struct.pack(">hhih", 18, 0, 5, 50) + b"short")


def test_build_fills_version_specific_fields():
    """One dict serves old and new versions: names absent in a version are dropped."""
    data = {"throttle_time": 5, "error_code": 0, "session_id": 9, "responses": [
        {"topic": "t", "topic_id": None, "partitions": [
            {"partition_index": 0, "error_code": 3, "high_watermark": 7,
             "log_start_offset": 1, "records": b"", "aborted_transactions": None}]}]}
    for version in (4, 11, 16):
        cls = load_response_schema(1, version)
        out = io.BytesIO()
        encode_response(1, version, data, out)
        parsed = entity_reader(cls)(out.getvalue(), 0)[0]
        part = parsed.responses[0].partitions[0]
        assert part.error_code == ErrorCode.unknown_topic_or_partition
        assert part.high_watermark == 7
        assert parsed.throttle_time == datetime.timedelta(milliseconds=5)
    obj = build(load_response_schema(1, 4), data)
    assert not hasattr(obj, "session_id")
