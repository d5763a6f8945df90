"""Broker keys: Kafka's names and defaults (server, log defaults, metadata, security)."""

from __future__ import annotations

from .model import Setting as S
from .model import Type

BOOLEAN, INT, LONG, DOUBLE = Type.BOOLEAN, Type.INT, Type.LONG, Type.DOUBLE
STRING, LIST, PASSWORD, CLASS = Type.STRING, Type.LIST, Type.PASSWORD, Type.CLASS

LONG_MAX = "9223372036854775807"
INT_MAX = "2147483647"

SERVER: tuple[S, ...] = (
    S("node.id", INT, "1", "This broker's id."),
    S("listeners", STRING, "PLAINTEXT://127.0.0.1:9092",
      "Comma-separated NAME://HOST:PORT the broker listens on."),
    S("advertised.listeners", STRING, "",
      "NAME://HOST:PORT clients are told to connect to (default: the listeners)."),
    S("broker.rack", STRING, None, "This broker's rack, registered with the controller."),
    S("log.dirs", STRING, "./data", "The data directory (one directory here)."),
    S("num.partitions", INT, "1", "Partitions of an auto-created or unspecified topic."),
    S("default.replication.factor", INT, "1", "Replication factor of a new topic."),
    S("auto.create.topics.enable", BOOLEAN, "true",
      "Metadata and Produce create a missing topic."),
    S("delete.topic.enable", BOOLEAN, "true", "DeleteTopics is allowed."),
    S("socket.request.max.bytes", INT, "104857600", "The largest request accepted."),
    S("max.request.partition.size.limit", INT, "2000",
      "Most partitions one Metadata request may ask about by name."),
    S("quota.window.num", INT, "11", "Samples kept per client quota."),
    S("quota.window.size.seconds", INT, "1", "Length of one client-quota sample."),
    S("controller.quota.window.num", INT, "11", "Samples kept per controller mutation quota."),
    S("controller.quota.window.size.seconds", INT, "1",
      "Length of one controller-mutation-quota sample."),
    S("max.connections", INT, INT_MAX, "Most open connections of the broker."),
    S("max.connections.per.ip", INT, INT_MAX, "Most open connections from one address."),
    S("max.connections.per.ip.overrides", STRING, "",
      "Per-address limits: host:count pairs, comma-separated."),
    S("connections.max.idle.ms", LONG, "600000", "An idle connection is closed after this."),
    S("queued.max.request.bytes", LONG, "-1",
      "Bytes of requests read but not yet answered (-1: no limit)."),
    S("max.incremental.fetch.session.cache.slots", INT, "1000",
      "Incremental fetch sessions cached."),
    S("producer.id.expiration.ms", INT, "86400000",
      "An idle producer id's state is dropped after this."),
    S("broker.session.timeout.ms", INT, "9000",
      "Shared log: a broker that has not renewed its lease for this long is listed as gone."),
)

