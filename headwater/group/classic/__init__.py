"""Classic groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): the protocol every
Kafka client spoke before KIP-848, kept for the clients that still speak it.

`states` is the state machine (Empty, PreparingRebalance, CompletingRebalance, Stable,
Dead) as one transition table; `member` a member and its parked requests; `operations`
the group and the manager whose operations move it through a generation. The state
is apart from the operations so that what a replay rebuilds can be read on its own.
"""
