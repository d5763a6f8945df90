"""No client request may leave the broker unable to start again.

Each test sends what a hostile or careless client could send, then restarts the broker
and checks it serves. Found by the fuzzing campaign (tests/fuzz) and by reading what
the requests can reach.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic


def create(bootstrap: str, *topics: NewTopic) -> dict[str, KafkaError | None]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    out = {}
    for name, future in admin.create_topics(list(topics), operation_timeout=20).items():
        try:
            future.result(30)
            out[name] = None
        except Exception as exc:  # noqa: BLE001  KafkaException carries the error
            out[name] = exc.args[0]
    return out


def produce_errors(bootstrap: str, topic: str, partitions: int) -> list[KafkaError | None]:
    results: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.send.max.retries": 0})
    for p in range(partitions):
        producer.produce(topic, b"\x00\x09junk", key=b"\x00\x01\x00", partition=p,
                         on_delivery=lambda err, msg: results.append(err))
    assert producer.flush(20) == 0
    return results


@pytest.mark.timeout(120)
def test_the_metadata_log_and_coordinator_logs_are_not_a_clients(broker_factory):
    broker = broker_factory()
    errors = create(broker.bootstrap, NewTopic("__cluster_metadata", 1, 1))
    assert errors["__cluster_metadata"].code() == KafkaError.INVALID_REQUEST
    assert "prohibited" in errors["__cluster_metadata"].str()
    for internal in ("__consumer_offsets", "__transaction_state", "__share_group_state"):
        errs = produce_errors(broker.bootstrap, internal, 3)
        assert [e.code() for e in errs] == [KafkaError.TOPIC_EXCEPTION] * 3
    broker.restart()
    assert create(broker.bootstrap, NewTopic("after-restart", 1, 1)) == {"after-restart": None}


@pytest.mark.timeout(120)
def test_partitions_past_the_brokers_capacity_are_refused_and_it_restarts(broker_factory):
    broker = broker_factory("--override", "headwater.max.partitions=180")
    # 150 internal partitions (__consumer_offsets, __transaction_state,
    # __share_group_state) are held already.
    errors = create(broker.bootstrap, NewTopic("fits", 20, 1), NewTopic("too-many", 20, 1))
    assert errors["fits"] is None
    assert errors["too-many"].code() == KafkaError.POLICY_VIOLATION
    assert "limit of 180" in errors["too-many"].str()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(Exception, match="limit of 180"):
        admin.create_partitions([NewPartitions("fits", 40)])["fits"].result(30)
    broker.restart()
    assert create(broker.bootstrap, NewTopic("small", 5, 1)) == {"small": None}


@pytest.mark.timeout(120)
def test_one_request_for_more_than_ten_thousand_partitions_is_refused_whole(broker_factory):
    broker = broker_factory("--override", "headwater.max.partitions=50000")
    errors = create(broker.bootstrap, NewTopic("huge-a", 10_000, 1), NewTopic("huge-b", 1, 1))
    for name in ("huge-a", "huge-b"):
        assert errors[name].code() == KafkaError.POLICY_VIOLATION
        assert errors[name].str() == "Unable to perform excessively large batch operation."


@pytest.mark.timeout(120)
def test_a_transaction_marker_cannot_reach_the_metadata_log(broker_factory):
    """WriteTxnMarkers names any topic; the metadata log has no topic and takes none (a
    COMMIT marker there once kept the broker from starting; found by the grammar-based
    fuzzer)."""
    from tests.support.wire import RawClient

    broker = broker_factory()
    client = RawClient("127.0.0.1", broker.port)
    try:
        resp = client.request(27, 1, {"markers": [{
            "producer_id": 1, "producer_epoch": 0, "transaction_result": True,
            "coordinator_epoch": 0,
            "topics": [{"name": "__cluster_metadata", "partition_indexes": [0]}]}]})
    finally:
        client.close()
    assert int(resp.markers[0].topics[0].partitions[0].error_code) == 3
    broker.restart()
    assert create(broker.bootstrap, NewTopic("after-marker", 1, 1)) == {"after-marker": None}


@pytest.mark.timeout(120)
def test_clients_cannot_read_or_trim_the_metadata_log(broker_factory):
    """DeleteRecords on `__cluster_metadata` once moved the metadata log's start, and the
    next start lost every topic created before it (found by the grammar-based fuzzer)."""
    from tests.support.wire import RawClient

    broker = broker_factory()
    assert create(broker.bootstrap, NewTopic("kept", 1, 1)) == {"kept": None}
    client = RawClient("127.0.0.1", broker.port)
    try:
        trimmed = client.request(21, 2, {"timeout": 1000, "topics": [
            {"name": "__cluster_metadata", "partitions": [
                {"partition_index": 0, "offset": -1}]}]})
        fetched = client.request(1, 12, {
            "cluster_id": None, "replica_id": -1, "replica_state": None, "max_wait": 0,
            "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": "__cluster_metadata", "topic_id": None, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}]})
    finally:
        client.close()
    assert int(trimmed.topics[0].partitions[0].error_code) == 3
    part = fetched.responses[0].partitions[0]
    assert int(part.error_code) == 3 and not part.records
    broker.restart()
    listed = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30)
    assert "kept" in listed.topics
