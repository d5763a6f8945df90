"""Group config validation: Kafka's messages (taken from its GroupConfig.validate with
default broker bounds; the range messages are Kafka 4.4.0's, checked against the
reference) and the effective values."""

from __future__ import annotations

import pytest

from headwater.config import BrokerConfig
from headwater.group.group_configs import GroupConfigError, effective, validate

BROKER = BrokerConfig({})

KAFKA_ANSWERS = {
    ("share.auto.offset.reset", "bogus"): "Invalid value bogus for configuration "
    "share.auto.offset.reset: Invalid value `bogus` for configuration share.auto.offset.reset."
    " The value must be either 'earliest', 'latest' or of the format "
    "'by_duration:<PnDTnHnMn.nS>'.",
    ("share.auto.offset.reset", "by_duration:PT1H"): None,
    ("share.auto.offset.reset", "by_duration:-PT1H"): "Invalid value by_duration:-PT1H",
    ("share.auto.offset.reset", "EARLIEST"): "Invalid value EARLIEST",
    ("share.record.lock.duration.ms", "999"): "Invalid value 999 for configuration "
    "share.record.lock.duration.ms: Value must be at least 1000",
    ("share.record.lock.duration.ms", "1000"): "share.record.lock.duration.ms must be in "
    "the range 15000 to 60000 inclusive.",
    ("share.record.lock.duration.ms", "70000"): "share.record.lock.duration.ms must be in "
    "the range 15000 to 60000 inclusive.",
    ("share.record.lock.duration.ms", "abc"): "Invalid value abc for configuration "
    "share.record.lock.duration.ms: Not a number of type INT",
    ("share.delivery.count.limit", "1"): "Invalid value 1 for configuration "
    "share.delivery.count.limit: Value must be at least 2",
    ("share.delivery.count.limit", "11"): "share.delivery.count.limit must be in the range "
    "2 to 10 inclusive.",
    ("share.delivery.count.limit", "10"): None,
    ("share.partition.max.record.locks", "99"): "Invalid value 99 for configuration "
    "share.partition.max.record.locks: Value must be at least 100",
    ("share.partition.max.record.locks", "5000"): "share.partition.max.record.locks must be "
    "in the range 100 to 4000 inclusive.",
    ("share.session.timeout.ms", "1000"): "share.session.timeout.ms must be in the range "
    "45000 to 60000 inclusive.",
    ("share.session.timeout.ms", "50000"): None,
    ("share.heartbeat.interval.ms", "4000"): "share.heartbeat.interval.ms must be in the "
    "range 5000 to 15000 inclusive.",
    ("share.heartbeat.interval.ms", "16000"): "share.heartbeat.interval.ms must be in the "
    "range 5000 to 15000 inclusive.",
    ("share.assignment.interval.ms", "20000"): "share.assignment.interval.ms must be in the "
    "range 0 to 15000 inclusive.",
    ("share.isolation.level", "READ_COMMITTED"): "Invalid value READ_COMMITTED for "
    "configuration share.isolation.level: String must be one of: read_committed, "
    "read_uncommitted",
    ("share.renew.acknowledge.enable", "maybe"): "Invalid value maybe for configuration "
    "share.renew.acknowledge.enable: Expected value to be either true or false",
    ("share.renew.acknowledge.enable", "TRUE"): None,
    ("share.unknown", "1"): "Unknown group config name: share.unknown",
    ("share.session.timeout.ms", ""): "Invalid value  for configuration "
    "share.session.timeout.ms: Not a number of type INT",
}


@pytest.mark.parametrize("key,value", list(KAFKA_ANSWERS))
def test_kafkas_answers(key: str, value: str) -> None:
    expected = KAFKA_ANSWERS[(key, value)]
    if expected is None:
        validate({key: value}, BROKER)
        return
    with pytest.raises(GroupConfigError) as err:
        validate({key: value}, BROKER)
    assert str(err.value).startswith(expected)


def test_session_must_exceed_heartbeat_and_broker_bounds_move() -> None:
    with pytest.raises(GroupConfigError, match="share.session.timeout.ms must be greater "
                       "than share.heartbeat.interval.ms"):
        validate({"share.session.timeout.ms": "46000", "share.heartbeat.interval.ms": "50000"},
                 BrokerConfig({"group.share.min.session.timeout.ms": "1000",
                               "group.share.max.heartbeat.interval.ms": "60000"}))
    validate({"share.delivery.count.limit": "20"},
             BrokerConfig({"group.share.max.delivery.count.limit": "20"}))


def test_effective_values_prefer_the_group_then_the_broker() -> None:
    broker = BrokerConfig({"group.share.record.lock.duration.ms": "20000"})
    values = effective({"share.auto.offset.reset": "earliest"}, broker)
    assert values["share.auto.offset.reset"] == "earliest"
    assert values["share.record.lock.duration.ms"] == "20000"
    assert values["share.delivery.count.limit"] == "5"
    assert values["share.isolation.level"] == "read_uncommitted"


# Kafka 4.4 (trunk GroupConfig, KIP-1191): only `__` is refused when set; the other topic
# rules apply when a dead letter is written (headwater/share/dead_letter.py).
DLQ_ANSWERS = {
    ("errors.deadletterqueue.topic.name", "__consumer_offsets"):
        "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'",
    ("errors.deadletterqueue.topic.name", "orders.dead"): None,
    ("errors.deadletterqueue.topic.name", ""): None,
    ("errors.deadletterqueue.copy.record.enable", "yes"): "Invalid value yes for "
    "configuration errors.deadletterqueue.copy.record.enable: Expected value to be either "
    "true or false",
    ("errors.deadletterqueue.copy.record.enable", "true"): None,
}


@pytest.mark.parametrize("key,value", list(DLQ_ANSWERS))
def test_dead_letter_configs(key: str, value: str) -> None:
    expected = DLQ_ANSWERS[(key, value)]
    if expected is None:
        validate({key: value}, BROKER)
    else:
        with pytest.raises(GroupConfigError) as err:
            validate({key: value}, BROKER)
        assert str(err.value) == expected
    values = effective({}, BROKER)
    assert values["errors.deadletterqueue.topic.name"] == ""
    assert values["errors.deadletterqueue.copy.record.enable"] == "false"


def test_streams_group_configs_and_their_bounds() -> None:
    """Kafka 4.4's streams.* group configs: standby and warm-up replicas bounded by the
    broker's max, the task offset interval by its min, the recovery lag a LONG."""
    validate({"streams.num.standby.replicas": "2", "streams.num.warmup.replicas": "20",
              "streams.acceptable.recovery.lag": str(2**40),
              "streams.task.offset.interval.ms": "15000",
              "streams.session.timeout.ms": "50000"}, BROKER)
    for key, value, message in [
            ("streams.num.standby.replicas", "3",
             "streams.num.standby.replicas must be in the range 0 to 2 inclusive."),
            ("streams.num.warmup.replicas", "21",
             "streams.num.warmup.replicas must be in the range 0 to 20 inclusive."),
            ("streams.task.offset.interval.ms", "1000",
             "streams.task.offset.interval.ms must be in the range 15000 to "
             "9223372036854775807 inclusive."),
            ("streams.session.timeout.ms", "30000",
             "streams.session.timeout.ms must be in the range 45000 to 60000 inclusive.")]:
        with pytest.raises(GroupConfigError) as err:
            validate({key: value}, BROKER)
        assert str(err.value) == message
    with pytest.raises(GroupConfigError, match="Not a number of type LONG"):
        validate({"streams.acceptable.recovery.lag": "lots"}, BROKER)
