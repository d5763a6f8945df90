"""Limits against hostile clients: connection counts, idle and trickled connections,
and the memory of requests in flight. Each test asserts the broker keeps serving."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from tests.support.wire import RawClient

pytestmark = pytest.mark.timeout(120)


def api_versions(port: int) -> bool:
    try:
        client = RawClient("127.0.0.1", port, timeout=5)
    except OSError:
        return False
    try:
        resp = client.request(18, 3, {"client_software_name": "t",
                                      "client_software_version": "1"})
        return int(resp.error_code) == 0
    except (OSError, EOFError, ConnectionError):
        return False
    finally:
        client.close()


def closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


@pytest.mark.one_node(
    "three brokers on one host keep connections to each other (shared/peers.py) from "
    "127.0.0.1 too, which count against max.connections.per.ip as Kafka counts its "
    "brokers' own: four client connections from that address no longer all fit")
def test_connections_past_the_limits_are_closed(broker_factory) -> None:
    broker = broker_factory("--override", "max.connections=6",
                            "--override", "max.connections.per.ip=4")
    held = [RawClient("127.0.0.1", broker.port) for _ in range(4)]
    try:
        for c in held:  # the four are real connections
            assert int(c.request(18, 3, {"client_software_name": "t",
                                         "client_software_version": "1"}).error_code) == 0
        extra = socket.create_connection(("127.0.0.1", broker.port))
        assert closed_within(extra, 5), "a fifth connection from one ip was kept"
        extra.close()
    finally:
        for c in held:
            c.close()
    deadline = time.monotonic() + 10  # once they are gone, new ones are welcome again
    while not api_versions(broker.port) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert api_versions(broker.port)


def test_idle_and_trickling_connections_are_closed(broker_factory) -> None:
    broker = broker_factory("--override", "connections.max.idle.ms=1500")
    idle = socket.create_connection(("127.0.0.1", broker.port))
    trickle = socket.create_connection(("127.0.0.1", broker.port))
    frame = struct.pack(">i", 30) + b"\x00\x12\x00\x03" + b"\x00" * 26
    stop = threading.Event()

    def slow_loris() -> None:  # one byte every 200 ms: never a whole frame in 1.5 s
        for byte in frame:
            if stop.is_set():
                return
            try:
                trickle.sendall(bytes([byte]))
            except OSError:
                return
            time.sleep(0.2)
    thread = threading.Thread(target=slow_loris, daemon=True)
    start = time.monotonic()
    thread.start()
    try:
        assert closed_within(idle, 10)
        assert closed_within(trickle, 10)
        assert time.monotonic() - start < 8
        assert api_versions(broker.port)  # an active client is served meanwhile
    finally:
        stop.set()
        idle.close()
        trickle.close()


def test_large_requests_in_flight_are_bounded_not_refused(broker_factory) -> None:
    """queued.max.request.bytes: 20 connections each sending a 1 MB frame at once are
    read a few at a time, and every one is answered."""
    broker = broker_factory("--override", "queued.max.request.bytes=2000000")
    body = struct.pack(">hhih", 18, 0, 7, 1) + b"x"  # ApiVersions v0, then padding
    frame = struct.pack(">i", len(body) + 1_000_000) + body + b"\x00" * 1_000_000
    answered = []

    def send() -> None:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=60) as s:
            s.sendall(frame)
            size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            data = s.recv(size, socket.MSG_WAITALL)
            answered.append(struct.unpack_from(">i", data)[0] == 7)
    threads = [threading.Thread(target=send) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert answered.count(True) == 20
    assert api_versions(broker.port)
