"""Placement on the shared log: a partition is this broker's when its rendezvous owner
among the live brokers is this broker (or, for topics placed with the controller, while
this broker leads); and the followers of a topic are told when a partition is taken here
and when it is lost."""

from __future__ import annotations

import uuid

from headwater.shared.cluster import BrokerInfo, ClusterView
from headwater.shared.placement import Key, Ownership, Placement

TOPIC_ID = uuid.UUID(int=7)


def _placement(node_id: int, *, leads: list[bool] | None = None,
               known: set[Key] | None = None) -> Placement:
    known = {("orders", p) for p in range(32)} | {("__consumer_offsets", 0)} \
        if known is None else known
    lead = leads if leads is not None else [False]
    placement = Placement(node_id, BrokerInfo(node_id, "127.0.0.1", 9092 + node_id),
                          lease_ms=10_000, listed_ms=9_000,
                          topic_id=lambda key: TOPIC_ID if key in known else None,
                          with_controller=("__consumer_offsets",),
                          controller_active=lambda: lead[0])
    placement.view = ClusterView(brokers={n: BrokerInfo(n, "127.0.0.1", 9092 + n)
                                          for n in (1, 2, 3)})
    return placement


def test_every_partition_is_placed_on_exactly_one_live_broker() -> None:
    brokers = [_placement(n) for n in (1, 2, 3)]
    for partition in range(32):
        owners = [p.node_id for p in brokers if p.should_own(("orders", partition))]
        assert len(owners) == 1
    owned = {p.node_id for p in brokers for partition in range(32)
             if p.should_own(("orders", partition))}
    assert owned == {1, 2, 3}  # 32 partitions spread over the three


def test_a_partition_unknown_here_is_not_owned() -> None:
    placement = _placement(1, known=set())
    assert not any(placement.should_own(("orders", p)) for p in range(32))


def test_topics_placed_with_the_controller_follow_its_lease() -> None:
    leads = [False]
    placement = _placement(2, leads=leads)
    assert not placement.should_own(("__consumer_offsets", 0))
    assert placement.owner_name("__consumer_offsets", TOPIC_ID, 0) == "the controller"
    leads[0] = True
    assert placement.should_own(("__consumer_offsets", 0))


def test_a_view_is_fresh_only_once_read_and_the_broker_must_see_itself() -> None:
    placement = _placement(4)
    assert not placement.fresh()  # never read from PostgreSQL
    assert not placement.sees_itself()  # broker 4's heartbeat is not in the view
    assert _placement(1).sees_itself()


def test_followers_are_told_of_takes_and_losses_until_they_unfollow() -> None:
    ownership = Ownership()
    calls: list[tuple[str, int]] = []
    unfollow = ownership.follow("__consumer_offsets", lambda p: calls.append(("taken", p)),
                                lambda p: calls.append(("lost", p)),
                                held=[("__consumer_offsets", 3), ("orders", 1)])
    ownership.taken(("__consumer_offsets", 5))
    ownership.taken(("orders", 5))  # nobody follows orders
    ownership.lost(("__consumer_offsets", 3))
    unfollow()
    unfollow()  # twice is harmless
    ownership.lost(("__consumer_offsets", 5))
    assert calls == [("taken", 3), ("taken", 5), ("lost", 3)]
