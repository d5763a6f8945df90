"""Record types of `__consumer_offsets`, with Kafka's type ids and field order.

Builders return `CoordinatorRecord`s; a builder named `*_tombstone` returns the same
key with a null value, which deletes the state on replay (and in compaction).
"""

from __future__ import annotations

from typing import Any

from ..coordinator.record_codec import CoordinatorRecord, RecordCodec, RecordType

OFFSET_COMMIT = 1
GROUP_METADATA = 2
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16
# KIP-932 share groups (type 9, ShareGroupPartitionMetadata, is gone since 4.1).
SHARE_GROUP_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_GROUP_STATE_PARTITION_METADATA = 15
SHARE_TYPES = frozenset(range(10, 16))
# KIP-1071 streams groups (type 18, StreamsGroupPartitionMetadata, is gone since 4.1).
STREAMS_GROUP_METADATA = 17
STREAMS_GROUP_MEMBER_METADATA = 19
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 20
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER = 21
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = 22
STREAMS_GROUP_TOPOLOGY = 23
STREAMS_TYPES = frozenset({17, 19, 20, 21, 22, 23})

TOPIC_PARTITIONS = (("topic_id", "uuid"), ("partitions", "[int32]"))
KEY_VALUE = (("key", "string"), ("value", "string"))
TASK_IDS = (("subtopology_id", "string"), ("partitions", "[int32]"))
# Active tasks of record 22 carry the epoch each was assigned at (Kafka 4.4's tagged
# AssignmentEpochs, parallel to the partitions).
ACTIVE_TASK_IDS = TASK_IDS + (("assignment_epochs", "[int32]"),)
STREAMS_TOPIC_INFO = (("name", "string"), ("partitions", "int32"),
                      ("replication_factor", "int16"), ("topic_configs", KEY_VALUE))
TOPIC_INFO = (("topic_id", "uuid"), ("topic_name", "string"), ("partitions", "[int32]"))
GROUP_KEY = (("group_id", "string"),)
MEMBER_KEY = (("group_id", "string"), ("member_id", "string"))

