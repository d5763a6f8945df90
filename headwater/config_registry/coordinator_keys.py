"""Broker keys of the coordinators (group, transaction, share) and of the shared log."""

from __future__ import annotations

from .model import Setting as S
from .model import Type

BOOLEAN, INT, LONG, STRING, LIST = Type.BOOLEAN, Type.INT, Type.LONG, Type.STRING, Type.LIST
PASSWORD = Type.PASSWORD

INT_MAX = "2147483647"

COORDINATORS: tuple[S, ...] = (
    S("headwater.coordinator.load.delay.ms", LONG, "0",
      "Testing aid: a coordinator waits this long before loading a partition."),
)

GROUP: tuple[S, ...] = (
    S("offsets.topic.num.partitions", INT, "50", "Partitions of __consumer_offsets."),
    S("offsets.topic.replication.factor", INT, "1", "Replication factor of __consumer_offsets."),
    S("offsets.topic.segment.bytes", INT, "104857600", "Segment size of __consumer_offsets."),
    S("offsets.retention.minutes", INT, "10080",
      "Committed offsets of an empty group are kept this long."),
    S("offsets.retention.check.interval.ms", LONG, "600000",
      "How often expired offsets are removed."),
    S("offset.metadata.max.bytes", INT, "4096", "The largest commit metadata string."),
    S("group.min.session.timeout.ms", INT, "6000", "Smallest classic-group session timeout."),
    S("group.max.session.timeout.ms", INT, "1800000", "Largest classic-group session timeout."),
    S("group.initial.rebalance.delay.ms", INT, "3000",
      "A new classic group waits this long for more members."),
    S("group.max.size", INT, INT_MAX, "Most members of a classic group."),
    S("group.consumer.session.timeout.ms", INT, "45000",
      "Consumer-group session timeout (KIP-848)."),
    S("group.consumer.min.session.timeout.ms", INT, "45000",
      "Smallest consumer.session.timeout.ms a group may set."),
    S("group.consumer.max.session.timeout.ms", INT, "60000",
      "Largest consumer.session.timeout.ms a group may set."),
    S("group.consumer.heartbeat.interval.ms", INT, "5000", "Consumer-group heartbeat interval."),
    S("group.consumer.min.heartbeat.interval.ms", INT, "5000",
      "Smallest consumer.heartbeat.interval.ms a group may set."),
    S("group.consumer.max.heartbeat.interval.ms", INT, "15000",
      "Largest consumer.heartbeat.interval.ms a group may set."),
    S("group.consumer.max.size", INT, INT_MAX, "Most members of a consumer group."),
    S("group.consumer.assignors", LIST, "uniform,range", "Server-side assignors, preferred first."),
    S("group.consumer.regex.refresh.interval.ms", INT, "600000",
      "How often a regex subscription is matched against the topics again."),
)

SHARE_GROUP: tuple[S, ...] = (
    S("group.share.session.timeout.ms", INT, "45000", "Share-group session timeout."),
    S("group.share.min.session.timeout.ms", INT, "45000",
      "Smallest share.session.timeout.ms a group may set."),
    S("group.share.max.session.timeout.ms", INT, "60000",
      "Largest share.session.timeout.ms a group may set."),
    S("group.share.heartbeat.interval.ms", INT, "5000", "Share-group heartbeat interval."),
    S("group.share.min.heartbeat.interval.ms", INT, "5000",
      "Smallest share.heartbeat.interval.ms a group may set."),
    S("group.share.max.heartbeat.interval.ms", INT, "15000",
      "Largest share.heartbeat.interval.ms a group may set."),
    S("group.share.assignment.interval.ms", INT, "1000",
      "Share-group assignment interval."),
    S("group.share.min.assignment.interval.ms", INT, "0",
      "Smallest share.assignment.interval.ms a group may set."),
    S("group.share.max.assignment.interval.ms", INT, "15000",
      "Largest share.assignment.interval.ms a group may set."),
    S("group.share.max.size", INT, "200", "Most members of a share group."),
    S("group.share.assignors", LIST, "simple", "Share-group assignors."),
    S("group.share.record.lock.duration.ms", INT, "30000",
      "How long a share consumer holds an acquired record."),
    S("group.share.min.record.lock.duration.ms", INT, "15000",
      "Smallest share.record.lock.duration.ms a group may set."),
    S("group.share.max.record.lock.duration.ms", INT, "60000",
      "Largest share.record.lock.duration.ms a group may set."),
    S("group.share.delivery.count.limit", INT, "5",
      "Deliveries of a record before it is archived."),
    S("group.share.min.delivery.count.limit", INT, "2",
      "Smallest share.delivery.count.limit a group may set."),
    S("group.share.max.delivery.count.limit", INT, "10",
      "Largest share.delivery.count.limit a group may set."),
    S("group.share.partition.max.record.locks", INT, "2000",
      "Most acquired records of one share-partition."),
    S("group.share.min.partition.max.record.locks", INT, "100",
      "Smallest share.partition.max.record.locks a group may set."),
    S("group.share.max.partition.max.record.locks", INT, "4000",
      "Largest share.partition.max.record.locks a group may set."),
    S("group.share.max.share.sessions", INT, "2000", "Share sessions cached by the broker."),
)

