"""Topic keys (Kafka's LogConfig): each defaults to its broker synonym, exactly as in Kafka.

Ranges are Kafka's ConfigDef ranges, except segment.bytes: Kafka 4 requires >= 1048576,
headwater keeps 14 (one empty batch) so tests can roll segments quickly
(docs/differences.md). A numeric key with no range of its own is at least -1.
"""

from __future__ import annotations

from .model import Setting, Type, both, topic

BOOLEAN, INT, LONG, DOUBLE = Type.BOOLEAN, Type.INT, Type.LONG, Type.DOUBLE
STRING, LIST = Type.STRING, Type.LIST

ALL: tuple[Setting, ...] = (
    topic("cleanup.policy", LIST, "log.cleanup.policy",
          "delete (by time and size) and/or compact (the latest value of each key).",
          valid=("compact", "delete")),
    both("compression.type", STRING, "producer",
         "The codec the broker stores batches with (producer: as they come).",
         valid=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    topic("delete.retention.ms", LONG, "log.cleaner.delete.retention.ms",
          "How long a compacted topic keeps tombstones.", at_least=-1),
    topic("file.delete.delay.ms", LONG, "log.segment.delete.delay.ms",
          "Delay before a deleted segment's file is removed.", at_least=-1),
    topic("flush.messages", LONG, "log.flush.interval.messages",
          "fsync after this many messages.", at_least=1),
    topic("flush.ms", LONG, "log.flush.interval.ms", "fsync after this long.",
          default="9223372036854775807", at_least=-1),
    topic("index.interval.bytes", INT, "log.index.interval.bytes",
          "Bytes between offset index entries.", at_least=0),
    topic("max.message.bytes", INT, "message.max.bytes", "The largest batch accepted.",
          at_least=0),
    both("max.decompressed.message.bytes", INT, "2147483639",
         "The largest record body the broker will decompress (Kafka 4.4).", at_least=1),
    topic("message.timestamp.type", STRING, "log.message.timestamp.type",
          "CreateTime (the producer's) or LogAppendTime (the broker's).",
          valid=("CreateTime", "LogAppendTime")),
    topic("message.timestamp.before.max.ms", LONG, "log.message.timestamp.before.max.ms",
          "How far in the past a CreateTime timestamp may be.", at_least=-1),
    topic("message.timestamp.after.max.ms", LONG, "log.message.timestamp.after.max.ms",
          "How far in the future a CreateTime timestamp may be.", at_least=-1),
    topic("min.cleanable.dirty.ratio", DOUBLE, "log.cleaner.min.cleanable.ratio",
          "Dirty share of the log that makes it eligible for compaction.",
          at_least=0, at_most=1),
    both("min.insync.replicas", INT, "1", "Replicas an acks=all write needs.", at_least=1),
    topic("retention.bytes", LONG, "log.retention.bytes",
          "Size a partition is trimmed to (-1: no limit).", at_least=-1),
    topic("retention.ms", LONG, "log.retention.ms",
          "Age after which segments are deleted (-1: forever).", at_least=-1),
    topic("segment.bytes", INT, "log.segment.bytes", "A segment rolls at this size.",
          at_least=14),
    topic("segment.index.bytes", INT, "log.index.size.max.bytes",
          "Size of a segment's offset index.", at_least=-1),
    topic("segment.ms", LONG, "log.roll.ms", "A segment rolls at this age.", at_least=1),
    both("unclean.leader.election.enable", BOOLEAN, "false",
         "An out-of-sync replica may lead (no effect on one replica)."),
    topic("min.compaction.lag.ms", LONG, "log.cleaner.min.compaction.lag.ms",
          "A record stays uncompacted at least this long.", at_least=0),
    topic("max.compaction.lag.ms", LONG, "log.cleaner.max.compaction.lag.ms",
          "A record is compacted at most this long after it is written.", at_least=1),
    # Compression levels apply when the broker recompresses (compression.type). The rest
    # is accepted and described like Kafka, without effect here: no jitter on rolls, no
    # preallocation, no tiered storage.
    topic("segment.jitter.ms", LONG, "log.roll.jitter.ms",
          "Random jitter on segment.ms (no effect here).", at_least=0),
    topic("preallocate", BOOLEAN, "log.preallocate",
          "Preallocate segment files (no effect here)."),
    both("compression.gzip.level", INT, "-1", "gzip level when the broker compresses.",
         at_least=-1, at_most=9),
    both("compression.lz4.level", INT, "9", "lz4 level when the broker compresses.",
         at_least=1, at_most=17),
    both("compression.zstd.level", INT, "3", "zstd level when the broker compresses.",
         at_least=-131072, at_most=22),
    topic("local.retention.ms", LONG, "log.local.retention.ms",
          "Tiered storage's local retention (no effect here).", at_least=-2),
    topic("local.retention.bytes", LONG, "log.local.retention.bytes",
          "Tiered storage's local retention size (no effect here).", at_least=-2),
    # KIP-1191: a topic a share group may use as its dead-letter topic.
    topic("errors.deadletterqueue.group.enable", BOOLEAN, None,
          "A share group may use this topic as its dead-letter topic.", default="false"),
    # The topic as an Apache Iceberg table (docs/iceberg.md), Redpanda's names.
    topic("headwater.iceberg.mode", STRING, None,
          "disabled, key_value or value_schema: the topic's committed records are also "
          "an Iceberg table (partition, offset, timestamp, key, value, headers; "
          "value_schema: the value's JSON parsed into typed fields).",
          default="disabled", valid=("disabled", "key_value", "value_schema")),
    topic("headwater.iceberg.value.schema", STRING, None,
          "With mode value_schema: the value's schema, an Avro record schema (JSON); a "
          "field added adds a column.", default=""),
    topic("headwater.iceberg.value.encoding", STRING, None,
          "With mode value_schema: what a value is, json, avro (Avro's binary encoding "
          "of the value schema) or confluent-avro (the same after Confluent's 5-byte "
          "schema-id prefix).",
          default="json", valid=("json", "avro", "confluent-avro")),
    topic("headwater.iceberg.commit.interval.ms", LONG, None,
          "How often the topic's table is committed (its lag behind the topic).",
          default="60000", at_least=100),
    topic("headwater.iceberg.partition.spec", STRING, None,
          "The table's partitioning: hour(timestamp), day(timestamp), identity(partition) "
          "..., comma-separated; none: unpartitioned (a new table's only).",
          default="hour(timestamp)"),
)
