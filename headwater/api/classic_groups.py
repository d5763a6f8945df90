"""JoinGroup (11), SyncGroup (14), Heartbeat (12) and LeaveGroup (13): classic groups.

JoinGroup and SyncGroup answers are parked until the rebalance reaches the right
point. The handler hands the group logic a responder that resolves a future and
awaits it; the logic calls the responder right away (errors, a follower rejoining
a stable group) or later, from another member's request or a timer.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode as E
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v9.request import JoinGroupRequest
from kio.schema.leave_group.v5.request import LeaveGroupRequest
from kio.schema.sync_group.v5.request import SyncGroupRequest

from ..coordinator.runtime import NotReady
from ..group.classic.group import join_error, sync_error
from ..group.classic.operations import JoinRequest, SyncRequest
from ..security import acl as A
from ..storage.errors import LogError
from ..wire.dispatch import Dispatcher, RequestContext, typed
from .services import HasAccess, HasGroups

if TYPE_CHECKING:
    from ..group.coordinator import GroupCoordinator

log = logging.getLogger("headwater.api.classic_groups")

_MS = datetime.timedelta(milliseconds=1)


class Services(HasAccess, HasGroups, Protocol):
    """What these handlers use of the broker."""


def _ms(value: datetime.timedelta) -> int:
    return value // _MS




class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def groups(self) -> GroupCoordinator:
        return self.broker.groups

    def parked(self, group_id: str, op: Any, error_response: Any) -> Any:
        """Run a parking operation now (in request order); return a wait for its answer,
        given once the records of the operation that answered it (this one, another
        member's or a timer's, all in the group's partition) are committed."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

        def respond(response: dict[str, Any]) -> None:
            if not future.done():
                future.set_result(response)

        try:
            self.groups().write(group_id, lambda shard, now: op(shard, respond, now))
        except NotReady as exc:
            respond(error_response(exc.code))
        except Exception:
            log.exception("group operation failed for %r", group_id)
            respond(error_response(E.unknown_server_error))
        return self.answer(group_id, future, error_response)

    async def answer(self, group_id: str, future: asyncio.Future[dict[str, Any]],
                     error_response: Any) -> dict[str, Any]:
        response = await future
        pending = self.groups().pending_commits(group_id)  # what answered it, committed
        if pending is not None:
            try:
                await pending
            except LogError:  # not committed: the member finds the coordinator again
                if response.get("error_code", 0) == 0:
                    response = error_response(E.not_coordinator)
        return {"throttle_time": 0, **response}

    # ---- JoinGroup -----------------------------------------------------------------
    def denied(self, ctx: RequestContext, group_id: str) -> bool:
        return self.broker.access.denies(ctx, A.READ, A.GROUP, group_id)

    def handle_join(self, ctx: RequestContext, req: JoinGroupRequest) -> Any:
        if self.denied(ctx, req.group_id):
            return {"throttle_time": 0, **join_error(req.member_id, E.group_authorization_failed)}
        session = _ms(req.session_timeout)
        rebalance = _ms(req.rebalance_timeout)  # -1 before v1
        join = JoinRequest(
            group_id=req.group_id, member_id=req.member_id,
            instance_id=req.group_instance_id,
            client_id=ctx.client_id or "", client_host=f"/{ctx.client_host}",
            session_timeout_ms=session,
            # v0 has no rebalance timeout: the session timeout plays that part.
            rebalance_timeout_ms=session if rebalance < 0 else rebalance,
            protocol_type=req.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
            api_version=ctx.api_version, reason=req.reason)
        return self.parked(req.group_id, lambda shard, respond, now: shard.classic.join(
            join, respond, now), lambda code: join_error(req.member_id, code))

    # ---- SyncGroup -----------------------------------------------------------------
    def handle_sync(self, ctx: RequestContext, req: SyncGroupRequest) -> Any:
        if self.denied(ctx, req.group_id):
            return {"throttle_time": 0, **sync_error(E.group_authorization_failed)}
        sync = SyncRequest(
            group_id=req.group_id, member_id=req.member_id,
            instance_id=req.group_instance_id,
            generation=req.generation_id,
            protocol_type=req.protocol_type,
            protocol_name=req.protocol_name,
            assignments={a.member_id: bytes(a.assignment) for a in req.assignments})
        return self.parked(req.group_id, lambda shard, respond, now: shard.classic.sync(
            sync, respond, now), sync_error)

    # ---- Heartbeat -----------------------------------------------------------------
    async def handle_heartbeat(self, ctx: RequestContext, req: HeartbeatRequest
                               ) -> dict[str, Any]:
        if self.denied(ctx, req.group_id):
            return {"throttle_time": 0, "error_code": E.group_authorization_failed}
        try:
            code = await self.groups().write_committed(
                req.group_id, lambda shard, now: shard.classic.heartbeat(
                    req.group_id, req.member_id, req.group_instance_id,
                    req.generation_id, now))
        except NotReady as exc:
            code = exc.code
        except LogError:
            code = E.not_coordinator
        return {"throttle_time": 0, "error_code": code}

    # ---- LeaveGroup ----------------------------------------------------------------
    async def handle_leave(self, ctx: RequestContext, req: LeaveGroupRequest
                           ) -> dict[str, Any]:
        if self.denied(ctx, req.group_id):
            return {"throttle_time": 0, "error_code": E.group_authorization_failed,
                    "members": []}
        members = [(m.member_id, m.group_instance_id) for m in req.members]
        try:
            error, codes = await self.groups().write_committed(
                req.group_id, lambda shard, now: shard.classic.leave(req.group_id, members, now))
        except NotReady as exc:
            error, codes = exc.code, []
        except LogError:
            error, codes = E.not_coordinator, []
        if ctx.api_version < 3:
            # One member, one error: the group's, else the member's.
            return {"throttle_time": 0, "error_code": error or (codes[0] if codes else 0)}
        return {"throttle_time": 0, "error_code": error, "members": [
            {"member_id": member_id, "group_instance_id": instance_id, "error_code": code}
            for (member_id, instance_id), code in zip(members, codes, strict=False)]}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(11, 0, 9, typed(JoinGroupRequest, handlers.handle_join))
    dispatcher.register(12, 0, 4, typed(HeartbeatRequest, handlers.handle_heartbeat))
    dispatcher.register(13, 0, 5, typed(LeaveGroupRequest, handlers.handle_leave, _one_member))
    dispatcher.register(14, 0, 5, typed(SyncGroupRequest, handlers.handle_sync))


def _one_member(req: Any) -> dict[str, Any] | None:
    """LeaveGroup v0-2 names one member at the top; v3 a list of them."""
    if hasattr(req, "members"):
        return None
    return {"members": ({"member_id": req.member_id, "group_instance_id": None},)}
