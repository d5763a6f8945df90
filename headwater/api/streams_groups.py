"""StreamsGroupHeartbeat (88), StreamsGroupDescribe (89) and
StreamsGroupTopologyDescriptionUpdate (93): KIP-1071 streams groups.

The heartbeat handler turns the kio request into a `StreamsHeartbeatRequest` for the
group's shard (`headwater.group.streams`), answers once the member's records are
committed, and then does what Kafka's KafkaApis does after the coordinator: creates the
internal topics (repartition and changelog topics) the topology needs and the metadata
lacks, so that the next heartbeat finds them. The three are refused (UNSUPPORTED_VERSION)
while streams.version is below 1 (features.py's gate), as Kafka's.

Versions 0-1 of both, as Kafka 4.4 (the v1 schemas are in `wire/schemas.py`: kio has v0
only). Heartbeat v1 answers the acceptable recovery lag as an int64 and whether the broker
wants the topology description (never: headwater has no topology-description plugin);
v0's int32 field for the lag is left at 0, as Kafka 4.4 leaves its
AcceptableRecoveryLagLegacy. Describe v1 names the assignor and, for a group described,
answers the topology description's status: NOT_STORED when asked for (Kafka without a
plugin), NOT_REQUESTED otherwise; a group not described keeps the defaults (no assignor,
NOT_REQUESTED), as Kafka's. A description pushed anyway (93) is refused as Kafka 4.4
refuses it without a plugin.
"""

from __future__ import annotations

import datetime
import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..coordinator.runtime import NotReady
from ..group.streams.assignor import NAME as ASSIGNOR_NAME
from ..group.streams.configured import MISSING_INTERNAL_TOPICS, InternalTopic
from ..group.streams.operations import (
    StreamsHeartbeatRequest,
    StreamsHeartbeatResponse,
    streams_describe_error,
)
from ..group.streams.tasks import from_task_ids, task_ids
from ..group.streams.topology import Topology
from ..metadata.topics import INTERNAL_TOPICS, topic_name_error
from ..security import acl as A
from ..storage.errors import LogError
from ..wire.dispatch import Dispatcher, RequestContext, typed
from ..wire.schemas import (
    StreamsGroupDescribeRequestV1,
    StreamsGroupHeartbeatRequestV1,
    StreamsGroupTopologyDescriptionUpdateRequest,
)
from .services import HasAccess, HasGroups

if TYPE_CHECKING:
    from ..group.shard import GroupShard

log = logging.getLogger("headwater.api.streams_groups")
_MS = datetime.timedelta(milliseconds=1)
# StreamsGroupDescribe v1's TopologyDescriptionStatus (KIP-1331).
NOT_REQUESTED, NOT_STORED = 0, 1


class InternalTopicCreator(Protocol):
    def create_internal_topics(self, ctx: RequestContext,
                               topics: Sequence[InternalTopic]) -> None:
        """Create them (here or on the controller), in the background."""


#: Kafka 4.4's answer to a topology description pushed to a broker without a plugin.
NO_DESCRIPTION_PLUGIN = "The broker has no streams group topology description plugin configured."


class Services(HasAccess, HasGroups, InternalTopicCreator, Protocol):
    """What these handlers use of the broker."""


def _millis(value: Any) -> int:
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return value // _MS
    return int(value)


def to_request(ctx: RequestContext, req: Any) -> StreamsHeartbeatRequest:
    topology = None
    if req.topology is not None:
        topology = Topology.of(req.topology.epoch, req.topology.subtopologies)
    active, standby, warmup = (None if tasks is None else from_task_ids(tasks)
                               for tasks in (req.active_tasks, req.standby_tasks,
                                             req.warmup_tasks))
    endpoint = req.user_endpoint
    tags = req.client_tags
    return StreamsHeartbeatRequest(
        group_id=req.group_id, member_id=req.member_id, member_epoch=int(req.member_epoch),
        endpoint_information_epoch=int(req.endpoint_information_epoch),
        instance_id=req.instance_id, rack_id=req.rack_id,
        rebalance_timeout_ms=_millis(req.rebalance_timeout), topology=topology,
        sent_tasks=(active, standby, warmup), process_id=req.process_id,
        user_endpoint=(endpoint.host, int(endpoint.port)) if endpoint is not None else None,
        client_tags=tuple((t.key, t.value) for t in tags) if tags is not None else None,
        shutdown_application=bool(req.shutdown_application),
        client_id=ctx.client_id or "", client_host=f"/{ctx.client_host}",
        api_version=ctx.api_version)


