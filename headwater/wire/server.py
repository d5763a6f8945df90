"""asyncio TCP server: length-prefixed frames in, responses out in request order.

Kafka clients pipeline requests on one connection and match responses by order, so
each request becomes a slot in a per-connection queue; handlers may finish out of
order (a long-polling fetch, a produce waiting for fsync) but a writer task drains
the slots strictly in arrival order. A frame that cannot be parsed closes only its
own connection.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
import time
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode as E

from .codec import decode_request, encode_response, request_is_flexible
from .dispatch import (
    CLOSE_AFTER_RESPONSE,
    LISTENER,
    MUTE_UNTIL,
    PRINCIPAL,
    SASL_SESSION,
    Dispatcher,
    RequestContext,
)
from .header import HeaderError, parse_request_header, response_header, skip_tagged_fields
from .limits import ConnectionLimits
from .run_time import Timed

log = logging.getLogger("headwater.wire")

_SIZE = struct.Struct(">i")
API_VERSIONS = 18
MAX_IN_FLIGHT = 256
# What a connection on a SASL listener may send before it authenticates: ApiVersions,
# SaslHandshake, SaslAuthenticate (anything else closes it, as Kafka does).
PRE_AUTH_APIS = frozenset({17, 18, 36})
FAILED_AUTH_DELAY_S = 0.1  # Kafka's connection.failed.authentication.delay.ms
_conn_ids = itertools.count(1)


class ProtocolViolation(Exception):
    """The peer sent something that is not a valid request; its connection is closed."""


class KafkaServer:
    """One listener's socket. `ssl_context` makes it TLS; `session_factory` (SASL
    listeners) gives each connection a session that must authenticate first."""

    def __init__(self, dispatcher: Dispatcher, host: str, port: int,
                 max_request_bytes: int = 104857600, *, listener: str = "PLAINTEXT",
                 ssl_context: Any = None, session_factory: Any = None,
                 principal_of: Any = None, limits: ConnectionLimits | None = None,
                 request_quota: Any = None,
                 request_quota_active: Callable[[], bool] | None = None,
                 connection_quota: Callable[[str], int] | None = None) -> None:
        self.dispatcher = dispatcher
        self.host = host
        self.port = port
        self.max_request_bytes = max_request_bytes
        self.listener = listener
        self.ssl_context = ssl_context
        self.session_factory = session_factory
        self.principal_of = principal_of
        self.limits = limits or ConnectionLimits()
        #: request_quota(ctx, handler seconds) -> throttle ms (request_percentage quotas);
        #: None when no quota can apply.
        self.request_quota = request_quota
        #: whether any quota is set at all: only then are waiting handlers timed per step
        self.request_quota_active = request_quota_active or (lambda: request_quota is not None)
        #: connection_quota(host) -> ms after which a new connection is closed unserved
        #: (its host is over `connection_creation_rate`), or 0 to serve it
        self.connection_quota = connection_quota
        self.throttled_connections = 0
        self._sweeper: asyncio.Task[None] | None = None
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.live: set[Connection] = set()

    def queued_requests(self) -> int:
        return sum(conn.slots.qsize() for conn in self.live)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._on_connect, self.host, self.port,
                                                  limit=1 << 20, reuse_address=True,
                                                  ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]
        self._sweeper = asyncio.create_task(self._close_idle())

    async def _close_idle(self) -> None:
        """connections.max.idle.ms: a connection that completed no request and got no
        response for that long is closed. A frame trickled byte by byte (slow-loris) is
        not activity, so it is closed too. One sweep per quarter of the limit costs
        nothing per request."""
        idle = self.limits.idle_s
        while True:
            await asyncio.sleep(max(idle / 4, 0.05))
            now = time.monotonic()
            for conn in list(self.live):
                if now - conn.last_active > idle:
                    log.info("closing connection %s from %s: idle for %.0f ms "
                             "(connections.max.idle.ms)", conn.id, conn.peer,
                             (now - conn.last_active) * 1000)
                    conn.last_active = now  # once
                    conn.writer.transport.abort()

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _on_connect(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = writer.get_extra_info("peername")
        host = peer[0] if peer else ""
        refused = self.limits.admit(host)
        if refused is not None:
            if self.limits.refused % 100 == 1:  # one line per 100 refusals
                log.warning("refusing a connection from %s: %s (%d refused)", host, refused,
                            self.limits.refused)
            writer.close()
            return
        self._connections.add(task)
        delay_ms = self.connection_quota(host) if self.connection_quota is not None else 0
        if delay_ms > 0:
            await self._close_later(host, writer, delay_ms)
            self._connections.discard(task)
            return
        conn = Connection(self, reader, writer)
        self.live.add(conn)
        try:
            await conn.run()
        finally:
            self.limits.leave(host)
            self.live.discard(conn)
            self._connections.discard(task)


    async def _close_later(self, host: str, writer: asyncio.StreamWriter,
                           delay_ms: int) -> None:
        """KIP-612: a connection over its host's creation rate is accepted, never read,
        and closed after the throttle time, so a client retrying in a loop is slowed
        down rather than answered at once."""
        self.throttled_connections += 1
        if self.throttled_connections % 100 == 1:  # one line per 100
            log.warning("connection from %s over connection_creation_rate: closed in %d ms "
                        "(%d throttled)", host, delay_ms, self.throttled_connections)
        try:
            await asyncio.sleep(delay_ms / 1000)
        finally:
            writer.transport.abort()
            self.limits.leave(host)


class Connection:
    def __init__(self, server: KafkaServer, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.id = next(_conn_ids)
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.host = peer[0] if peer else ""
        self.slots: asyncio.Queue[Any] = asyncio.Queue(MAX_IN_FLIGHT)
        self.attrs: dict[str, Any] = {LISTENER: server.listener}
        if server.principal_of is not None:  # TLS: the client certificate's subject
            principal = server.principal_of(writer.get_extra_info("peercert"))
            if principal:
                self.attrs[PRINCIPAL] = principal
        # Last complete request read or response written (connections.max.idle.ms).
        self.last_active = time.monotonic()
        self.sasl = server.session_factory() if server.session_factory else None
        if self.sasl is not None:
            self.attrs[SASL_SESSION] = self.sasl

    async def run(self) -> None:
        writer_task = asyncio.create_task(self._write_loop())
        stopping = False
        try:
            await self._read_loop()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except ProtocolViolation as exc:
            log.warning("closing connection %s from %s: %s", self.id, self.peer, exc)
        except asyncio.CancelledError:
            stopping = True  # server shutdown: this task is the top of the connection
        finally:
            if stopping or writer_task.done():
                writer_task.cancel()
            else:
                try:
                    self.slots.put_nowait(None)
                    # Let responses to requests read before the problem go out.
                    await asyncio.wait_for(writer_task, 5)
                except (TimeoutError, asyncio.QueueFull, asyncio.CancelledError, Exception):
                    # CancelledError: the server is stopping while this connection waits
                    # for its last responses; end quietly (the task is the top of it).
                    writer_task.cancel()
            while not self.slots.empty():
                slot = self.slots.get_nowait()
                if isinstance(slot, asyncio.Future):
                    slot.cancel()
            self.writer.close()

    async def _read_loop(self) -> None:
        read = self.reader.readexactly
        limit = self.server.max_request_bytes
        limits = self.server.limits
        memory = limits.memory if limits.memory.capacity > 0 else None
        while True:
            size = _SIZE.unpack(await read(4))[0]
            if size < 0 or size > limit:
                raise ProtocolViolation(
                    f"frame size {size} outside 0..{limit} (socket.request.max.bytes)")
            if memory is None:
                frame = await read(size)
                self.last_active = time.monotonic()  # a whole frame: activity
                await self._muted()
                result = self._dispatch(frame)
            else:
                await memory.acquire(size)  # queued.max.request.bytes
                try:
                    frame = await read(size)
                    self.last_active = time.monotonic()
                    await self._muted()
                    result = self._dispatch(frame)
                finally:
                    await memory.release(size)
            await self.slots.put(result)
            if self.attrs.get(CLOSE_AFTER_RESPONSE):  # failed authentication
                await asyncio.sleep(FAILED_AUTH_DELAY_S)
                return
            await self._muted()

    async def _muted(self) -> None:
        """Wait while a quota mutes this connection (KIP-219). Checked after each request
        is queued and again before the next is dispatched: a handler that runs as a task
        sets the mute after the loop has already gone on to read."""
        if MUTE_UNTIL in self.attrs:
            delay = self.attrs.pop(MUTE_UNTIL) - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)

    def _dispatch(self, frame: bytes) -> Any:
        """Start handling one frame; returns bytes, None (no response) or a Task."""
        try:
            header = parse_request_header(frame)
        except HeaderError as exc:
            raise ProtocolViolation(f"bad request header: {exc}") from None
        api_key, version = header.api_key, header.api_version
        entry = self.server.dispatcher.get(api_key)
        if entry is None:
            raise ProtocolViolation(f"unknown api key {api_key} (version {version})")
        if not entry.serves(version):
            if api_key == API_VERSIONS:
                return _frame(header.correlation_id, False,
                              self._unsupported_api_versions())
            raise ProtocolViolation(
                f"unsupported version {version} of api key {api_key} "
                f"(supported {entry.min_version}..{entry.max_version})")
        if (self.sasl is not None and api_key not in PRE_AUTH_APIS
                and (not self.sasl.authenticated or self.sasl.expired)):
            if self.sasl.authenticated:  # KIP-368: Kafka closes it as well
                raise ProtocolViolation(f"api key {api_key} sent after the SASL session "
                                        "expired (connections.max.reauth.ms)")
            raise ProtocolViolation(f"api key {api_key} sent before SASL authentication")
        flexible = request_is_flexible(api_key, version)
        try:
            pos = header.body_offset
            if flexible:
                pos = skip_tagged_fields(frame, pos)
            request = decode_request(api_key, version, frame, pos)
        except Exception as exc:  # kio raises a variety of errors on garbage
            raise ProtocolViolation(
                f"undecodable body for api key {api_key} v{version}: {exc!r}") from None
        ctx = RequestContext(api_key, version, header.correlation_id, header.client_id,
                             self.host, self.id, self.attrs)
        # ApiVersions responses always use header v0 so clients can parse them before
        # knowing which versions the broker speaks.
        resp_flexible = flexible and api_key != API_VERSIONS
        try:
            quota = self.server.request_quota
            started = time.perf_counter() if quota is not None else 0.0
            result = entry.handler(ctx, request)
            if asyncio.iscoroutine(result):
                if (quota is None or api_key in PRE_AUTH_APIS
                        or not self.server.request_quota_active()):
                    return asyncio.ensure_future(self._finish(result, ctx, resp_flexible))
                # Charged the time its steps run, not the time it waits (run_time.py).
                return asyncio.ensure_future(self._finish_charged(
                    Timed(result), ctx, resp_flexible, quota))
            if quota is not None and api_key not in PRE_AUTH_APIS:
                result = _throttled(result, quota(ctx, time.perf_counter() - started))
            return self._encode(result, ctx, resp_flexible)
        except Exception as exc:
            # The one place a handler's failure is contained: whatever a decoded request
            # made it raise, only this connection ends (Kafka closes it too).
            raise ProtocolViolation(_handler_failure(ctx, exc)) from None

    async def _finish(self, coro: Any, ctx: RequestContext, flexible: bool) -> Frame | None:
        try:
            return self._encode(await coro, ctx, flexible)
        except Exception as exc:
            raise _HandlerFailed(_handler_failure(ctx, exc)) from exc

    async def _finish_charged(self, timed: Timed, ctx: RequestContext, flexible: bool,
                              quota: Any) -> Frame | None:
        try:
            result = await timed
            return self._encode(_throttled(result, quota(ctx, timed.seconds)), ctx, flexible)
        except Exception as exc:
            raise _HandlerFailed(_handler_failure(ctx, exc)) from exc

    @staticmethod
    def _encode(result: Any, ctx: RequestContext, flexible: bool) -> Frame | None:
        if result is None:
            return None
        if isinstance(result, bytes):
            return _frame(ctx.correlation_id, flexible, result)
        if isinstance(result, list):  # a body already encoded, as buffers (share_wire)
            head = bytearray(4) + response_header(ctx.correlation_id, flexible)
            _SIZE.pack_into(head, 0, len(head) - 4 + sum(map(len, result)))
            return [head, *result]
        out = _FrameParts(response_header(ctx.correlation_id, flexible))
        encode_response(ctx.api_key, ctx.api_version, result, out)
        return out.finish()

    def _unsupported_api_versions(self) -> bytes:
        """ApiVersions v0 body carrying UNSUPPORTED_VERSION and our version table."""
        entries = self.server.dispatcher.entries()
        body = struct.pack(">hi", E.unsupported_version, len(entries))
        body += b"".join(struct.pack(">hhh", e.api_key, e.min_version, e.max_version)
                         for e in entries)
        return body

    async def _write_loop(self) -> None:
        writer = self.writer
        while True:
            slot = await self.slots.get()
            if slot is None:
                return
            try:
                data = await slot if isinstance(slot, asyncio.Future) else slot
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("closing connection %s from %s: %s", self.id, self.peer,
                            _handler_failure(None, exc))
                self.writer.close()
                return
            if data is None:
                continue
            if isinstance(data, list):
                writer.writelines(data)
            else:
                writer.write(data)
            self.last_active = time.monotonic()
            if writer.transport.get_write_buffer_size() > 1 << 20:
                await writer.drain()


class _FrameParts:
    """A response frame as a list of buffers. The serializer's small writes are joined;
    a large value (the records of a fetch, read from a segment file) is kept by reference
    and goes to the socket with ``writelines``, so it is never copied in Python."""

    __slots__ = ("parts", "tail")

    def __init__(self, header: bytes) -> None:
        self.parts: list[bytes | bytearray] = []
        self.tail = bytearray(4) + header  # 4: the size prefix, set by finish()

    def write(self, data: bytes) -> int:
        if len(data) >= _BY_REFERENCE:
            self.parts.append(self.tail)
            self.parts.append(data)
            self.tail = bytearray()
        else:
            self.tail += data
        return len(data)

    def finish(self) -> bytearray | list[bytes | bytearray]:
        if not self.parts:
            _SIZE.pack_into(self.tail, 0, len(self.tail) - 4)
            return self.tail
        parts = self.parts + [self.tail] if self.tail else self.parts
        _SIZE.pack_into(parts[0], 0, sum(map(len, parts)) - 4)
        return parts


_BY_REFERENCE = 32 * 1024
Frame = bytes | bytearray | list[bytes | bytearray]  # a list goes out with writelines


class _HandlerFailed(Exception):
    """An asynchronous handler raised; carries the one-line description."""


def _throttled(result: Any, throttle_ms: int) -> Any:
    """A response dict carrying the request quota's throttle time (the larger of it and
    the handler's own); other shapes are only muted (the quota sets MUTE_UNTIL)."""
    if throttle_ms > 0 and isinstance(result, dict) and "throttle_time" in result:
        result["throttle_time"] = max(int(result["throttle_time"] or 0), throttle_ms)
    return result


def _handler_failure(ctx: RequestContext | None, exc: BaseException) -> str:
    """One log line for a request its handler could not serve. The traceback's last
    frame names the place, so a bug found by fuzzing can be found in the code."""
    if isinstance(exc, _HandlerFailed):
        return str(exc)
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = (f" at {tb.tb_frame.f_code.co_filename.rsplit('/', 2)[-1]}:{tb.tb_lineno}"
             if tb is not None else "")
    what = f"api key {ctx.api_key} v{ctx.api_version}" if ctx else "a request"
    return f"handler for {what} failed: {exc!r}{where}"


def _frame(correlation_id: int, flexible: bool, body: bytes) -> bytes:
    head = response_header(correlation_id, flexible)
    return _SIZE.pack(len(head) + len(body)) + head + body


def encode_frame(result: Any, ctx: RequestContext, flexible: bool) -> bytes:
    """A handler's result as one response frame, size prefix included (the controller
    answers a forwarded request inside an EnvelopeResponse with it)."""
    frame = Connection._encode(result, ctx, flexible)
    if frame is None:
        return b""
    return bytes(frame) if not isinstance(frame, list) else b"".join(frame)
