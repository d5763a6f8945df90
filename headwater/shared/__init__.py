"""The shared log: a second implementation of the storage seam (`headwater.storage`)
for several brokers, with PostgreSQL ordering every append and holding the cluster's
state and leases, and S3-API object storage holding the batches' bytes (KIP-1150's
diskless topics; see docs/shared-log.md).

Built so far: the settings (`settings`), the database connection and its versioned
schema (`database`, `schema`) and the object store (`objects`).
"""
