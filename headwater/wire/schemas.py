"""Request and response schemas (no `from __future__ import annotations` here: kio reads
the field types at run time): kio's, plus the versions Kafka 4.4 added that kio 0.6.5
does not have (written in kio's generated style, so its native reader and writer and the
bounds pre-pass in `guard.py` take them like its own):

* ApiVersions v5 (KIP-1242): the request carries the cluster id and node id the client
  expects (`ApiVersionsRequest.json` of 4.4: ClusterId nullable string, NodeId int32,
  default -1); the response is v4's.
* DeleteGroups v3: each result carries an error message (`DeleteGroupsResponse.json` of
  4.4: ErrorMessage nullable string, default null).
* UnregisterController v0 (key 94, new in 4.4): ControllerId int32; the answer an error
  code and message.
* StreamsGroupHeartbeat v1 (KIP-1331): the request is v0's; the response drops v0's
  AcceptableRecoveryLagLegacy int32 (kio's `acceptable_recovery_lag` of v0) for
  AcceptableRecoveryLag int64 (default -1) after TaskOffsetIntervalMs, and adds
  TopologyDescriptionRequired bool after WarmupTasks.
* StreamsGroupTopologyDescriptionUpdate v0 (key 93, KIP-1357, new in 4.4): GroupId,
  MemberId, TopologyEpoch int32 and a TopologyDescription (subtopologies of nodes, global
  stores); the answer an error code and message.
* StreamsGroupDescribe v1 (KIP-1331, KIP-1357): the request adds IncludeTopologyDescription
  bool; each described group adds TopologyDescription (nullable, with its nested
  structs), TopologyDescriptionStatus int8 (default 0) and AssignorName (nullable string).

The streams classes are kio's v0 ones (`kio.schema.streams_group_*.v0`) with 4.4's
changes, their nested classes prefixed (StreamsHeartbeat*, StreamsHeartbeatResponse*,
StreamsDescribeResponse*) as they share one module here.
"""


import datetime
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kio.index import load_request_schema as _kio_request
from kio.index import load_response_schema as _kio_response
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.schema.types import GroupId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64, u16

# ---- ApiVersions v5 ------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionsRequestV5:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    client_software_name: str = field(metadata={"kafka_type": "string"})
    client_software_version: str = field(metadata={"kafka_type": "string"})
    cluster_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The cluster id the client expects, or null (KIP-1242)."""
    node_id: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """The node id the client expects, or -1."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionV5:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    api_key: i16 = field(metadata={"kafka_type": "int16"})
    min_version: i16 = field(metadata={"kafka_type": "int16"})
    max_version: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class SupportedFeatureKeyV5:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    name: str = field(metadata={"kafka_type": "string"})
    min_version: i16 = field(metadata={"kafka_type": "int16"})
    max_version: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalizedFeatureKeyV5:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    name: str = field(metadata={"kafka_type": "string"})
    max_version_level: i16 = field(metadata={"kafka_type": "int16"})
    min_version_level: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionsResponseV5:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    api_keys: tuple[ApiVersionV5, ...]
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    supported_features: tuple[SupportedFeatureKeyV5, ...] = field(
        metadata={"tag": 0}, default=())
    finalized_features_epoch: i64 = field(
        metadata={"kafka_type": "int64", "tag": 1}, default=i64(-1))
    finalized_features: tuple[FinalizedFeatureKeyV5, ...] = field(
        metadata={"tag": 2}, default=())
    zk_migration_ready: bool = field(
        metadata={"kafka_type": "bool", "tag": 3}, default=False)


# ---- DeleteGroups v3 -----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsRequestV3:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(42)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    groups_names: tuple[GroupId, ...] = field(metadata={"kafka_type": "string"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletableGroupResultV3:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(42)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsResponseV3:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(42)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    results: tuple[DeletableGroupResultV3, ...]


# ---- UnregisterController v0 (key 94) ------------------------------------------------
# Kafka 4.4 (`kafka-cluster unregister-controller`). The error code is a plain int16 here:
# its CONTROLLER_ID_NOT_REGISTERED (136) is not in kio's ErrorCode.


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterControllerRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(94)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    controller_id: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterControllerResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(94)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)


