"""Broker and topic configuration, by Kafka's names and with Kafka's defaults.

A `server.properties` file and `--override key=value` pairs feed `BrokerConfig`.
Topic-level keys (`retention.ms`, `segment.bytes`, ...) default to the matching broker
key (`log.retention.ms`, `log.segment.bytes`, ...), exactly as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# Broker-level defaults (Kafka's names and values). Values are strings as in a
# properties file; typed accessors convert.
BROKER_DEFAULTS: dict[str, str] = {
    "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "advertised.listeners": "",
    "log.dirs": "./data",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "socket.request.max.bytes": "104857600",
    "quota.window.num": "11",
    "max.connections": "2147483647",
    "max.connections.per.ip": "2147483647",
    "max.connections.per.ip.overrides": "",
    "connections.max.idle.ms": "600000",
    "queued.max.request.bytes": "-1",
    "quota.window.size.seconds": "1",
    "controller.quota.window.num": "11",
    "controller.quota.window.size.seconds": "1",
    "message.max.bytes": "1048588",
    # Kafka 4.4: the largest record body the broker will decompress (Integer.MAX_VALUE - 8,
    # Java's largest array, by default).
    "max.decompressed.message.bytes": "2147483639",
    "log.segment.bytes": "1073741824",
    "log.roll.ms": "",
    "log.roll.hours": "168",
    "log.retention.ms": "",
    "log.retention.minutes": "",
    "log.retention.hours": "168",
    "log.retention.bytes": "-1",
    "log.retention.check.interval.ms": "300000",
    "log.cleanup.policy": "delete",
    "log.index.interval.bytes": "4096",
    "log.index.size.max.bytes": "10485760",
    "log.message.timestamp.type": "CreateTime",
    "log.flush.interval.messages": "9223372036854775807",
    "log.flush.interval.ms": "",
    "log.flush.scheduler.interval.ms": "9223372036854775807",
    "log.segment.delete.delay.ms": "60000",
    "log.cleaner.delete.retention.ms": "86400000",
    "log.cleaner.min.cleanable.ratio": "0.5",
    "log.cleaner.backoff.ms": "15000",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.max.compaction.lag.ms": "9223372036854775807",
    "log.roll.jitter.ms": "0",
    "log.preallocate": "false",
    "log.local.retention.ms": "-2",
    "log.local.retention.bytes": "-2",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.zstd.level": "3",
    "log.message.timestamp.before.max.ms": "9223372036854775807",
    "log.message.timestamp.after.max.ms": "3600000",
    "min.insync.replicas": "1",
    "compression.type": "producer",
    "unclean.leader.election.enable": "false",
    "producer.id.expiration.ms": "86400000",
    "max.incremental.fetch.session.cache.slots": "1000",
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "50",
    "transaction.partition.verification.enable": "true",
    # KIP-1191 share-group dead-letter topics (dynamic cluster configs in Kafka 4.4).
    "errors.deadletterqueue.auto.create.topics.enable": "false",
    "errors.deadletterqueue.topic.name.prefix": "dlq.",
    # KRaft metadata snapshots (headwater/metadata/snapshot.py): one after this many bytes
    # of new metadata records, or this long after the last one if anything is new (0: off).
    "metadata.log.max.record.bytes.between.snapshots": "20971520",
    "metadata.log.max.snapshot.interval.ms": "3600000",
    # The metadata log's segment size: Kafka's default is 1 GiB; headwater keeps 64 MiB so
    # the segments a snapshot covers are deleted sooner (docs/differences.md).
    "metadata.log.segment.bytes": "67108864",
    # headwater's own durability switch: "always" fsyncs every acknowledged batch.
    "headwater.fsync": "never",
}

# Topic config key -> broker key it defaults to (Kafka's LogConfig synonyms).
TOPIC_CONFIG_SYNONYMS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "max.decompressed.message.bytes": "max.decompressed.message.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.insync.replicas": "min.insync.replicas",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    # Compression levels apply when the broker recompresses (compression.type). The rest
    # is accepted and described like Kafka, without effect here: no jitter on rolls, no
    # preallocation, no tiered storage.
    "segment.jitter.ms": "log.roll.jitter.ms",
    "preallocate": "log.preallocate",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "local.retention.ms": "log.local.retention.ms",
    "local.retention.bytes": "log.local.retention.bytes",
}

# Topic configs with no broker default, and their defaults.
TOPIC_ONLY_DEFAULTS: dict[str, str] = {
    # KIP-1191: a topic a share group may use as its dead-letter topic.
    "errors.deadletterqueue.group.enable": "false",
}

TOPIC_CONFIG_KEYS = frozenset(TOPIC_CONFIG_SYNONYMS) | frozenset(TOPIC_ONLY_DEFAULTS)

# Broker configs of KIP-1191 that AlterConfigs may change (cluster-wide or per broker).
DLQ_BROKER_KEYS = frozenset({"errors.deadletterqueue.auto.create.topics.enable",
                             "errors.deadletterqueue.topic.name.prefix"})

# Kafka's dynamic broker configs (DynamicBrokerConfig.AllDynamicConfigs in Kafka 4.4) that
# have no counterpart here: thread pools, the log cleaner's tuning, replication throttles,
# Kerberos and SASL login refresh, metrics reporters. AlterConfigs accepts and stores them
# as Kafka does and DescribeConfigs shows them; they change nothing (docs/differences.md).
# Tools and client suites set them (librdkafka's 0081_admin: sasl.kerberos.min.time.
# before.relogin). Dynamic keys headwater reads only at start (max.connections, ...) are
# still refused: accepted, they would claim an effect they do not have.
STORED_BROKER_KEYS = frozenset({
    "num.io.threads", "num.network.threads", "num.replica.fetchers",
    "num.recovery.threads.per.data.dir", "background.threads",
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
    "follower.replication.throttled.rate", "leader.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second", "metric.reporters",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
})
_STORED_NUMBERS = STORED_BROKER_KEYS - {
    "metric.reporters", "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.principal.to.local.rules"}

VALID_CLEANUP = {"delete", "compact", "compact,delete", "delete,compact"}
VALID_TIMESTAMP_TYPES = {"CreateTime", "LogAppendTime"}
VALID_COMPRESSION = {"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}


class ConfigError(ValueError):
    """A config key or value that Kafka would reject (INVALID_CONFIG)."""


def parse_properties(text: str) -> dict[str, str]:
    """Parse a Java-style properties file: `key=value` or `key: value`, `#`/`!` comments."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                key, _, value = line.partition(sep)
                out[key.strip()] = value.strip()
                break
        else:
            out[line] = ""
    return out


