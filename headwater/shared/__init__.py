"""The shared log: a second implementation of the storage seam (`headwater.storage`)
for several brokers, with PostgreSQL ordering every append and holding the cluster's
state and leases, and S3-API object storage holding the batches' bytes (KIP-1150's
diskless topics; see docs/shared-log.md).

Modules: `settings` (the keys), `database` and `schema` (the pool and headwater's own
migrations), `objects` (the object store), `leases`, `sequencer` (the commit of a window)
and `store` (`SharedStore`, the `PartitionStore`).
"""
