"""What KIP-848 consumer groups and KIP-932 share groups share, as Kafka's
`org.apache.kafka.coordinator.group.modern` package does: the "modern" group protocol,
where the broker computes a target assignment and members heartbeat towards it.

`group` is the state: `ModernGroup` and `ModernGroupMember` (group epoch, target
assignment epoch, members, target assignment, subscribed topics, metadata hash; the
records both kinds write alike and their replay, offsets validation against member
epochs, tombstones). `operations` is `ModernGroupManager`, the heartbeat steps both
kinds take alike (request string checks, the member epoch check that fences a stale
member, leaving and fencing, the group epoch bump, target records, session timers,
describe). `assignment` is the assignments both keep. consumer/ and share/ derive
from these, so a rule both follow is written once.
"""
