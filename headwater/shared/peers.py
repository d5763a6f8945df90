"""Connections to the other brokers of a cluster, as Kafka's inter-broker channels: one per
peer and purpose (the request's client id: a forwarded change, a held marker, a share
state write), kept open and shared by every request of that purpose, on the peer's
inter-broker listener, TLS-wrapped and SASL-authenticated as that listener asks
(`security/inter_broker.py`). Requests on one connection are answered by correlation
id, so a slow one (a marker waiting for its commit) holds back only its own purpose.

A connection that fails fails the requests waiting on it (ForwardError) and is opened
again by the next request; a refused authentication is `PeerAuthenticationError`, whose
message names the setting holding the broker's credentials.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import struct
from typing import Any

from kio.serial import entity_reader

from ..wire.client import encode_request
from ..wire.client_security import AuthenticationError, ClientSecurity, sasl_exchange
from ..wire.header import skip_tagged_fields
from ..wire.peer_errors import ForwardError, PeerAuthenticationError
from ..wire.schemas import load_response_schema

log = logging.getLogger("headwater.shared.peers")

BROKER_CLIENT_ID = "headwater-broker"


API_VERSIONS = 18


def _decode(frame: bytes, response_type: Any) -> Any:
    """A response body (after its correlation id, and the header's tagged fields when
    flexible: never ApiVersions', whose response header stays v0)."""
    flexible = response_type.__flexible__ and response_type.__api_key__ != API_VERSIONS
    pos = skip_tagged_fields(frame, 4) if flexible else 4
    result = entity_reader(response_type)(frame, pos)
    return result[0] if isinstance(result, tuple) else result


class PeerConnection:
    """One open connection to one broker, for one purpose."""

    def __init__(self, host: str, port: int, security: ClientSecurity,
                 tls: ssl.SSLContext | None, client_id: str, credentials: str) -> None:
        self.host, self.port = host, port
        self._security = security
        self._tls = tls
        self._client_id = client_id
        self._credentials = credentials
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._waiting: dict[int, asyncio.Future[bytes]] = {}

    @property
    def open(self) -> bool:
        return self._writer is not None

    async def call(self, api_key: int, version: int, body: Any, timeout_s: float) -> Any:
        """`body` (a kio request or a dict) sent, its decoded response; ForwardError if
        the broker cannot be reached or does not answer within `timeout_s`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        writer = await self._connected(timeout_s)
        correlation = next(self._ids)
        answer: asyncio.Future[bytes] = loop.create_future()
        self._waiting[correlation] = answer
        try:
            writer.write(encode_request(api_key, version, body, correlation, self._client_id))
            frame = await asyncio.wait_for(answer, max(deadline - loop.time(), 0.0))
        except TimeoutError as exc:
            raise ForwardError(f"broker {self.host}:{self.port}: no answer to api key "
                               f"{api_key} within {timeout_s:.1f} s") from exc
        finally:
            self._waiting.pop(correlation, None)
        return _decode(frame, load_response_schema(api_key, version))

    async def _connected(self, timeout_s: float) -> asyncio.StreamWriter:
        async with self._lock:
            if self._writer is None:
                await asyncio.wait_for(self._connect(), timeout_s)
            assert self._writer is not None
            return self._writer

    async def _connect(self) -> None:
        where = f"broker {self.host}:{self.port}"
        try:
            reader, writer = await asyncio.open_connection(
                self.host, self.port, ssl=self._tls,
                server_hostname=self.host if self._tls is not None else None)
        except (OSError, ssl.SSLError) as exc:
            raise ForwardError(f"{where} unreachable: {exc}") from exc
        try:
            if self._security.sasl:
                await self._authenticate(reader, writer)
        except BaseException:
            writer.close()
            raise
        self._writer = writer
        self._reader_task = asyncio.ensure_future(self._read(reader, writer))

    async def _authenticate(self, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> None:
        security = self._security
        steps = sasl_exchange(security.mechanism, security.username, security.password)
        correlation = 0
        try:
            body, response_type = next(steps)
            while True:
                correlation += 1
                writer.write(encode_request(body.__api_key__, body.__version__, body,
                                            correlation, self._client_id))
                size, = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                body, response_type = steps.send(_decode(frame, response_type))
        except StopIteration:
            return
        except AuthenticationError as exc:
            raise PeerAuthenticationError(
                f"broker {self.host}:{self.port} refused this broker's inter-broker "
                f"{security.mechanism} credentials ({self._credentials}): {exc}") from None
        except (OSError, asyncio.IncompleteReadError) as exc:
            raise ForwardError(f"broker {self.host}:{self.port}: SASL authentication "
                               f"failed: {type(exc).__name__}") from exc

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Hand each response to the request with its correlation id, until the
        connection ends; then fail those still waiting."""
        failure: BaseException = ForwardError(f"broker {self.host}:{self.port} closed the "
                                              "connection")
        try:
            while True:
                size, = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                correlation, = struct.unpack_from(">i", frame, 0)
                waiting = self._waiting.get(correlation)
                if waiting is not None and not waiting.done():
                    waiting.set_result(frame)
        except (OSError, asyncio.IncompleteReadError, struct.error) as exc:
            failure = ForwardError(f"broker {self.host}:{self.port}: {type(exc).__name__}")
        except asyncio.CancelledError:
            failure = ForwardError(f"connection to broker {self.host}:{self.port} closed")
            raise
        finally:
            if self._writer is writer:
                self._writer = None
            writer.close()
            for waiting in self._waiting.values():
                if not waiting.done():
                    waiting.set_exception(failure)

    async def close(self) -> None:
        task = self._reader_task
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass


class Peers:
    """The connections of this broker to the others (`PeerConnection`s by peer address
    and purpose), all with the inter-broker listener's security."""

    def __init__(self, security: ClientSecurity, credentials: str = "") -> None:
        self._security = security
        self._tls = security.ssl_context() if security.tls else None
        self._credentials = credentials
        self._connections: dict[tuple[str, int, str], PeerConnection] = {}

    @property
    def client(self) -> ClientSecurity:
        """How this broker connects to the others (its own credentials among them)."""
        return self._security

    async def call(self, host: str, port: int, api_key: int, version: int, body: Any,
                   timeout_s: float, client_id: str = BROKER_CLIENT_ID) -> Any:
        """One request to the broker at `host:port` on the connection for `client_id`;
        its decoded response. ForwardError if it cannot be reached or does not answer
        in time (PeerAuthenticationError if it refuses this broker's credentials)."""
        key = (host, port, client_id)
        connection = self._connections.get(key)
        if connection is None:
            connection = self._connections[key] = PeerConnection(
                host, port, self._security, self._tls, client_id, self._credentials)
        return await connection.call(api_key, version, body, timeout_s)

    def open_connections(self) -> int:
        return sum(1 for c in self._connections.values() if c.open)

    async def close(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            await connection.close()