def to_response(resp: StreamsHeartbeatResponse, settings: Mapping[str, str], version: int
                ) -> dict[str, Any]:
    """The answer of `version`. An error and a member's leaving (epoch -1, or -2 for a
    static member) answer the schema's defaults for the task offset interval and the lag
    (0, and -1 for v1's lag), as Kafka's error and leave responses; v0's int32 lag (kio's
    `acceptable_recovery_lag`, Kafka's AcceptableRecoveryLagLegacy) is 0 even otherwise,
    as Kafka 4.4 sets only v1's int64 field. `settings`: the group's effective `streams.*`
    configs (its overrides, else the broker's defaults)."""
    assigned = resp.assignment
    configured: dict[str, Any] = {}
    if resp.error_code == E.none and resp.member_epoch >= 0:
        configured["task_offset_interval"] = int(settings["streams.task.offset.interval.ms"])
        configured["acceptable_recovery_lag"] = int(
            settings["streams.acceptable.recovery.lag"]) if version >= 1 else 0
    return {
        "throttle_time": 0, "error_code": resp.error_code, "error_message": resp.error_message,
        "member_id": resp.member_id or "", "member_epoch": resp.member_epoch,
        "heartbeat_interval": resp.heartbeat_interval_ms, **configured,
        "topology_description_required": False,
        # never null: Kafka's answers (errors and leaving too) carry a list, maybe empty
        "status": [{"status_code": c, "status_detail": d} for c, d in resp.status],
        "active_tasks": task_ids(assigned.active) if assigned is not None else None,
        "standby_tasks": task_ids(assigned.standby) if assigned is not None else None,
        "warmup_tasks": task_ids(assigned.warmup) if assigned is not None else None,
        "endpoint_information_epoch": resp.endpoint_information_epoch,
        "partitions_by_user_endpoint": list(resp.endpoints) if resp.endpoints is not None
        else None}


def refused(access: Any, ctx: RequestContext, group_id: str,
            topology: Topology | None) -> StreamsHeartbeatResponse | None:
    """KafkaApis' checks before the coordinator: READ on the group; a topology naming
    Kafka's internal topics or illegal names; DESCRIBE on every topic it names."""
    if not access.allowed(ctx, A.READ, A.GROUP, group_id):
        return StreamsHeartbeatResponse(E.group_authorization_failed, None)
    if topology is None:
        return None
    required = list(dict.fromkeys(
        t for s in topology.subtopologies
        for t in (list(s.source_topics) + list(s.repartition_sink_topics)
                  + [i.name for i in s.repartition_source_topics]
                  + [i.name for i in s.state_changelog_topics])))
    prohibited = [t for t in required if t in INTERNAL_TOPICS]
    if prohibited:
        return StreamsHeartbeatResponse(
            E.streams_invalid_topology, f"Use of Kafka internal topics {','.join(prohibited)} "
            f"in a Kafka Streams topology is prohibited.")
    illegal = [t for t in required if topic_name_error(t) is not None]
    if illegal:
        return StreamsHeartbeatResponse(
            E.streams_invalid_topology,
            f"Topic names {','.join(illegal)} are not valid topic names.")
    if any(not access.allowed(ctx, A.DESCRIBE, A.TOPIC, t) for t in required):
        return StreamsHeartbeatResponse(E.topic_authorization_failed, None)
    return None


def _uncreatable(access: Any, ctx: RequestContext, topics: Sequence[InternalTopic]
                 ) -> list[str]:
    """Internal topics the principal may not create (CREATE on the cluster, else on
    each topic): they are reported, not created, as Kafka's."""
    if access.allowed(ctx, A.CREATE, A.CLUSTER, A.CLUSTER_NAME):
        return []
    return [t.name for t in topics if not access.allowed(ctx, A.CREATE, A.TOPIC, t.name)]


