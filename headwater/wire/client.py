"""A small synchronous Kafka wire client (kio codecs): the CLI and the tests use it
to talk to a broker with exact requests."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

from .client_security import PLAINTEXT, ClientSecurity
from .codec import build
from .schemas import load_request_schema, load_response_schema


def encode_request(api_key: int, version: int, body: Any, correlation_id: int = 1,
                   client_id: str = "raw-test") -> bytes:
    cls = load_request_schema(api_key, version)
    if isinstance(body, dict):
        body = build(cls, body)
    out = io.BytesIO()
    cid = client_id.encode()
    out.write(struct.pack(">hhih", api_key, version, correlation_id, len(cid)) + cid)
    if cls.__flexible__:
        out.write(b"\x00")
    entity_writer(cls)(out, body)
    payload = out.getvalue()
    return struct.pack(">i", len(payload)) + payload


class RawClient:
    def __init__(self, host: str, port: int, timeout: float = 10.0,
                 security: ClientSecurity = PLAINTEXT, client_id: str = "raw-test") -> None:
        self.sock: socket.socket = security.connect(host, port, timeout)
        self.client_id = client_id

    def close(self) -> None:
        self.sock.close()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exact(4))[0]
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by broker")
            buf += chunk
        return bytes(buf)

    def request(self, api_key: int, version: int, body: Any, correlation_id: int = 1) -> Any:
        self.send_bytes(encode_request(api_key, version, body, correlation_id, self.client_id))
        return self.response(api_key, version, correlation_id)

    def response(self, api_key: int, version: int, correlation_id: int = 1) -> Any:
        """The next response frame, decoded (a request sent earlier with `send_bytes`)."""
        frame = self.recv_frame()
        cls = load_response_schema(api_key, version)
        (got_cid,) = struct.unpack_from(">i", frame, 0)
        assert got_cid == correlation_id
        pos = 4
        if cls.__flexible__ and api_key != 18:
            pos += 1  # empty tagged fields of response header v1
        result = entity_reader(cls)(frame, pos)
        return result[0] if isinstance(result, tuple) else result

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closed the connection (EOF or reset) within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
