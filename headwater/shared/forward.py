"""Forwarding a metadata change to the controller, as Kafka's brokers do (KIP-590): the
client's request, whole, inside an EnvelopeRequest (key 58) with the client's principal
and address; the controller answers it as if the client had asked it, and the answer
goes back to the client unchanged.

The principal travels as the connection's principal attribute (a SASL user name or a
TLS subject), UTF-8; empty for an anonymous connection. The controller runs the inner
request with it, so ACLs are checked there as for a client of its own.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from kio.schema.errors import ErrorCode as E

from ..wire.client import encode_request
from ..wire.codec import request_is_flexible
from ..wire.dispatch import PRINCIPAL, RequestContext
from ..wire.header import skip_tagged_fields
from ..wire.peer_errors import EnvelopeRefused
from .peers import Peers

ENVELOPE = 58
#: The client id of the connection forwarded requests take to the controller.
FORWARD_CLIENT_ID = "headwater-forward"


def envelope_body(ctx: RequestContext, request: Any) -> dict[str, Any]:
    inner = encode_request(ctx.api_key, ctx.api_version, request, ctx.correlation_id,
                           ctx.client_id or "")[4:]
    try:
        address = ipaddress.ip_address(ctx.client_host).packed
    except ValueError:
        address = b"\x7f\x00\x00\x01"
    principal = ctx.attrs.get(PRINCIPAL)
    return {"request_data": inner,
            "request_principal": (principal or "").encode(),
            "client_host_address": address}


async def forward(peers: Peers, host: str, port: int, ctx: RequestContext, request: Any,
                  timeout_s: float) -> bytes:
    """The controller's response body to `request` (its header removed: the caller's
    server frames it with the client's correlation id), asked on the connection to it
    for forwarded requests."""
    response = await peers.call(host, port, ENVELOPE, 0, envelope_body(ctx, request),
                                timeout_s, FORWARD_CLIENT_ID)
    if response.error_code != E.none or response.response_data is None:
        raise EnvelopeRefused(f"controller {host}:{port} refused the envelope: "
                              f"{response.error_code}", int(response.error_code))
    inner = response.response_data
    pos = 4  # the inner response's correlation id
    if request_is_flexible(ctx.api_key, ctx.api_version):
        pos = skip_tagged_fields(inner, pos)
    return bytes(inner[pos:])