TYPES = [
    RecordType(OFFSET_COMMIT, "OffsetCommit",
               (("group", "string"), ("topic", "string"), ("partition", "int32")),
               3, (("offset", "int64"), ("leader_epoch", "int32"), ("metadata", "string"),
                   ("commit_timestamp", "int64"))),
    RecordType(GROUP_METADATA, "GroupMetadata", (("group", "string"),),
               3, (("protocol_type", "string"), ("generation", "int32"),
                   ("protocol", "nstring"), ("leader", "nstring"),
                   ("current_state_timestamp", "int64"),
                   ("members", (("member_id", "string"), ("group_instance_id", "nstring"),
                                ("client_id", "string"), ("client_host", "string"),
                                ("rebalance_timeout", "int32"), ("session_timeout", "int32"),
                                ("subscription", "bytes"), ("assignment", "bytes"))))),
    RecordType(CONSUMER_GROUP_METADATA, "ConsumerGroupMetadata", (("group_id", "string"),),
               0, (("epoch", "int32"), ("metadata_hash", "int64"))),
    RecordType(CONSUMER_GROUP_MEMBER_METADATA, "ConsumerGroupMemberMetadata",
               (("group_id", "string"), ("member_id", "string")),
               0, (("instance_id", "nstring"), ("rack_id", "nstring"), ("client_id", "string"),
                   ("client_host", "string"), ("subscribed_topic_names", "[string]"),
                   ("subscribed_topic_regex", "nstring"), ("rebalance_timeout_ms", "int32"),
                   ("server_assignor", "nstring"))),
    RecordType(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
               "ConsumerGroupTargetAssignmentMetadata", (("group_id", "string"),),
               0, (("assignment_epoch", "int32"),)),
    RecordType(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, "ConsumerGroupTargetAssignmentMember",
               (("group_id", "string"), ("member_id", "string")),
               0, (("topic_partitions", TOPIC_PARTITIONS),)),
    RecordType(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "ConsumerGroupCurrentMemberAssignment",
               (("group_id", "string"), ("member_id", "string")),
               0, (("member_epoch", "int32"), ("previous_member_epoch", "int32"),
                   ("state", "int8"), ("assigned_partitions", TOPIC_PARTITIONS),
                   ("partitions_pending_revocation", TOPIC_PARTITIONS))),
    RecordType(CONSUMER_GROUP_REGULAR_EXPRESSION, "ConsumerGroupRegularExpression",
               (("group_id", "string"), ("regular_expression", "string")),
               0, (("topics", "[string]"), ("version", "int64"), ("timestamp", "int64"))),
    RecordType(SHARE_GROUP_MEMBER_METADATA, "ShareGroupMemberMetadata", MEMBER_KEY,
               0, (("rack_id", "nstring"), ("client_id", "string"), ("client_host", "string"),
                   ("subscribed_topic_names", "[string]"))),
    RecordType(SHARE_GROUP_METADATA, "ShareGroupMetadata", GROUP_KEY,
               0, (("epoch", "int32"), ("metadata_hash", "int64"))),
    RecordType(SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, "ShareGroupTargetAssignmentMetadata",
               GROUP_KEY, 0, (("assignment_epoch", "int32"),)),
    RecordType(SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, "ShareGroupTargetAssignmentMember",
               MEMBER_KEY, 0, (("topic_partitions", TOPIC_PARTITIONS),)),
    RecordType(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, "ShareGroupCurrentMemberAssignment",
               MEMBER_KEY, 0, (("member_epoch", "int32"), ("previous_member_epoch", "int32"),
                               ("state", "int8"), ("assigned_partitions", TOPIC_PARTITIONS))),
    RecordType(SHARE_GROUP_STATE_PARTITION_METADATA, "ShareGroupStatePartitionMetadata",
               GROUP_KEY, 0, (("initializing_topics", TOPIC_INFO),
                              ("initialized_topics", TOPIC_INFO),
                              ("deleting_topics", (("topic_id", "uuid"),
                                                   ("topic_name", "string"))))),
    # Streams groups: Kafka 4.4's fields in its order (SCHEMAS of the generated classes);
    # its tagged fields are plain fields here, after the others.
    RecordType(STREAMS_GROUP_METADATA, "StreamsGroupMetadata", GROUP_KEY,
               0, (("epoch", "int32"), ("metadata_hash", "int64"),
                   ("validated_topology_epoch", "int32"),
                   ("last_assignment_configs", KEY_VALUE))),
    RecordType(STREAMS_GROUP_MEMBER_METADATA, "StreamsGroupMemberMetadata", MEMBER_KEY,
               0, (("instance_id", "nstring"), ("rack_id", "nstring"),
                   ("client_id", "string"), ("client_host", "string"),
                   ("rebalance_timeout_ms", "int32"), ("topology_epoch", "int32"),
                   ("process_id", "string"),
                   ("user_endpoint", (("host", "string"), ("port", "uint16"))),
                   ("client_tags", KEY_VALUE))),
    RecordType(STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, "StreamsGroupTargetAssignmentMetadata",
               GROUP_KEY, 0, (("assignment_epoch", "int32"), ("assignment_timestamp", "int64"))),
    RecordType(STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, "StreamsGroupTargetAssignmentMember",
               MEMBER_KEY, 0, (("active_tasks", TASK_IDS), ("standby_tasks", TASK_IDS),
                               ("warmup_tasks", TASK_IDS))),
    RecordType(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, "StreamsGroupCurrentMemberAssignment",
               MEMBER_KEY, 0, (("member_epoch", "int32"), ("previous_member_epoch", "int32"),
                               ("state", "int8"), ("active_tasks", ACTIVE_TASK_IDS),
                               ("standby_tasks", TASK_IDS), ("warmup_tasks", TASK_IDS),
                               ("active_tasks_pending_revocation", ACTIVE_TASK_IDS),
                               ("standby_tasks_pending_revocation", TASK_IDS),
                               ("warmup_tasks_pending_revocation", TASK_IDS))),
    RecordType(STREAMS_GROUP_TOPOLOGY, "StreamsGroupTopology", GROUP_KEY,
               0, (("epoch", "int32"),
                   ("subtopologies", (("subtopology_id", "string"),
                                      ("source_topics", "[string]"),
                                      ("source_topic_regex", "[string]"),
                                      ("state_changelog_topics", STREAMS_TOPIC_INFO),
                                      ("repartition_sink_topics", "[string]"),
                                      ("repartition_source_topics", STREAMS_TOPIC_INFO),
                                      ("copartition_groups",
                                       (("source_topics", "[int32]"),
                                        ("source_topic_regex", "[int32]"),
                                        ("repartition_source_topics", "[int32]"))))))),
]

CODEC = RecordCodec(TYPES)


def record(type_id: int, key: dict[str, Any], value: dict[str, Any] | None) -> CoordinatorRecord:
    return CoordinatorRecord(type_id, key, value)


def offset_commit(group: str, topic: str, partition: int, offset: int, leader_epoch: int,
                  metadata: str, commit_timestamp: int) -> CoordinatorRecord:
    return record(OFFSET_COMMIT, {"group": group, "topic": topic, "partition": partition},
                  {"offset": offset, "leader_epoch": leader_epoch, "metadata": metadata,
                   "commit_timestamp": commit_timestamp})


def offset_commit_tombstone(group: str, topic: str, partition: int) -> CoordinatorRecord:
    return record(OFFSET_COMMIT, {"group": group, "topic": topic, "partition": partition}, None)


def group_metadata_tombstone(group: str) -> CoordinatorRecord:
    return record(GROUP_METADATA, {"group": group}, None)