STREAMS_GROUP: tuple[S, ...] = (
    S("group.streams.session.timeout.ms", INT, "45000",
      "Streams-group session timeout (KIP-1071)."),
    S("group.streams.min.session.timeout.ms", INT, "45000",
      "Smallest streams.session.timeout.ms a group may set."),
    S("group.streams.max.session.timeout.ms", INT, "60000",
      "Largest streams.session.timeout.ms a group may set."),
    S("group.streams.heartbeat.interval.ms", INT, "5000", "Streams-group heartbeat interval."),
    S("group.streams.min.heartbeat.interval.ms", INT, "5000",
      "Smallest streams.heartbeat.interval.ms a group may set."),
    S("group.streams.max.heartbeat.interval.ms", INT, "15000",
      "Largest streams.heartbeat.interval.ms a group may set."),
    S("group.streams.max.size", INT, INT_MAX, "Most members of a streams group."),
    S("group.streams.num.standby.replicas", INT, "0",
      "Standby replicas of each stateful task of a streams group."),
    S("group.streams.max.standby.replicas", INT, "2",
      "Largest streams.num.standby.replicas a group may set."),
    S("group.streams.initial.rebalance.delay.ms", INT, "3000",
      "A new streams group waits this long for more members before its first assignment."),
    S("group.streams.acceptable.recovery.lag", LONG, "10000",
      "Changelog records a warm-up task may lag and still count as caught up."),
    S("group.streams.task.offset.interval.ms", INT, "60000",
      "How often streams-group members report their task offsets."),
)

TRANSACTIONS: tuple[S, ...] = (
    S("transaction.state.log.num.partitions", INT, "50", "Partitions of __transaction_state."),
    S("transaction.state.log.segment.bytes", INT, "104857600",
      "Segment size of __transaction_state."),
    S("transaction.max.timeout.ms", INT, "900000", "Largest transaction timeout a producer may ask."),
    S("transactional.id.expiration.ms", INT, "604800000",
      "An idle transactional id expires after this."),
    S("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, "10000",
      "How often timed-out transactions are aborted."),
    S("transaction.remove.expired.transaction.cleanup.interval.ms", INT, "3600000",
      "How often expired transactional ids are removed."),
    S("transaction.partition.verification.enable", BOOLEAN, "true",
      "Produce checks a transactional write's partition with the coordinator."),
)

SHARE_COORDINATOR: tuple[S, ...] = (
    S("share.coordinator.state.topic.num.partitions", INT, "50",
      "Partitions of __share_group_state."),
    S("share.coordinator.state.topic.segment.bytes", INT, "104857600",
      "Segment size of __share_group_state."),
    S("share.coordinator.snapshot.update.records.per.snapshot", INT, "500",
      "Share-state deltas between two snapshots."),
    S("share.coordinator.cold.partition.snapshot.interval.ms", INT, "300000",
      "How often share-partitions with no new deltas get a snapshot."),
)

SHARED_LOG: tuple[S, ...] = (
    S("headwater.storage", STRING, "local",
      "Storage engine: local (segment files in log.dirs) or shared.",
      valid=("local", "shared")),
    S("headwater.shared.database", STRING, "",
      "Shared log: PostgreSQL DSN (may hold a password; TLS as libpq: "
      "sslmode=verify-full&sslrootcert=ca.pem).", sensitive=True),
    S("headwater.shared.objects", STRING, "",
      "Shared log: object store, s3://bucket[/prefix] or file:///path."),
    S("headwater.shared.objects.endpoint", STRING, "", "Shared log: the S3 service's URL."),
    S("headwater.shared.objects.access.key", STRING, "", "Shared log: S3 access key id."),
    S("headwater.shared.objects.secret.key", PASSWORD, "", "Shared log: S3 secret key."),
    S("headwater.shared.objects.region", STRING, "us-east-1", "Shared log: S3 region."),
    S("headwater.shared.objects.ssl.truststore.location", STRING, "",
      "Shared log: PEM file of CAs the S3 service's certificate is checked against "
      "(beside the system's)."),
    S("headwater.shared.coordinators", STRING, "spread",
      "Coordinator shards each on its own lease (spread) or with the controller.",
      valid=("spread", "controller")),
    S("headwater.shared.commit.linger.ms", INT, "2",
      "Shared log: a commit waits this long for more batches."),
    S("headwater.shared.lease.ms", INT, "10000", "Shared log: partition lease duration."),
    S("headwater.shared.inline.max.bytes", INT, "65536",
      "Shared log: a commit window up to this size is stored in PostgreSQL, not as an object."),
    S("headwater.shared.merge.bytes", INT, "8388608",
      "Shared log: small objects are merged up to this size."),
    S("headwater.shared.merge.age.ms", INT, "600000",
      "Shared log: objects older than this are merged."),
    S("headwater.shared.merge.pieces", INT, "256", "Shared log: most pieces merged at once."),
    S("headwater.shared.merge.object.max.bytes", INT, "16777216",
      "Shared log: the largest merged object."),
    S("headwater.shared.startup.wait.ms", INT, "60000",
      "Shared log: how long start waits for the database and object store."),
    S("headwater.shared.join.timeout.ms", INT, "60000",
      "Shared log: how long start waits for a controller and the internal topics."),
    S("headwater.shared.cleaner.interval.ms", INT, "300000",
      "Shared log: how often the controller deletes orphan objects."),
    S("headwater.shared.cleaner.min.age.ms", INT, "600000",
      "Shared log: an orphan object is deleted once older than this."),
)

ALL: tuple[S, ...] = (*COORDINATORS, *GROUP, *SHARE_GROUP, *STREAMS_GROUP, *TRANSACTIONS,
                      *SHARE_COORDINATOR, *SHARED_LOG)
