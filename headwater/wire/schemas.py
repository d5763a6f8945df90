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
"""


from dataclasses import dataclass, field
from typing import Any, ClassVar

from kio.index import load_request_schema as _kio_request
from kio.index import load_response_schema as _kio_response
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.schema.types import GroupId
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, i64

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


_REQUESTS: dict[tuple[int, int], type] = {(18, 5): ApiVersionsRequestV5,
                                          (42, 3): DeleteGroupsRequestV3,
                                          (94, 0): UnregisterControllerRequest}
_RESPONSES: dict[tuple[int, int], type] = {(18, 5): ApiVersionsResponseV5,
                                           (42, 3): DeleteGroupsResponseV3,
                                           (94, 0): UnregisterControllerResponse}


def load_request_schema(api_key: int, version: int) -> Any:
    extra = _REQUESTS.get((api_key, version))
    return extra if extra is not None else _kio_request(api_key, version)


def load_response_schema(api_key: int, version: int) -> Any:
    extra = _RESPONSES.get((api_key, version))
    return extra if extra is not None else _kio_response(api_key, version)
