"""Group-level share limits (KIP-1240): `share.delivery.count.limit` and
`share.partition.max.record.locks` per group. Their validation against the broker's
`group.share.*` bounds is compared with Kafka 4.3.1 in test_share_groups_vs_kafka.py;
here: a change reaches share-partitions already loaded, as Kafka re-reads group configs."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType

from tests.integration.test_share_admin import offsets
from tests.integration.test_share_consumer import (
    consumer,
    produce_batches,
    set_group_configs,
)
from tests.integration.test_share_dead_letter import run_consumer
from tests.integration.test_share_fetch import make_topic

pytestmark = pytest.mark.timeout(120)


def test_a_lower_delivery_limit_applies_to_a_loaded_share_partition(broker, topic_name):
    group = f"lim-{uuid.uuid4().hex[:6]}"
    make_topic(broker, topic_name)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    produce_batches(broker.bootstrap, topic_name, batches=1, per_batch=1)
    release = lambda _v, _c: AcknowledgeType.RELEASE  # noqa: E731
    # Default limit 5: two deliveries, both released; the leader stays loaded.
    assert run_consumer(broker.bootstrap, group, topic_name, release, deliveries=2) == [
        (0, 1), (0, 2)]
    assert offsets(broker.bootstrap, group) == {(topic_name, 0): (0, 1)}
    set_group_configs(broker.bootstrap, group, share_delivery_count_limit="3")
    # The third delivery is now the last: released, it is archived, not redelivered.
    assert run_consumer(broker.bootstrap, group, topic_name, release, deliveries=1) == [(0, 3)]
    assert offsets(broker.bootstrap, group) == {(topic_name, 0): (1, 0)}


def test_a_lower_record_lock_cap_applies_to_a_loaded_share_partition(broker, topic_name):
    group = f"lim-{uuid.uuid4().hex[:6]}"
    make_topic(broker, topic_name)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    produce_batches(broker.bootstrap, topic_name, batches=1, per_batch=1)
    accept = lambda _v, _c: AcknowledgeType.ACCEPT  # noqa: E731
    assert run_consumer(broker.bootstrap, group, topic_name, accept, deliveries=1) == [(0, 1)]
    set_group_configs(broker.bootstrap, group, share_partition_max_record_locks="100")
    produce_batches(broker.bootstrap, topic_name, batches=15, per_batch=10, start=1)
    # One fetch acquires at most 100 new records (the window's cap, in whole batches),
    # however many the client asks for; the rest come once those are acknowledged.
    c = consumer(broker.bootstrap, group, topic_name,
                 **{"share.acknowledgement.mode": "explicit", "max.poll.records": 500})
    try:
        first: list = []
        deadline = time.monotonic() + 30
        while not first and time.monotonic() < deadline:
            first = [m for m in c.poll(1.0) if m.error() is None]
        assert len(first) == 100
        for m in first:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync(15)
        rest: list = []
        while len(rest) < 50 and time.monotonic() < deadline + 30:
            rest += [m for m in c.poll(1.0) if m.error() is None]
        assert sorted(int(m.value()) for m in first + rest) == list(range(1, 151))
    finally:
        c.close()
