"""Streams groups (KIP-1071): Kafka Streams' own rebalance protocol, the third kind of
group Kafka 4.4 serves beside consumer and share groups.

A streams group's members are Kafka Streams clients; the broker holds the application's
topology (subtopologies and their source, repartition and changelog topics) and hands
out tasks (a subtopology and a partition) as active, standby and warm-up tasks.
`assignor` is the sticky task assignor (a pure function of the members and the
topology).
"""
