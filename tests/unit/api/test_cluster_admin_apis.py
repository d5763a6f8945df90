"""The pure parts of the admin APIs `kafka-client-metrics`, `kafka-reassign-partitions`,
`kafka-delegation-tokens` and `kafka-replica-verification` need (their tool runs against
Kafka and headwater are in tests/integration/test_kafka_tools_more.py)."""

import pytest
from kio.schema.errors import ErrorCode

from headwater import client_metrics
from headwater.api.delegation_tokens import refusal
from headwater.api.reassignments import assignment_error
from headwater.wire.dispatch import Dispatcher, RequestContext


def test_client_metrics_validate_as_kafka():
    client_metrics.validate("cm", {"metrics": "org.apache.kafka.", "interval.ms": "100",
                                   "match": "client_id=a.*,client_software_name=java"})
    cases = [
        ("", {}, ErrorCode.invalid_request, "Subscription name can't be empty"),
        ("cm", {"x": "1"}, ErrorCode.invalid_request,
         "Unknown client metrics configuration: x"),
        ("cm", {"interval.ms": "5"}, ErrorCode.invalid_request,
         "Invalid value 5 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
        ("cm", {"match": "foo=bar"}, ErrorCode.invalid_config,
         "Illegal client matching pattern: foo=bar"),
        ("cm", {"match": "client_id"}, ErrorCode.invalid_config,
         "Illegal client matching pattern: client_id"),
        ("cm", {"match": "client_id=("}, ErrorCode.invalid_config,
         "Illegal client matching pattern: client_id=("),
    ]
    for name, configs, code, message in cases:
        with pytest.raises(client_metrics.ClientMetricsError) as err:
            client_metrics.validate(name, configs)
        assert (err.value.code, str(err.value)) == (code, message)


def test_assignment_error_messages():
    assert assignment_error((1,), (1,), {1}, False) is None
    assert assignment_error((), (1,), {1}, False) == (
        "The manual partition assignment includes an empty replica list.")
    assert assignment_error((2,), (1,), {1}, False) == (
        "The manual partition assignment includes broker 2, but no such broker is "
        "registered.")
    assert assignment_error((1, 1), (1,), {1}, True) == (
        "The manual partition assignment includes the broker 1 more than once.")
    assert assignment_error((1, 2), (1,), {1, 2}, False) == (
        "The replication factor is changed from 1 to 2")


def test_delegation_token_refusal_by_listener():
    ctx = RequestContext(38, 3, 1, None, "127.0.0.1", 1)
    assert refusal("PLAINTEXT", ctx) == ErrorCode.delegation_token_request_not_allowed
    assert refusal("SSL", ctx) == ErrorCode.delegation_token_request_not_allowed
    assert refusal("SASL_PLAINTEXT", ctx) == ErrorCode.delegation_token_auth_disabled
    ctx.attrs["principal"] = "User:CN=client"
    assert refusal("SSL", ctx) == ErrorCode.delegation_token_auth_disabled


def test_dispatcher_serves_an_unadvertised_version():
    """Fetch v18: served (kafka-replica-verification sends it) but not advertised."""
    d = Dispatcher()
    d.register(1, 4, 17, lambda ctx, req: None, accepted_max=18)
    d.register(2, 1, 10, lambda ctx, req: None)
    fetch, offsets = d.get(1), d.get(2)
    assert fetch is not None and offsets is not None
    assert fetch.max_version == 17 and fetch.serves(18) and not fetch.serves(19)
    assert offsets.serves(10) and not offsets.serves(11) and not offsets.serves(0)