# ---- StreamsGroupTopologyDescriptionUpdate v0 ------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionUpdateNode:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: str = field(metadata={"kafka_type": "string"})
    node_type: i8 = field(metadata={"kafka_type": "int8"})
    source_topics: tuple[TopicName, ...] = field(metadata={"kafka_type": "string"}, default=())
    sink_topic: TopicName | None = field(metadata={"kafka_type": "string"}, default=None)
    stores: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    successors: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionUpdateSubtopology:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    nodes: tuple[TopologyDescriptionUpdateNode, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionUpdateGlobalStore:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    source: TopologyDescriptionUpdateNode
    processor: TopologyDescriptionUpdateNode


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionUpdateDescription:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    subtopologies: tuple[TopologyDescriptionUpdateSubtopology, ...]
    global_stores: tuple[TopologyDescriptionUpdateGlobalStore, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupTopologyDescriptionUpdateRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})
    topology_epoch: i32 = field(metadata={"kafka_type": "int32"})
    topology_description: TopologyDescriptionUpdateDescription


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupTopologyDescriptionUpdateResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)


# ---- StreamsGroupHeartbeat v1 request --------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsHeartbeatKeyValueV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    key: str = field(metadata={"kafka_type": "string"})
    """key of the config"""
    value: str = field(metadata={"kafka_type": "string"})
    """value of the config"""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsHeartbeatTopicInfoV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    """The name of the topic."""
    partitions: i32 = field(metadata={"kafka_type": "int32"})
    """The number of partitions in the topic. Can be 0 if no specific number of partitions is enforced. Always 0 for changelog topics."""
    replication_factor: i16 = field(metadata={"kafka_type": "int16"})
    """The replication factor of the topic. Can be 0 if the default replication factor should be used."""
    topic_configs: tuple[StreamsHeartbeatKeyValueV1, ...]
    """Topic-level configurations as key-value pairs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsHeartbeatCopartitionGroupV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    source_topics: tuple[i16, ...] = field(metadata={"kafka_type": "int16"}, default=())
    """The topics the topology reads from. Index into the array on the subtopology level."""
    source_topic_regex: tuple[i16, ...] = field(
        metadata={"kafka_type": "int16"}, default=()
    )
    """Regular expressions identifying topics the subtopology reads from. Index into the array on the subtopology level."""
    repartition_source_topics: tuple[i16, ...] = field(
        metadata={"kafka_type": "int16"}, default=()
    )
    """The set of source topics that are internally created repartition topics. Index into the array on the subtopology level."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsHeartbeatSubtopologyV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    """String to uniquely identify the subtopology. Deterministically generated from the topology"""
    source_topics: tuple[TopicName, ...] = field(
        metadata={"kafka_type": "string"}, default=()
    )
    """The topics the topology reads from."""
    source_topic_regex: tuple[str, ...] = field(
        metadata={"kafka_type": "string"}, default=()
    )
    """The regular expressions identifying topics the subtopology reads from."""
    state_changelog_topics: tuple[StreamsHeartbeatTopicInfoV1, ...]
    """The set of state changelog topics associated with this subtopology. Created automatically."""
    repartition_sink_topics: tuple[TopicName, ...] = field(
        metadata={"kafka_type": "string"}, default=()
    )
    """The repartition topics the subtopology writes to."""
    repartition_source_topics: tuple[StreamsHeartbeatTopicInfoV1, ...]
    """The set of source topics that are internally created repartition topics. Created automatically."""
    copartition_groups: tuple[StreamsHeartbeatCopartitionGroupV1, ...]
    """A subset of source topics that must be copartitioned."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsHeartbeatTopologyV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The epoch of the topology. Used to check if the topology corresponds to the topology initialized on the brokers."""
    subtopologies: tuple[StreamsHeartbeatSubtopologyV1, ...]
    """The sub-topologies of the streams application."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsHeartbeatTaskIdsV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    """The subtopology identifier."""
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """The partitions of the input topics processed by this member."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsHeartbeatEndpointV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    host: str = field(metadata={"kafka_type": "string"})
    """host of the endpoint"""
    port: u16 = field(metadata={"kafka_type": "uint16"})
    """port of the endpoint"""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsHeartbeatTaskOffsetV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    """The subtopology identifier."""
    partition: i32 = field(metadata={"kafka_type": "int32"})
    """The partition."""
    offset: i64 = field(metadata={"kafka_type": "int64"})
    """The offset."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupHeartbeatRequestV1:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    """The group identifier."""
    member_id: str = field(metadata={"kafka_type": "string"})
    """The member ID generated by the streams consumer. The member ID must be kept during the entire lifetime of the streams consumer process."""
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The current member epoch; 0 to join the group; -1 to leave the group; -2 to indicate that the static member will rejoin."""
    endpoint_information_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The current endpoint epoch of this client, represents the latest endpoint epoch this client received"""
    instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """null if not provided or if it didn't change since the last heartbeat; the instance ID for static membership otherwise."""
    rack_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """null if not provided or if it didn't change since the last heartbeat; the rack ID of the member otherwise."""
    rebalance_timeout: i32Timedelta = field(
        metadata={"kafka_type": "timedelta_i32"},
        default=i32Timedelta.parse(datetime.timedelta(milliseconds=-1)),
    )
    """-1 if it didn't change since the last heartbeat; the maximum time in milliseconds that the coordinator will wait on the member to revoke its tasks otherwise."""
    topology: StreamsHeartbeatTopologyV1 | None = field(default=None)
    """The topology metadata of the streams application. Used to initialize the topology of the group and to check if the topology corresponds to the topology initialized for the group. Only sent when memberEpoch = 0, must be non-empty. Null otherwise."""
    active_tasks: tuple[StreamsHeartbeatTaskIdsV1, ...] | None
    """Currently owned active tasks for this client. Null if unchanged since last heartbeat."""
    standby_tasks: tuple[StreamsHeartbeatTaskIdsV1, ...] | None
    """Currently owned standby tasks for this client. Null if unchanged since last heartbeat."""
    warmup_tasks: tuple[StreamsHeartbeatTaskIdsV1, ...] | None
    """Currently owned warm-up tasks for this client. Null if unchanged since last heartbeat."""
    process_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """Identity of the streams instance that may have multiple consumers. Null if unchanged since last heartbeat."""
    user_endpoint: StreamsHeartbeatEndpointV1 | None = field(default=None)
    """User-defined endpoint for Interactive Queries. Null if unchanged since last heartbeat, or if not defined on the client."""
    client_tags: tuple[StreamsHeartbeatKeyValueV1, ...] | None
    """Used for rack-aware assignment algorithm. Null if unchanged since last heartbeat."""
    task_offsets: tuple[StreamsHeartbeatTaskOffsetV1, ...] | None
    """Cumulative changelog offsets for tasks. Only updated when a warm-up task has caught up, and according to the task offset interval. Null if unchanged since last heartbeat."""
    task_end_offsets: tuple[StreamsHeartbeatTaskOffsetV1, ...] | None
    """Cumulative changelog end-offsets for tasks. Only updated when a warm-up task has caught up, and according to the task offset interval. Null if unchanged since last heartbeat."""
    shutdown_application: bool = field(metadata={"kafka_type": "bool"}, default=False)
    """Whether all Streams clients in the group should shut down."""