def _with_unauthorized(resp: StreamsHeartbeatResponse, names: list[str]
                       ) -> StreamsHeartbeatResponse:
    """MISSING_INTERNAL_TOPICS's detail says which topics the principal may not create."""
    note = f"Unauthorized to CREATE on topics {','.join(names)}."
    status = list(resp.status)
    for i, (code, detail) in enumerate(status):
        if code == MISSING_INTERNAL_TOPICS:
            status[i] = (code, f"{detail}; {note}")
            break
    else:
        status.append((MISSING_INTERNAL_TOPICS, note))
    return replace(resp, status=tuple(status))


def register(dispatcher: Dispatcher, broker: Services) -> None:
    async def handle_heartbeat(ctx: RequestContext, req: Any) -> dict[str, Any]:
        request = to_request(ctx, req)
        config = broker.groups.streams_group_config(request.group_id)
        no = refused(broker.access, ctx, request.group_id, request.topology)
        if no is not None:
            return to_response(no, config, ctx.api_version)
        try:  # answered once the member's records are committed
            resp = await broker.groups.write_committed(
                request.group_id, lambda shard, now: shard.streams.heartbeat(request, now))
        except NotReady as exc:
            resp = StreamsHeartbeatResponse(exc.code)
        except LogError:  # not committed: the client finds the coordinator again
            resp = StreamsHeartbeatResponse(E.not_coordinator)
        if resp.to_create:
            unauthorized = _uncreatable(broker.access, ctx, resp.to_create)
            if unauthorized:
                resp = _with_unauthorized(resp, unauthorized)
            else:
                broker.create_internal_topics(ctx, resp.to_create)
        return to_response(resp, config, ctx.api_version)

    async def handle_describe(ctx: RequestContext, req: Any) -> dict[str, Any]:
        include = bool(req.include_authorized_operations)
        status = NOT_STORED if req.include_topology_description else NOT_REQUESTED
        out = []
        for group_id in req.group_ids:
            if broker.access.denies(ctx, A.DESCRIBE, A.GROUP, group_id):
                out.append(streams_describe_error(group_id, E.group_authorization_failed,
                                                  None))
                continue
            try:  # answered once what it read is committed
                entry, = await broker.groups.read_committed(
                    group_id, functools.partial(_describe_one, group_id, include))
            except NotReady as exc:
                entry = streams_describe_error(group_id, exc.code, None)
            except LogError:
                entry = streams_describe_error(group_id, E.not_coordinator, None)
            if entry["error_code"] == E.none:  # v1's fields; an error keeps the defaults
                entry = {**entry, "assignor_name": ASSIGNOR_NAME, "topology_description": None,
                         "topology_description_status": status}
            out.append(entry)
        return {"throttle_time": 0, "groups": out}

    def handle_topology_description(ctx: RequestContext, req: Any) -> dict[str, Any]:
        """StreamsGroupTopologyDescriptionUpdate (93): a member pushes its topology's
        description for the broker's plugin (KIP-1357). As Kafka 4.4 without one
        (`group.streams.topology.description.plugin` unset, its default): READ on the
        group, then UNSUPPORTED_VERSION naming the missing plugin (the heartbeat never
        asks for a description, so clients do not send one)."""
        if not broker.access.allowed(ctx, A.READ, A.GROUP, req.group_id):
            return {"throttle_time": 0, "error_code": E.group_authorization_failed,
                    "error_message": "Group authorization failed."}
        return {"throttle_time": 0, "error_code": E.unsupported_version,
                "error_message": NO_DESCRIPTION_PLUGIN}

    dispatcher.register(88, 0, 1, typed(StreamsGroupHeartbeatRequestV1, handle_heartbeat))
    dispatcher.register(89, 0, 1, typed(StreamsGroupDescribeRequestV1, handle_describe))
    dispatcher.register(93, 0, 0, typed(StreamsGroupTopologyDescriptionUpdateRequest,
                                        handle_topology_description))


def _describe_one(group_id: str, include: bool, shard: GroupShard) -> list[dict[str, Any]]:
    return shard.streams.describe([group_id], include)

