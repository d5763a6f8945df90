"""Forwarding a metadata change to the controller, as Kafka's brokers do (KIP-590): the
client's request, whole, inside an EnvelopeRequest (key 58) with the client's principal
and address; the controller answers it as if the client had asked it, and the answer
goes back to the client unchanged.

The principal travels as the connection's principal attribute (a SASL user name or a
TLS subject), UTF-8; empty for an anonymous connection. The controller runs the inner
request with it, so ACLs are checked there as for a client of its own.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import struct
from typing import Any

from kio.schema.errors import ErrorCode as E
from kio.serial import entity_reader

from ..wire.client import encode_request
from ..wire.codec import build, request_is_flexible
from ..wire.dispatch import PRINCIPAL, RequestContext
from ..wire.header import skip_tagged_fields
from ..wire.peer_errors import EnvelopeRefused, ForwardError
from ..wire.schemas import load_request_schema, load_response_schema

ENVELOPE = 58
_ids = itertools.count(1)


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


async def call(host: str, port: int, api_key: int, version: int, body: dict[str, Any],
               timeout_s: float, client_id: str = "headwater-broker") -> Any:
    """One request to another broker, on a connection of its own; the decoded response.
    ForwardError if the broker cannot be reached or does not answer in time."""
    frame = encode_request(api_key, version, build(load_request_schema(api_key, version),
                                                   body), next(_ids), client_id)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port),
                                                timeout_s)
    except (OSError, TimeoutError) as exc:
        raise ForwardError(f"broker {host}:{port} unreachable: {exc}") from exc
    try:
        writer.write(frame)
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), timeout_s))
        data = await asyncio.wait_for(reader.readexactly(size[0]), timeout_s)
    except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
        raise ForwardError(f"broker {host}:{port}: {type(exc).__name__}") from exc
    finally:
        writer.close()
    cls = load_response_schema(api_key, version)
    pos = skip_tagged_fields(data, 4) if cls.__flexible__ else 4  # correlation id, tags
    result = entity_reader(cls)(data, pos)
    return result[0] if isinstance(result, tuple) else result


async def forward(host: str, port: int, ctx: RequestContext, request: Any,
                  timeout_s: float) -> bytes:
    """The controller's response body to `request` (its header removed: the caller's
    server frames it with the client's correlation id)."""
    response = await call(host, port, ENVELOPE, 0, envelope_body(ctx, request), timeout_s)
    if response.error_code != E.none or response.response_data is None:
        raise EnvelopeRefused(f"controller {host}:{port} refused the envelope: "
                              f"{response.error_code}", int(response.error_code))
    inner = response.response_data
    pos = 4  # the inner response's correlation id
    if request_is_flexible(ctx.api_key, ctx.api_version):
        pos = skip_tagged_fields(inner, pos)
    return bytes(inner[pos:])
