"""StreamsGroupHeartbeat (88) and StreamsGroupDescribe (89) v0 and v1 (KIP-1331, the v1
schemas in wire/schemas.py): one handler dict encoded for each version and read back, as
Kafka 4.4 answers them (tests/integration/test_kafka_44_apis.py compares with Kafka)."""

from __future__ import annotations

import io
from typing import Any

from kio.serial import entity_reader

from headwater.api import features
from headwater.api.streams_groups import to_response
from headwater.group.streams.operations import StreamsHeartbeatResponse
from headwater.wire.codec import encode_response, response_class

# A group's effective streams.* configs (GroupCoordinator.streams_group_config).
CONFIG = {"streams.acceptable.recovery.lag": "12345", "streams.task.offset.interval.ms": "7000"}


def answered(api_key: int, version: int, data: dict[str, Any]) -> Any:
    """`data` as the broker writes it for `version`, read back."""
    out = io.BytesIO()
    encode_response(api_key, version, data, out)
    result = entity_reader(response_class(api_key, version))(out.getvalue(), 0)
    return result[0] if isinstance(result, tuple) else result


def test_heartbeat_lag_and_topology_description_per_version() -> None:
    """v1: the lag as the int64 field, the topology description never wanted; v0: its
    int32 field left at 0 (Kafka 4.4 sets only v1's)."""
    joined = StreamsHeartbeatResponse(member_id="m", member_epoch=1,
                                      heartbeat_interval_ms=5000, status=((5, "delayed"),))
    v1 = answered(88, 1, to_response(joined, CONFIG, 1))
    assert (v1.acceptable_recovery_lag, v1.topology_description_required) == (12345, False)
    assert (v1.member_epoch, v1.task_offset_interval.total_seconds()) == (1, 7)
    assert [(s.status_code, s.status_detail) for s in v1.status] == [(5, "delayed")]
    v0 = answered(88, 0, to_response(joined, CONFIG, 0))
    assert (v0.acceptable_recovery_lag, v0.task_offset_interval.total_seconds()) == (0, 7)
    assert not hasattr(v0, "topology_description_required")


def test_heartbeat_error_and_leave_answer_the_defaults() -> None:
    """An error and a member leaving: no intervals, v1's lag -1, an empty status list
    (not null), as Kafka's error and leave responses."""
    for resp in (StreamsHeartbeatResponse(25, "unknown"),
                 StreamsHeartbeatResponse(member_id="m", member_epoch=-1),
                 StreamsHeartbeatResponse(member_id="m", member_epoch=-2)):
        v1 = answered(88, 1, to_response(resp, CONFIG, 1))
        assert (v1.acceptable_recovery_lag, v1.task_offset_interval.total_seconds(),
                v1.status) == (-1, 0, ()), resp
        v0 = answered(88, 0, to_response(resp, CONFIG, 0))
        assert (v0.acceptable_recovery_lag, v0.task_offset_interval.total_seconds(),
                v0.status) == (0, 0, ()), resp


def test_refused_heartbeat_and_describe_keep_the_v1_defaults() -> None:
    """streams.version 0 refuses both APIs (UNSUPPORTED_VERSION): v1's lag is -1, the
    describe entries name no assignor and NOT_REQUESTED, as Kafka's error responses."""
    class Describe:
        group_ids = ("a",)

    v1 = answered(88, 1, features._refusal(88, None))
    assert (int(v1.error_code), v1.acceptable_recovery_lag) == (35, -1)
    assert answered(88, 0, features._refusal(88, None)).acceptable_recovery_lag == 0
    group, = answered(89, 1, features._refusal(89, Describe())).groups
    assert (int(group.error_code), group.assignor_name, group.topology_description_status,
            group.topology_description) == (35, None, 0, None)


def test_refused_topology_description_update_names_the_unsupported_version() -> None:
    """streams.version 0 refuses StreamsGroupTopologyDescriptionUpdate (93) too, with the
    error's own message (Kafka's getErrorResponse of UNSUPPORTED_VERSION)."""
    refused = answered(93, 0, features._refusal(93, None))
    assert (int(refused.error_code), refused.error_message) == (
        35, "The version of API is not supported.")
