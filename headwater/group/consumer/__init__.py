"""KIP-848 consumer groups (ConsumerGroupHeartbeat, ConsumerGroupDescribe): the broker
computes the assignment and each member converges to its slice, heartbeat by heartbeat.

`group` is the group as replaying its records builds it (state only, no decisions);
`operations` the heartbeat, timers and describe that decide and return records;
`reconciliation` one member's move towards its target; `assignors` the server-side
assignors ("uniform", "range"), which only consumer groups use.
"""