# Broker defaults of topic keys (topic_keys.py names each one's topic key).
LOG: tuple[S, ...] = (
    S("message.max.bytes", INT, "1048588", "Default of max.message.bytes.", dynamic=True),
    S("log.segment.bytes", INT, "1073741824", "Default of segment.bytes.", dynamic=True),
    S("log.roll.ms", LONG, "", "Default of segment.ms (else log.roll.hours).", dynamic=True),
    S("log.roll.hours", INT, "168", "Default of segment.ms, in hours.", dynamic=True,
      unit_of="segment.ms"),
    S("log.retention.ms", LONG, "", "Default of retention.ms (else minutes, else hours).",
      dynamic=True),
    S("log.retention.minutes", INT, "", "Default of retention.ms, in minutes.", dynamic=True,
      unit_of="retention.ms"),
    S("log.retention.hours", INT, "168", "Default of retention.ms, in hours.", dynamic=True,
      unit_of="retention.ms"),
    S("log.retention.bytes", LONG, "-1", "Default of retention.bytes.", dynamic=True),
    S("log.retention.check.interval.ms", LONG, "300000",
      "How often retention and cleanup run."),
    S("log.cleanup.policy", LIST, "delete", "Default of cleanup.policy.", dynamic=True),
    S("log.index.interval.bytes", INT, "4096", "Default of index.interval.bytes.",
      dynamic=True),
    S("log.index.size.max.bytes", INT, "10485760", "Default of segment.index.bytes.",
      dynamic=True),
    S("log.message.timestamp.type", STRING, "CreateTime",
      "Default of message.timestamp.type.", dynamic=True),
    S("log.message.timestamp.before.max.ms", LONG, LONG_MAX,
      "Default of message.timestamp.before.max.ms.", dynamic=True),
    S("log.message.timestamp.after.max.ms", LONG, "3600000",
      "Default of message.timestamp.after.max.ms.", dynamic=True),
    S("log.flush.interval.messages", LONG, LONG_MAX, "Default of flush.messages.",
      dynamic=True),
    S("log.flush.interval.ms", LONG, "", "Default of flush.ms.", dynamic=True),
    S("log.flush.scheduler.interval.ms", LONG, LONG_MAX,
      "How often logs are checked for a flush (no effect here)."),
    S("log.segment.delete.delay.ms", LONG, "60000", "Default of file.delete.delay.ms.",
      dynamic=True),
    S("log.cleaner.delete.retention.ms", LONG, "86400000", "Default of delete.retention.ms.",
      dynamic=True),
    S("log.cleaner.min.cleanable.ratio", DOUBLE, "0.5", "Default of min.cleanable.dirty.ratio.",
      dynamic=True),
    S("log.cleaner.min.compaction.lag.ms", LONG, "0", "Default of min.compaction.lag.ms.",
      dynamic=True),
    S("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX, "Default of max.compaction.lag.ms.",
      dynamic=True),
    S("log.cleaner.backoff.ms", LONG, "15000", "Pause of the log cleaner between passes.",
      dynamic=True, stored=True),
    S("log.roll.jitter.ms", LONG, "0", "Default of segment.jitter.ms.", dynamic=True),
    S("log.preallocate", BOOLEAN, "false", "Default of preallocate.", dynamic=True),
    S("log.local.retention.ms", LONG, "-2", "Default of local.retention.ms.", dynamic=True),
    S("log.local.retention.bytes", LONG, "-2", "Default of local.retention.bytes.",
      dynamic=True),
)

METADATA: tuple[S, ...] = (
    S("metadata.log.max.record.bytes.between.snapshots", LONG, "20971520",
      "A metadata snapshot after this many bytes of new metadata records."),
    S("metadata.log.max.snapshot.interval.ms", LONG, "3600000",
      "A metadata snapshot this long after the last one if anything is new (0: off)."),
    S("metadata.log.segment.bytes", INT, "67108864",
      "The metadata log's segment size (Kafka: 1 GiB; smaller so snapshots free space)."),
)

# KIP-1191 share-group dead-letter topics (dynamic cluster configs in Kafka 4.4).
DEAD_LETTERS: tuple[S, ...] = (
    S("errors.deadletterqueue.auto.create.topics.enable", BOOLEAN, "false",
      "A share group's missing dead-letter topic is created.", dynamic=True),
    S("errors.deadletterqueue.topic.name.prefix", STRING, "dlq.",
      "Prefix a dead-letter topic's name must have (\"\": any name).", dynamic=True),
)