# ---- StreamsGroupHeartbeat v1 response -------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsHeartbeatResponseStatusV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    status_code: i8 = field(metadata={"kafka_type": "int8"})
    """A code to indicate that a particular status is active for the group membership"""
    status_detail: str = field(metadata={"kafka_type": "string"})
    """A string representation of the status."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsHeartbeatResponseTaskIdsV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    """The subtopology identifier."""
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """The partitions of the input topics processed by this member."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsHeartbeatResponseEndpointV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    host: str = field(metadata={"kafka_type": "string"})
    """host of the endpoint"""
    port: u16 = field(metadata={"kafka_type": "uint16"})
    """port of the endpoint"""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsHeartbeatResponseTopicPartitionV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    topic: TopicName = field(metadata={"kafka_type": "string"})
    """topic name"""
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """partitions"""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsHeartbeatResponseEndpointToPartitionsV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    user_endpoint: StreamsHeartbeatResponseEndpointV1
    """User-defined endpoint to connect to the node"""
    active_partitions: tuple[StreamsHeartbeatResponseTopicPartitionV1, ...]
    """The source topic partitions, including repartition source topics, of the active tasks assigned to this member"""
    standby_partitions: tuple[StreamsHeartbeatResponseTopicPartitionV1, ...]
    """The source topic partitions, including repartition source topics, of the standby and warm-up tasks assigned to this member"""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupHeartbeatResponseV1:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """The duration in milliseconds for which the request was throttled due to a quota violation, or zero if the request did not violate any quota."""
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    """The top-level error code, or 0 if there was no error"""
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The top-level error message, or null if there was no error."""
    member_id: str = field(metadata={"kafka_type": "string"})
    """The member id is always generated by the streams consumer."""
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The member epoch."""
    heartbeat_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """The heartbeat interval in milliseconds."""
    task_offset_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """The interval in which the task changelog offsets on a client are updated on the broker. The offsets are sent with the next heartbeat after this time has passed."""
    acceptable_recovery_lag: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """The maximum acceptable lag (number of offsets to catch up) for a client to be considered caught-up enough to receive an active task assignment. A value of -1 indicates the broker does not support this configuration."""
    status: tuple[StreamsHeartbeatResponseStatusV1, ...] | None
    """Indicate zero or more status for the group."""
    active_tasks: tuple[StreamsHeartbeatResponseTaskIdsV1, ...] | None
    """Assigned active tasks for this client. Null if unchanged since last heartbeat."""
    standby_tasks: tuple[StreamsHeartbeatResponseTaskIdsV1, ...] | None
    """Assigned standby tasks for this client. Null if unchanged since last heartbeat."""
    warmup_tasks: tuple[StreamsHeartbeatResponseTaskIdsV1, ...] | None
    """Assigned warm-up tasks for this client. Null if unchanged since last heartbeat."""
    topology_description_required: bool = field(
        metadata={"kafka_type": "bool"}, default=False
    )
    """True if the broker does not have an up-to-date topology description for this group. The client should send the topology description via StreamsGroupTopologyDescriptionUpdate."""
    endpoint_information_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The endpoint epoch set in the response"""
    partitions_by_user_endpoint: tuple[StreamsHeartbeatResponseEndpointToPartitionsV1, ...] | None
    """Global assignment information used for IQ. There is one entry per member, so several entries carry the same UserEndpoint when a client runs more than one stream thread; clients must union the entries of an endpoint. Null if unchanged since last heartbeat."""


# ---- StreamsGroupDescribe v1 request ---------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupDescribeRequestV1:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_ids: tuple[GroupId, ...] = field(
        metadata={"kafka_type": "string"}, default=()
    )
    """The ids of the groups to describe"""
    include_authorized_operations: bool = field(metadata={"kafka_type": "bool"})
    """Whether to include authorized operations."""
    include_topology_description: bool = field(
        metadata={"kafka_type": "bool"}, default=False
    )
    """Whether to include the full topology description from the topology description plugin in the response."""


# ---- StreamsGroupDescribe v1 response --------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsDescribeResponseKeyValueV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    key: str = field(metadata={"kafka_type": "string"})
    """key of the config"""
    value: str = field(metadata={"kafka_type": "string"})
    """value of the config"""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsDescribeResponseTopicInfoV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    name: TopicName = field(metadata={"kafka_type": "string"})
    """The name of the topic."""
    partitions: i32 = field(metadata={"kafka_type": "int32"})
    """The number of partitions in the topic. Can be 0 if no specific number of partitions is enforced. Always 0 for changelog topics."""
    replication_factor: i16 = field(metadata={"kafka_type": "int16"})
    """The replication factor of the topic. Can be 0 if the default replication factor should be used."""
    topic_configs: tuple[StreamsDescribeResponseKeyValueV1, ...]
    """Topic-level configurations as key-value pairs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsDescribeResponseSubtopologyV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    """String to uniquely identify the subtopology."""
    source_topics: tuple[TopicName, ...] = field(
        metadata={"kafka_type": "string"}, default=()
    )
    """The topics the subtopology reads from."""
    repartition_sink_topics: tuple[TopicName, ...] = field(
        metadata={"kafka_type": "string"}, default=()
    )
    """The repartition topics the subtopology writes to."""
    state_changelog_topics: tuple[StreamsDescribeResponseTopicInfoV1, ...]
    """The set of state changelog topics associated with this subtopology. Created automatically."""
    repartition_source_topics: tuple[StreamsDescribeResponseTopicInfoV1, ...]
    """The set of source topics that are internally created repartition topics. Created automatically."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsDescribeResponseTopologyV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The epoch of the currently initialized topology for this group."""
    subtopologies: tuple[StreamsDescribeResponseSubtopologyV1, ...] | None
    """The subtopologies of the streams application. This contains the configured subtopologies, where the number of partitions are set and any regular expressions are resolved to actual topics. Null if the group is uninitialized, source topics are missing or incorrectly partitioned."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsDescribeResponseEndpointV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    host: str = field(metadata={"kafka_type": "string"})
    """host of the endpoint"""
    port: u16 = field(metadata={"kafka_type": "uint16"})
    """port of the endpoint"""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsDescribeResponseTaskOffsetV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    """The subtopology identifier."""
    partition: i32 = field(metadata={"kafka_type": "int32"})
    """The partition."""
    offset: i64 = field(metadata={"kafka_type": "int64"})
    """The offset."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsDescribeResponseTaskIdsV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    """The subtopology identifier."""
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """The partitions of the input topics processed by this member."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsDescribeResponseAssignmentV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    active_tasks: tuple[StreamsDescribeResponseTaskIdsV1, ...]
    """Active tasks for this client."""
    standby_tasks: tuple[StreamsDescribeResponseTaskIdsV1, ...]
    """Standby tasks for this client."""
    warmup_tasks: tuple[StreamsDescribeResponseTaskIdsV1, ...]
    """Warm-up tasks for this client. """


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsDescribeResponseMemberV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    member_id: str = field(metadata={"kafka_type": "string"})
    """The member ID."""
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The member epoch."""
    instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The member instance ID for static membership."""
    rack_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The rack ID."""
    client_id: str = field(metadata={"kafka_type": "string"})
    """The client ID."""
    client_host: str = field(metadata={"kafka_type": "string"})
    """The client host."""
    topology_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The epoch of the topology on the client."""
    process_id: str = field(metadata={"kafka_type": "string"})
    """Identity of the streams instance that may have multiple clients. """
    user_endpoint: StreamsDescribeResponseEndpointV1 | None = field(default=None)
    """User-defined endpoint for Interactive Queries. Null if not defined for this client."""
    client_tags: tuple[StreamsDescribeResponseKeyValueV1, ...]
    """Used for rack-aware assignment algorithm."""
    task_offsets: tuple[StreamsDescribeResponseTaskOffsetV1, ...]
    """Cumulative changelog offsets for tasks."""
    task_end_offsets: tuple[StreamsDescribeResponseTaskOffsetV1, ...]
    """Cumulative changelog end offsets for tasks."""
    assignment: StreamsDescribeResponseAssignmentV1
    """The current assignment."""
    target_assignment: StreamsDescribeResponseAssignmentV1
    """The target assignment."""
    is_classic: bool = field(metadata={"kafka_type": "bool"})
    """True for classic members that have not been upgraded yet."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsDescribeResponseTopologyDescriptionNodeV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    name: str = field(metadata={"kafka_type": "string"})
    """The name of this node (e.g., KSTREAM-SOURCE-0000000000)."""
    node_type: i8 = field(metadata={"kafka_type": "int8"})
    """The type of this node: 1=SOURCE, 2=PROCESSOR, 3=SINK."""
    source_topics: tuple[TopicName, ...] = field(
        metadata={"kafka_type": "string"}, default=()
    )
    """The source topics this node reads from. Defined only for source nodes, may be empty if source topics are dynamically determined."""
    sink_topic: TopicName | None = field(metadata={"kafka_type": "string"}, default=None)
    """The topic this node writes to. Defined only for sink nodes, may be null if sink topic is dynamically determined."""
    stores: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    """The state store names accessed by this node. Defined only for processor nodes."""
    successors: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    """The names of successor nodes in the processing graph. Predecessor relationships are reconstructed from this field."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsDescribeResponseTopologyDescriptionSubtopologyV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    """The subtopology identifier, unique within the topology."""
    nodes: tuple[StreamsDescribeResponseTopologyDescriptionNodeV1, ...]
    """The processing nodes in this subtopology."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsDescribeResponseTopologyDescriptionGlobalStoreV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    source: StreamsDescribeResponseTopologyDescriptionNodeV1
    """The source node providing data to the global store."""
    processor: StreamsDescribeResponseTopologyDescriptionNodeV1
    """The processor node that populates the global store."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsDescribeResponseTopologyDescriptionV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    subtopologies: tuple[StreamsDescribeResponseTopologyDescriptionSubtopologyV1, ...]
    """The subtopologies that make up this topology."""
    global_stores: tuple[StreamsDescribeResponseTopologyDescriptionGlobalStoreV1, ...]
    """Global state stores used by this topology."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsDescribeResponseDescribedGroupV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    """The describe error, or 0 if there was no error."""
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The top-level error message, or null if there was no error."""
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    """The group ID string."""
    group_state: str = field(metadata={"kafka_type": "string"})
    """The group state string, or the empty string."""
    group_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The group epoch."""
    assignment_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The assignment epoch."""
    topology: StreamsDescribeResponseTopologyV1 | None = field(default=None)
    """The topology metadata currently initialized for the streams application. Can be null in case of a describe error."""
    members: tuple[StreamsDescribeResponseMemberV1, ...]
    """The members."""
    authorized_operations: i32 = field(
        metadata={"kafka_type": "int32"}, default=i32(-2147483648)
    )
    """32-bit bitfield to represent authorized operations for this group."""
    topology_description: StreamsDescribeResponseTopologyDescriptionV1 | None = field(default=None)
    """The full topology description for this group. Non-null if and only if TopologyDescriptionStatus is AVAILABLE (3); null otherwise."""
    topology_description_status: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    """The status of the topology description for this group, paired with TopologyDescription: 0=NOT_REQUESTED (client did not set IncludeTopologyDescription; TopologyDescription is null); 1=NOT_STORED (no description recorded for this group; TopologyDescription is null); 2=ERROR (broker failed to fetch the description, see broker logs; TopologyDescription is null); 3=AVAILABLE (TopologyDescription is non-null and carries the description)."""
    assignor_name: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The task assignor that the group coordinator will use for the next assignment computation. This may differ from the assignor that computed the current assignment, because changing the assignor configuration does not trigger a rebalance. Null in case of a describe error."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupDescribeResponseV1:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """The duration in milliseconds for which the request was throttled due to a quota violation, or zero if the request did not violate any quota."""
    groups: tuple[StreamsDescribeResponseDescribedGroupV1, ...]
    """Each described group."""


_REQUESTS: dict[tuple[int, int], type] = {(18, 5): ApiVersionsRequestV5,
                                          (42, 3): DeleteGroupsRequestV3,
                                          (88, 1): StreamsGroupHeartbeatRequestV1,
                                          (89, 1): StreamsGroupDescribeRequestV1,
                                          (93, 0): StreamsGroupTopologyDescriptionUpdateRequest,
                                          (94, 0): UnregisterControllerRequest}
_RESPONSES: dict[tuple[int, int], type] = {(18, 5): ApiVersionsResponseV5,
                                           (42, 3): DeleteGroupsResponseV3,
                                           (88, 1): StreamsGroupHeartbeatResponseV1,
                                           (89, 1): StreamsGroupDescribeResponseV1,
                                           (93, 0): StreamsGroupTopologyDescriptionUpdateResponse,
                                           (94, 0): UnregisterControllerResponse}


def load_request_schema(api_key: int, version: int) -> Any:
    extra = _REQUESTS.get((api_key, version))
    return extra if extra is not None else _kio_request(api_key, version)


def load_response_schema(api_key: int, version: int) -> Any:
    extra = _RESPONSES.get((api_key, version))
    return extra if extra is not None else _kio_response(api_key, version)
