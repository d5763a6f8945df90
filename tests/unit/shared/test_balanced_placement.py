"""A topic is placed evenly over the live brokers (`cluster.balanced`): every broker leads
its share, as Kafka's round-robin assignment does. A hash alone put 6, 3 and 3 of 12
partitions on three brokers, and under load the busiest broker held the cluster to two
thirds of what three carry."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from headwater.shared.cluster import BrokerInfo, ClusterView, balanced, rendezvous

TOPICS = [uuid.UUID(int=n) for n in range(1, 201)]


@pytest.mark.parametrize(("partitions", "brokers"), [(12, 3), (6, 3), (4, 3), (2, 3),
                                                     (1, 3), (50, 4), (7, 2), (100, 7)])
def test_every_broker_leads_its_share_of_every_topic(partitions: int, brokers: int) -> None:
    live = tuple(range(1, brokers + 1))
    for topic_id in TOPICS:
        loads = Counter(balanced(topic_id, partitions, live))
        assert set(loads) <= set(live)
        assert sum(loads.values()) == partitions
        floor = partitions // brokers
        assert all(floor <= loads[n] <= floor + 1 for n in live), loads


def test_a_hash_alone_is_uneven_where_balanced_is_not() -> None:
    """The reason for it: twelve partitions on three brokers by rendezvous alone."""
    uneven = sum(1 for t in TOPICS
                 if max(Counter(rendezvous(f"{t}:{p}", [1, 2, 3]) for p in range(12))
                        .values()) > 4)
    assert uneven > len(TOPICS) // 2
    assert all(max(Counter(balanced(t, 12, (1, 2, 3))).values()) == 4 for t in TOPICS)


def test_a_brokers_death_moves_its_partitions_and_few_others() -> None:
    moved_others = 0
    for topic_id in TOPICS:
        before = balanced(topic_id, 12, (1, 2, 3))
        after = balanced(topic_id, 12, (1, 2))
        assert all(after[p] != 3 for p in range(12))
        moved_others += sum(1 for p in range(12) if before[p] != 3 and after[p] != before[p])
    # each topic's 8 partitions on the survivors stay, but for a few pushed by the room
    # the dead broker's partitions take
    assert moved_others <= len(TOPICS) * 8 * 15 // 100, moved_others  # 105 of 1,600


def test_the_same_on_every_broker_and_each_topic_its_own() -> None:
    a, b = TOPICS[0], TOPICS[1]
    assert balanced(a, 12, (1, 2, 3)) == balanced(a, 12, (1, 2, 3))
    assert {balanced(t, 12, (1, 2, 3)) for t in TOPICS[:20]} != {balanced(a, 12, (1, 2, 3))}
    assert balanced(b, 3, (1, 2, 3)) != balanced(a, 3, (1, 2, 3)) or \
        balanced(TOPICS[2], 3, (1, 2, 3)) != balanced(a, 3, (1, 2, 3))


def test_the_view_places_evenly_once_the_topic_size_is_known() -> None:
    topic_id = TOPICS[0]
    view = ClusterView(brokers={n: BrokerInfo(n, "127.0.0.1", 9000 + n) for n in (1, 2, 3)})
    assert [view.owner_of(topic_id, p) for p in range(12)] == \
        [rendezvous(f"{topic_id}:{p}", [1, 2, 3]) for p in range(12)]  # size unknown
    view.sizes = lambda t: 12 if t == topic_id else None
    assert tuple(view.owner_of(topic_id, p) for p in range(12)) == \
        balanced(topic_id, 12, (1, 2, 3))
    assert view.owner_of(topic_id, 12) == rendezvous(f"{topic_id}:12", [1, 2, 3])
    assert ClusterView(sizes=lambda _t: 12).owner_of(topic_id, 0) == -1  # none live
