"""Where the console may listen: a loopback address as it is; any other address only
with TLS (`--tls-cert`/`--tls-key`) or when told it may go without (`--insecure-listen`),
since its pages show the cluster's data (and, with --allow-writes, change it) to whoever
reaches the port."""

from __future__ import annotations

import ipaddress
import socket


class ListenError(ValueError):
    """A listen address refused: the message is the one line the command prints."""


def parse(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ListenError(f"--listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8080")
    return host.strip("[]") or "127.0.0.1", int(port)


def is_loopback(host: str) -> bool:
    """Whether every address `host` names is a loopback one (127.0.0.0/8, ::1)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def check(text: str, tls: bool, insecure: bool) -> tuple[str, int]:
    host, port = parse(text)
    if not is_loopback(host) and not tls and not insecure:
        raise ListenError(
            f"refusing to listen on {host}:{port} without TLS (it is not a loopback "
            "address); hint: give --tls-cert and --tls-key, or --insecure-listen to serve "
            "plain HTTP there anyway")
    return host, port