SECURITY: tuple[S, ...] = (
    S("config.providers", LIST, None,
      "Config providers (KIP-297): each name's config.providers.<name>.class is Kafka's "
      "File-, Directory- or EnvVarConfigProvider; a value refers to a secret as "
      "${name:path:key}."),
    S("listener.security.protocol.map", STRING, None,
      "NAME:PROTOCOL pairs (a listener named after a protocol uses it)."),
    S("inter.broker.listener.name", STRING, None, "The listener other brokers reach."),
    S("security.inter.broker.protocol", STRING, None,
      "The protocol other brokers use (names the listener)."),
    S("sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI",
      "SASL mechanism brokers authenticate to each other with (PLAIN, SCRAM-SHA-256 or "
      "SCRAM-SHA-512 here)."),
    S("ssl.endpoint.identification.algorithm", STRING, "https",
      "Check the peer's host name against its certificate (empty: do not)."),
    S("sasl.enabled.mechanisms", LIST, None,
      "SASL mechanisms a listener offers (PLAIN,SCRAM-SHA-256,SCRAM-SHA-512 unset)."),
    S("sasl.jaas.config", PASSWORD, None, "JAAS configuration: PLAIN users."),
    S("connections.max.reauth.ms", LONG, None,
      "A SASL session's lifetime (unset or 0: no limit; OAUTHBEARER: at most the token's)."),
    # OAUTHBEARER (KIP-768), as a Kafka broker with OAuthBearerValidatorCallbackHandler;
    # each may be set per listener and mechanism (listener.name.<l>.oauthbearer.<key>).
    S("sasl.server.callback.handler.class", CLASS, None,
      "OAUTHBEARER: org.apache.kafka.common.security.oauthbearer."
      "OAuthBearerValidatorCallbackHandler (the only one served)."),
    S("sasl.oauthbearer.jwt.validator.class", CLASS,
      "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
      "OAUTHBEARER token validator (the default only)."),
    S("sasl.oauthbearer.jwks.endpoint.url", STRING, None,
      "OAUTHBEARER: the JWKS (http, https or file URL) tokens are verified with."),
    S("sasl.oauthbearer.jwks.endpoint.refresh.ms", LONG, "3600000",
      "OAUTHBEARER: how often the JWKS is fetched again."),
    S("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", LONG, "100",
      "OAUTHBEARER: first wait before a failed JWKS fetch is retried (doubling)."),
    S("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", LONG, "10000",
      "OAUTHBEARER: how long a JWKS fetch is retried."),
    S("sasl.oauthbearer.expected.audience", LIST, None,
      "OAUTHBEARER: a token's aud must name one of these."),
    S("sasl.oauthbearer.allow.unverified.audience", BOOLEAN, "false",
      "OAUTHBEARER: accept any aud when expected.audience is unset."),
    S("sasl.oauthbearer.expected.issuer", STRING, None,
      "OAUTHBEARER: a token's iss must be this."),
    S("sasl.oauthbearer.allow.unverified.issuer", BOOLEAN, "false",
      "OAUTHBEARER: accept any iss when expected.issuer is unset."),
    S("sasl.oauthbearer.clock.skew.seconds", INT, "30",
      "OAUTHBEARER: leeway on a token's exp and nbf."),
    S("sasl.oauthbearer.sub.claim.name", STRING, "sub",
      "OAUTHBEARER: the claim naming the principal (User:<value>)."),
    S("sasl.oauthbearer.scope.claim.name", STRING, "scope",
      "OAUTHBEARER: the claim holding the token's scopes."),
    S("ssl.keystore.type", STRING, None, "Keystore format (PEM only)."),
    S("ssl.keystore.location", STRING, None, "PEM file with the key and certificate chain."),
    S("ssl.keystore.password", PASSWORD, None, "Password of the keystore's key."),
    S("ssl.key.password", PASSWORD, None, "Password of the private key."),
    S("ssl.keystore.key", PASSWORD, None, "The private key, PEM, inline."),
    S("ssl.keystore.certificate.chain", PASSWORD, None, "The certificate chain, PEM, inline."),
    S("ssl.truststore.type", STRING, None, "Truststore format (PEM only)."),
    S("ssl.truststore.location", STRING, None, "PEM file of trusted certificates."),
    S("ssl.truststore.certificates", PASSWORD, None, "Trusted certificates, PEM, inline."),
    S("ssl.client.auth", STRING, None, "Client certificates: none, requested or required.",
      valid=("required", "requested", "none")),
    S("authorizer.class.name", STRING, None, "Set: ACLs are enforced."),
    S("super.users", STRING, None, "Principals allowed everything, semicolon-separated."),
    S("allow.everyone.if.no.acl.found", BOOLEAN, None,
      "A resource with no ACL is open to all (unset: false)."),
)

