"""What KIP-848 consumer groups and KIP-932 share groups share, as Kafka's
`org.apache.kafka.coordinator.group.modern` package does: the "modern" group protocol,
where the broker computes a target assignment and members heartbeat towards it.

`group` is `ModernGroup` and `ModernGroupMember` (group epoch, target assignment epoch,
members, target assignment, subscribed topics, metadata hash; the records both kinds
write alike, the replay of them, offsets validation against member epochs, tombstones);
`assignment` the assignments both keep. consumer/ and share/ derive their groups from
these, so a rule both follow is written once.
"""
