"""The group coordinator: `__consumer_offsets` and the groups whose state it holds.

One package per kind of group, each with its state (what replaying its records builds)
apart from its operations (what decides and returns records):

* `classic/`: JoinGroup/SyncGroup groups;
* `consumer/`: KIP-848 consumer groups (ConsumerGroupHeartbeat);
* `share/`: KIP-932 share groups (ShareGroupHeartbeat, share-group administration);
* `modern/`: what consumer and share groups share (Kafka's ModernGroup): the group
  and member base classes and the heartbeat steps both take.

At the top, what all kinds share: `base` (the `Group` protocol offsets and the admin
APIs use), `offsets`, `records` (the record types), `shard` (one partition's groups),
`config` and `group_configs` (settings), `coordinator` (the service on the runtime).
Error codes are kio's `ErrorCode` members (imported as `E`), as everywhere in headwater.
"""
