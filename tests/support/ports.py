"""Loopback ports for the servers tests start, which no other process takes in between.

Binding port 0 and closing the socket hands out a port from the kernel's ephemeral range,
the same range every outgoing connection on the machine takes its local port from: between
the test choosing the port and the broker binding it, a client connection in another xdist
worker can take it (CI: "address already in use" on a port a moment earlier free). Ports
here come from below the ephemeral range, a slice per xdist worker, handed out in turn, so
that neither outgoing connections nor another worker nor this one can hold them.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading

_FLOOR = 10_000


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _slice() -> range:
    """This process's ports: one slice per xdist worker, the last for processes outside one."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else workers
    low = _ephemeral_low()
    if low - _FLOOR < 2_000:  # an unusual range: fall back to what the kernel hands out
        return range(0)
    width = (low - _FLOOR) // (workers + 1)
    start = _FLOOR + index * width
    return range(start, start + width)


_ports = _slice()
_lock = threading.Lock()
# Start where the process id points, so that two runs one after the other rarely meet a
# port the other's lingering server still holds (those are skipped anyway).
_start = os.getpid() % len(_ports) if len(_ports) else 0
_turn = itertools.cycle([*_ports[_start:], *_ports[:_start]])


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback TCP port nobody holds, not handed out before by this process's turn."""
    with _lock:
        for _ in range(len(_ports)):
            port = next(_turn)
            if _bindable(port):
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
