"""Metadata changes in a cluster (headwater.storage=shared): only the controller writes.

The requests that change metadata (`FORWARDED`) are wrapped: on the controller, the
handler runs and its answer waits until the change is committed to the shared log (if
that fails the connection is closed: the outcome is unknown, the client retries); on any
other broker the request is forwarded to the controller in an EnvelopeRequest (key 58,
KIP-590) and the controller's answer goes back to the client, once this broker's own image
has followed the change. A forward that finds no controller in time is answered as Kafka
does, REQUEST_TIMED_OUT on every entry of the request, and an envelope the controller
refuses UNKNOWN_SERVER_ERROR (`forward_errors.py`). InitProducerId is not forwarded: every broker answers it from a
block of producer ids it asked the controller for (AllocateProducerIds, KIP-730:
`api/producers.py`), or through its transaction coordinator.

The Envelope handler is the controller's side: the inner request runs with the client's
principal and address. As in Kafka, the sender needs CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..security import acl as A
from ..wire.codec import decode_request, request_is_flexible
from ..wire.dispatch import (
    LISTENER,
    PRINCIPAL,
    ApiEntry,
    Dispatcher,
    Handler,
    Middleware,
    RequestContext,
)
from ..wire.header import parse_request_header, skip_tagged_fields
from ..wire.peer_errors import EnvelopeRefused, ForwardError
from ..wire.server import encode_frame
from .forward_errors import error_response
from .services import HasAccess, HasCluster, HasController, HasInterBroker

log = logging.getLogger("headwater.forwarding")

ENVELOPE = 58
FORWARDED = frozenset({
    19,  # CreateTopics
    20,  # DeleteTopics
    30,  # CreateAcls
    31,  # DeleteAcls
    33,  # AlterConfigs
    37,  # CreatePartitions
    44,  # IncrementalAlterConfigs
    49,  # AlterClientQuotas
    51,  # AlterUserScramCredentials
    57,  # UpdateFeatures
    # the quorum's APIs, which Kafka's brokers forward to the active controller too
    55,  # DescribeQuorum
    64,  # UnregisterBroker
    80,  # AddRaftVoter
    81,  # RemoveRaftVoter
    94,  # UnregisterController
})
FORWARDED_ATTR = "forwarded"  # set on the context of a request that came in an envelope
FOLLOW_TIMEOUT_S = 5.0


class Services(HasAccess, HasController, HasCluster, HasInterBroker, Protocol):
    """What these handlers use of the broker."""


class NotForwardable(RuntimeError):
    pass


def middleware(broker: Services) -> Middleware | None:
    """A cluster's metadata-changing requests, forwarded to the controller (cluster mode
    only)."""
    if broker.cluster is None:
        return None

    def forward(entry: ApiEntry) -> Handler | None:
        return _wrap(broker, entry.handler) if entry.api_key in FORWARDED else None
    return forward


def register(dispatcher: Dispatcher, broker: Services) -> None:
    """Serve Envelope (cluster mode only): what another broker forwards, handled by the
    dispatcher's entries (middleware included)."""
    cluster = broker.cluster
    if cluster is None:
        return

    inter_broker = broker.inter_broker.name

    async def handle_envelope(ctx: RequestContext, req: Any) -> dict[str, Any]:
        # Only brokers forward: on their listener (as Kafka takes envelopes only on its
        # privileged listener), with CLUSTER_ACTION. An envelope names the principal
        # the inner request runs as: from anyone else it would be a forged identity.
        if ctx.attrs.get(LISTENER) != inter_broker or broker.access.denies(
                ctx, A.CLUSTER_ACTION, A.CLUSTER, A.CLUSTER_NAME):
            log.warning("refused an envelope from %s on listener %s (principal %s): "
                        "envelopes come from brokers, on %s", ctx.client_host,
                        ctx.attrs.get(LISTENER), ctx.attrs.get(PRINCIPAL) or "ANONYMOUS",
                        inter_broker)
            return {"error_code": E.cluster_authorization_failed, "response_data": None}
        if not broker.is_controller():
            return {"error_code": E.not_controller, "response_data": None}
        data = bytes(req.request_data)
        try:
            header = parse_request_header(data)
            entry = dispatcher.get(header.api_key)
            if entry is None or header.api_key not in FORWARDED \
                    or not entry.serves(header.api_version):
                return {"error_code": E.invalid_request, "response_data": None}
            flexible = request_is_flexible(header.api_key, header.api_version)
            pos = skip_tagged_fields(data, header.body_offset) if flexible \
                else header.body_offset
            inner = decode_request(header.api_key, header.api_version, data, pos)
        except Exception as exc:
            log.warning("undecodable forwarded request: %r", exc)
            return {"error_code": E.invalid_request, "response_data": None}
        try:
            host = str(ipaddress.ip_address(bytes(req.client_host_address)))
        except ValueError:
            host = ctx.client_host
        try:
            principal = bytes(req.request_principal or b"").decode() or None
        except UnicodeDecodeError:
            log.warning("forwarded request with an undecodable principal")
            return {"error_code": E.invalid_request, "response_data": None}
        inner_ctx = RequestContext(
            header.api_key, header.api_version, header.correlation_id, header.client_id,
            host, ctx.connection_id,
            {LISTENER: ctx.attrs.get(LISTENER), PRINCIPAL: principal, FORWARDED_ATTR: True})
        result = entry.handler(inner_ctx, inner)
        if asyncio.iscoroutine(result):
            result = await result
        frame = encode_frame(result, inner_ctx, flexible)
        return {"error_code": 0, "response_data": frame[4:]}

    dispatcher.register(ENVELOPE, 0, 0, handle_envelope)


def _wrap(broker: Services, handler: Handler) -> Handler:
    async def wrapped(ctx: RequestContext, req: Any) -> Any:
        cluster = broker.cluster
        assert cluster is not None
        if not broker.is_controller():
            if ctx.attrs.get(FORWARDED_ATTR):
                raise NotForwardable("forwarded to a broker that is not the controller")
            try:
                body = await cluster.forward(ctx, req)
            except ForwardError as exc:
                log.warning("a request (key %d) not forwarded: %s", ctx.api_key, exc)
                code = (E.unknown_server_error if isinstance(exc, EnvelopeRefused)
                        else E.request_timed_out)
                return error_response(ctx.api_key, ctx.api_version, req, code, str(exc))
            try:
                await cluster.follow_now(FOLLOW_TIMEOUT_S)
            except (TimeoutError, OSError) as exc:
                # The controller made the change; this broker's image catches up later
                # (as a Kafka broker answers a forwarded request without waiting).
                log.info("a forwarded change not yet followed here: %r", exc)
            return body
        result = handler(ctx, req)
        if asyncio.iscoroutine(result):
            result = await result
        durable = cluster.durable()
        if durable is not None:
            await durable
        return result
    return wrapped
