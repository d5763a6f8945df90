"""KIP-932 share groups (ShareGroupHeartbeat, ShareGroupDescribe and the share-group
administration records): members share partitions, so there is no reconciliation.

`group` is the group as replaying its records builds it (state only); `operations` the
heartbeat, timers and describe; `assignor` the "simple" assignor; `admin` the
`__consumer_offsets` side of altering and deleting share-group state. (The share
partitions themselves, and the share coordinator, are `headwater.share`.)
"""