# Where a broker config value comes from, strongest first (Kafka's ConfigSource order).
DYNAMIC_NODE, DYNAMIC_CLUSTER, STATIC, DEFAULT = "node", "cluster", "static", "default"


class BrokerConfig:
    """Broker configuration: defaults, overlaid by a properties file and overrides
    (static), overlaid by dynamic configs from the metadata log (AlterConfigs on the
    BROKER resource: "" for the cluster-wide default, the node id for this broker)."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self._explicit: dict[str, str] = dict(values or {})
        self._cluster: dict[str, str] = {}
        self._node: dict[str, str] = {}
        self._values = {**BROKER_DEFAULTS, **self._explicit}

    def set_dynamic(self, cluster: Mapping[str, str], node: Mapping[str, str]) -> bool:
        """Install the dynamic layers; True when anything changed."""
        if dict(cluster) == self._cluster and dict(node) == self._node:
            return False
        self._cluster, self._node = dict(cluster), dict(node)
        self._values = {**BROKER_DEFAULTS, **self._explicit, **self._cluster, **self._node}
        return True

    def layers(self, key: str) -> list[tuple[str, str]]:
        """(source, value) of every layer that sets `key`, strongest first."""
        out = [(source, layer[key]) for source, layer in (
            (DYNAMIC_NODE, self._node), (DYNAMIC_CLUSTER, self._cluster),
            (STATIC, self._explicit)) if key in layer]
        if key in BROKER_DEFAULTS:
            out.append((DEFAULT, BROKER_DEFAULTS[key]))
        return out

    def source(self, key: str) -> str:
        found = self.layers(key)
        return found[0][0] if found else DEFAULT

    @classmethod
    def load(cls, path: str | Path | None, overrides: Mapping[str, str]) -> BrokerConfig:
        values: dict[str, str] = {}
        if path:
            values.update(parse_properties(Path(path).read_text()))
        values.update(overrides)
        return cls(values)

    def get(self, key: str, default: str | None = None) -> str | None:
        value = self._values.get(key)
        if value is None or value == "":
            return default
        return value

    def get_int(self, key: str, default: int | None = None) -> int:
        value = self.get(key)
        if value is None:
            if default is None:
                raise ConfigError(f"missing config {key}")
            return default
        return int(value)

    def get_bool(self, key: str) -> bool:
        return (self.get(key) or "false").lower() == "true"

    def is_explicit(self, key: str) -> bool:
        return key in self._explicit

    def items(self) -> list[tuple[str, str]]:
        return sorted(self._values.items())

    def topic_default(self, topic_key: str) -> str:
        """The broker-wide default value for a topic-level config key."""
        if topic_key == "retention.ms":
            for key, mult in (("log.retention.ms", 1), ("log.retention.minutes", 60_000),
                              ("log.retention.hours", 3_600_000)):
                value = self.get(key)
                if value is not None:
                    return str(int(value) * mult)
        if topic_key == "segment.ms":
            value = self.get("log.roll.ms")
            if value is not None:
                return value
            return str(int(self.get("log.roll.hours") or "168") * 3_600_000)
        if topic_key == "flush.ms":
            return self.get("log.flush.interval.ms") or "9223372036854775807"
        if topic_key in TOPIC_ONLY_DEFAULTS:
            return TOPIC_ONLY_DEFAULTS[topic_key]
        return self.get(TOPIC_CONFIG_SYNONYMS[topic_key]) or ""


# Broker keys AlterConfigs may change at runtime: the broker-wide defaults of topic
# configs (Kafka's DynamicLogConfig), and their time-unit synonyms.
DYNAMIC_BROKER_KEYS: dict[str, str] = {
    **{broker_key: topic_key for topic_key, broker_key in TOPIC_CONFIG_SYNONYMS.items()},
    "log.retention.minutes": "retention.ms", "log.retention.hours": "retention.ms",
    "log.roll.hours": "segment.ms",
}


def validate_dynamic_broker_config(key: str, value: str | None) -> None:
    """Raise ConfigError unless `key` may be changed dynamically to `value`."""
    if key in DLQ_BROKER_KEYS:
        if (value is not None and key.endswith(".enable")
                and value.lower() not in ("true", "false")):
            raise ConfigError(f"Invalid value {value} for configuration {key}: "
                              "Expected value to be either true or false")
        return
    if key in STORED_BROKER_KEYS:
        if value is None:
            return
        if key in _STORED_NUMBERS:
            try:
                float(value)
            except ValueError:
                raise ConfigError(f"Invalid value {value} for configuration {key}: "
                                  "Not a number") from None
        return
    topic_key = DYNAMIC_BROKER_KEYS.get(key)
    if topic_key is None:
        raise ConfigError(f"Cannot update these configs dynamically: {key}")
    if value is not None and key in ("log.retention.minutes", "log.retention.hours",
                                     "log.roll.hours"):
        if not value.strip().lstrip("-").isdigit():
            raise ConfigError(f"Invalid value {value} for configuration {key}")
        return
    validate_topic_config(topic_key, value)


def validate_topic_config(key: str, value: str | None) -> None:  # noqa: C901
    """Raise ConfigError for an unknown topic key or a value Kafka would reject."""
    if key not in TOPIC_CONFIG_KEYS:
        raise ConfigError(f"Unknown topic config name: {key}")
    if value is None:
        return
    if key == "cleanup.policy":
        if value.replace(" ", "") not in VALID_CLEANUP:
            raise ConfigError(f"Invalid value {value} for configuration {key}: "
                              "String must be one of: compact, delete")
        return
    if key == "message.timestamp.type":
        if value not in VALID_TIMESTAMP_TYPES:
            raise ConfigError(f"Invalid value {value} for configuration {key}: "
                              "String must be one of: CreateTime, LogAppendTime")
        return
    if key == "compression.type":
        if value not in VALID_COMPRESSION:
            raise ConfigError(f"Invalid value {value} for configuration {key}: String must "
                              "be one of: uncompressed, zstd, lz4, snappy, gzip, producer")
        return
    if key == "min.cleanable.dirty.ratio":
        try:
            ratio = float(value)
        except ValueError:
            ratio = -1.0
        if not 0.0 <= ratio <= 1.0:
            raise ConfigError(f"Invalid value {value} for configuration {key}: "
                              "must be a number between 0 and 1")
        return
    if key in ("unclean.leader.election.enable", "preallocate",
               "errors.deadletterqueue.group.enable"):
        if value.lower() not in ("true", "false"):
            raise ConfigError(f"Invalid value {value} for configuration {key}: "
                              "Expected value to be either true or false")
        return
    kind, bits = ("INT", 31) if key in _INT_KEYS else ("LONG", 63)
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or not -(2**bits) <= number < 2**bits:  # Java's parseInt/parseLong
        raise ConfigError(f"Invalid value {value} for configuration {key}: "
                          f"Not a number of type {kind}")
    minimum, maximum = _INT_RANGES.get(key, (-1, None))
    if number < minimum:
        raise ConfigError(f"Invalid value {value} for configuration {key}: "
                          f"Value must be at least {minimum}")
    if maximum is not None and number > maximum:
        raise ConfigError(f"Invalid value {value} for configuration {key}: "
                          f"Value must be no more than {maximum}")


# Kafka's INT-typed topic keys (the others are LONG): its "Not a number of type ..." message.
_INT_KEYS = frozenset({"segment.bytes", "max.message.bytes", "min.insync.replicas",
                       "max.decompressed.message.bytes",
                       "index.interval.bytes", "segment.index.bytes", "compression.gzip.level",
                       "compression.lz4.level", "compression.zstd.level"})

# Kafka's ConfigDef ranges, except segment.bytes: Kafka 4 requires >= 1048576, headwater
# keeps 14 (one empty batch) so tests can roll segments quickly (docs/differences.md).
_INT_RANGES: dict[str, tuple[int, int | None]] = {
    "segment.bytes": (14, None), "max.message.bytes": (0, None),
    "max.decompressed.message.bytes": (1, None),
    "min.insync.replicas": (1, None), "index.interval.bytes": (0, None),
    "segment.ms": (1, None), "flush.messages": (1, None),
    "min.compaction.lag.ms": (0, None), "max.compaction.lag.ms": (1, None),
    "segment.jitter.ms": (0, None), "local.retention.ms": (-2, None),
    "local.retention.bytes": (-2, None), "compression.gzip.level": (-1, 9),
    "compression.lz4.level": (1, 17), "compression.zstd.level": (-131072, 22),
}


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The effective, typed topic configuration a partition log runs with."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    retention_ms: int = 604800000
    retention_bytes: int = -1
    max_message_bytes: int = 1048588
    max_decompressed_message_bytes: int = 2147483639
    index_interval_bytes: int = 4096
    message_timestamp_type: str = "CreateTime"
    cleanup_policy: str = "delete"
    flush_messages: int = 9223372036854775807
    flush_ms: int = 9223372036854775807
    fsync_always: bool = False
    min_insync_replicas: int = 1
    delete_retention_ms: int = 86400000
    min_cleanable_dirty_ratio: float = 0.5
    timestamp_before_max_ms: int = 9223372036854775807
    timestamp_after_max_ms: int = 3600000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 9223372036854775807
    compression_type: str = "producer"
    compression_levels: tuple[tuple[int, int], ...] = ()  # (codec id, level) pairs

    def compression_level(self, codec: int) -> int | None:
        return dict(self.compression_levels).get(codec)

    @classmethod
    def resolve(cls, broker: BrokerConfig, topic_overrides: Mapping[str, str]) -> LogConfig:
        def value(key: str) -> str:
            v = topic_overrides.get(key)
            return v if v is not None else broker.topic_default(key)

        return cls(
            segment_bytes=int(value("segment.bytes")),
            segment_ms=int(value("segment.ms")),
            retention_ms=int(value("retention.ms")),
            retention_bytes=int(value("retention.bytes")),
            max_message_bytes=int(value("max.message.bytes")),
            max_decompressed_message_bytes=int(value("max.decompressed.message.bytes")),
            index_interval_bytes=int(value("index.interval.bytes")),
            message_timestamp_type=value("message.timestamp.type"),
            cleanup_policy=value("cleanup.policy"),
            flush_messages=int(value("flush.messages")),
            flush_ms=int(value("flush.ms")),
            fsync_always=(broker.get("headwater.fsync") == "always"),
            min_insync_replicas=int(value("min.insync.replicas")),
            delete_retention_ms=int(value("delete.retention.ms")),
            min_cleanable_dirty_ratio=float(value("min.cleanable.dirty.ratio")),
            timestamp_before_max_ms=int(value("message.timestamp.before.max.ms")),
            timestamp_after_max_ms=int(value("message.timestamp.after.max.ms")),
            min_compaction_lag_ms=int(value("min.compaction.lag.ms")),
            max_compaction_lag_ms=int(value("max.compaction.lag.ms")),
            compression_type=value("compression.type"),
            compression_levels=((1, int(value("compression.gzip.level"))),
                                (3, int(value("compression.lz4.level"))),
                                (4, int(value("compression.zstd.level")))),
        )