# Kafka's dynamic broker configs (DynamicBrokerConfig.AllDynamicConfigs in Kafka 4.4) that
# have no counterpart here: thread pools, the log cleaner's tuning, replication throttles,
# Kerberos and SASL login refresh, metrics reporters. AlterConfigs accepts and stores them
# as Kafka does and DescribeConfigs shows them; they change nothing (docs/differences.md).
# Tools and client suites set them (librdkafka's 0081_admin: sasl.kerberos.min.time.
# before.relogin). Dynamic keys headwater reads only at start (max.connections, ...) are
# still refused: accepted, they would claim an effect they do not have.
_STORED = (
    ("num.io.threads", INT, "Request handler threads."),
    ("num.network.threads", INT, "Network threads."),
    ("num.replica.fetchers", INT, "Replica fetcher threads."),
    ("num.recovery.threads.per.data.dir", INT, "Log recovery threads."),
    ("background.threads", INT, "Background task threads."),
    ("log.cleaner.threads", INT, "Log cleaner threads."),
    ("log.cleaner.dedupe.buffer.size", LONG, "Log cleaner dedupe memory."),
    ("log.cleaner.io.buffer.size", INT, "Log cleaner I/O memory."),
    ("log.cleaner.io.buffer.load.factor", DOUBLE, "Log cleaner dedupe buffer load factor."),
    ("log.cleaner.io.max.bytes.per.second", DOUBLE, "Log cleaner I/O throttle."),
    ("follower.replication.throttled.rate", LONG, "Follower replication throttle."),
    ("leader.replication.throttled.rate", LONG, "Leader replication throttle."),
    ("replica.alter.log.dirs.io.max.bytes.per.second", LONG, "Log-dir move throttle."),
    ("metric.reporters", LIST, "Metrics reporter classes."),
    ("sasl.kerberos.service.name", STRING, "Kerberos service name."),
    ("sasl.kerberos.kinit.cmd", STRING, "Kerberos kinit command."),
    ("sasl.kerberos.ticket.renew.window.factor", DOUBLE, "Kerberos ticket renew window."),
    ("sasl.kerberos.ticket.renew.jitter", DOUBLE, "Kerberos ticket renew jitter."),
    ("sasl.kerberos.min.time.before.relogin", LONG, "Kerberos relogin wait."),
    ("sasl.kerberos.principal.to.local.rules", LIST, "Kerberos principal mapping rules."),
    ("sasl.login.refresh.window.factor", DOUBLE, "SASL login refresh window."),
    ("sasl.login.refresh.window.jitter", DOUBLE, "SASL login refresh jitter."),
    ("sasl.login.refresh.min.period.seconds", INT, "SASL login refresh minimum period."),
    ("sasl.login.refresh.buffer.seconds", INT, "SASL login refresh buffer."),
)
STORED: tuple[S, ...] = tuple(
    S(name, type_, None, f"{doc} Stored, no effect here.", dynamic=True, stored=True)
    for name, type_, doc in _STORED)

HEADWATER: tuple[S, ...] = (
    S("headwater.fsync", STRING, "never",
      "\"always\" fsyncs every acknowledged batch (\"never\": the OS flushes)."),
    S("headwater.metrics.listen", STRING, None, "HOST:PORT of the Prometheus endpoint."),
    S("headwater.max.open.partition.files", INT, None,
      "Partition files kept open at once (unset: from the open-file limit)."),
    S("headwater.max.partitions", INT, "200000",
      "Most partitions of the cluster (~5 kB of memory each, ~1 GiB in all)."),
    # Topics as Iceberg tables (headwater/iceberg/, docs/iceberg.md).
    S("headwater.iceberg.catalog.uri", STRING, None,
      "SQLAlchemy URI of the tables' SQL catalog (unset: SQLite in the data directory; "
      "on the shared log its PostgreSQL)."),
    S("headwater.iceberg.warehouse", STRING, None,
      "Where the tables' files go (unset: the data directory's iceberg/warehouse; on "
      "the shared log iceberg/ of its object store)."),
    S("headwater.iceberg.namespace", STRING, "db", "The namespace of the topics' tables."),
)

ALL: tuple[S, ...] = (*SERVER, *LOG, *METADATA, *DEAD_LETTERS, *SECURITY, *STORED,
                      *HEADWATER)
