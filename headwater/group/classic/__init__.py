"""Classic groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): the protocol every
Kafka client spoke before KIP-848, kept for the clients that still speak it.

`group` is the group's state (members, generation, protocol, leader) and its durable
view, the GroupMetadata record; `member` a member and its parked requests; `states`
the state machine (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead) as one
transition table; `operations` the manager whose operations and timers move a group
through its generations. State apart from operations: what a replay rebuilds reads
on its own, and the protocol's rules read without the bookkeeping.
"""
