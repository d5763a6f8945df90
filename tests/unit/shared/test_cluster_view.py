"""`ClusterView.leader`: the leader epoch Metadata reports for a partition never goes
backwards while its lease changes hands, whatever each broker's view of the heartbeats.
Kafka's clients ignore a Metadata answer whose leader epoch is older than the one they
cached, so one answer too high strands them on the wrong broker."""

from __future__ import annotations

import uuid

from headwater.shared.cluster import BrokerInfo, ClusterView
from headwater.shared.leases import partition_resource

TOPIC = uuid.UUID(int=7)


def view(live: list[int], lease: tuple[int, int] | None) -> ClusterView:
    v = ClusterView(brokers={n: BrokerInfo(n, "127.0.0.1", 9000 + n) for n in live})
    if lease is not None:
        v.leases[partition_resource(TOPIC, 0)] = lease
    return v


def test_a_held_lease_reports_its_holder_at_the_lease_epoch_less_one() -> None:
    assert view([1, 2, 3], (2, 5)).leader(TOPIC, 0) == (2, 4)


def test_a_free_lease_reports_the_next_owner_at_the_epoch_it_will_get() -> None:
    v = view([1, 2, 3], (-1, 5))  # expired: the next taker gets epoch 6, leader epoch 5
    assert v.leader(TOPIC, 0) == (v.owner_of(TOPIC, 0), 5)
    assert view([1, 2, 3], None).leader(TOPIC, 0)[1] == 0  # never taken: epoch 1 next


def test_a_lease_held_by_a_broker_whose_heartbeat_is_missed_reports_no_leader() -> None:
    # the holder's heartbeat is late (a database outage, a stall) but its lease is live:
    # it may renew it and go on answering epoch 4, so nothing above 4 may be reported
    assert view([1, 3], (2, 5)).leader(TOPIC, 0) == (-1, 4)


def test_epochs_seen_through_a_missed_heartbeat_and_a_takeover_never_decrease() -> None:
    views = [view([1, 2, 3], (1, 2)),  # broker 1 holds epoch 2
             view([2, 3], (1, 2)),  # its heartbeat missed, lease still live
             view([1, 2, 3], (1, 2)),  # heartbeat back, lease renewed
             view([2, 3], (-1, 2)),  # lease expired
             view([2, 3], (3, 3))]  # taken by broker 3
    epochs = [v.leader(TOPIC, 0)[1] for v in views]
    assert epochs == sorted(epochs), epochs
