"""Toxiproxy (Shopify's TCP fault proxy, `make` builds it from the Go module proxy into
`.tools/toxiproxy/server`) for network faults between a broker and the services it uses.

One server per campaign; a proxy per broker and service (`proxy(name, upstream)` returns
the port to point the broker at), and toxics added to and removed from a proxy through
the server's HTTP API: latency, connections reset, a connection that blackholes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .broker_process import free_port
from .engines import ROOT, wait_for_port

TOXIPROXY = ROOT / ".tools" / "toxiproxy" / "server"


class Toxiproxy:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        #: Proxy name -> the port it listens on.
        self.ports: dict[str, int] = {}

    def start(self) -> Toxiproxy:
        binary = str(TOXIPROXY) if TOXIPROXY.exists() else shutil.which("toxiproxy-server")
        if binary is None:
            raise RuntimeError("toxiproxy not found: `make test` builds it into "
                               ".tools/toxiproxy")
        self.base.mkdir(parents=True, exist_ok=True)
        log = open(self.base / "toxiproxy.log", "ab")  # noqa: SIM115 (kept by the child)
        # LOG_LEVEL: unset, Toxiproxy logs at trace, a JSON line per read and write of
        # every proxied connection (millions in a long campaign, and a core's worth of CPU)
        self.proc = subprocess.Popen([binary, "-host", "127.0.0.1", "-port", str(self.port)],
                                     stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "LOG_LEVEL": "warn"},
                                     start_new_session=True)
        wait_for_port(self.port, 30, "toxiproxy")
        return self

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 (local)
            text = answer.read()
        return json.loads(text) if text else None

    def proxy(self, name: str, upstream_port: int) -> int:
        """A proxy to 127.0.0.1:`upstream_port`; the port it listens on."""
        port = free_port()
        self._call("POST", "/proxies", {"name": name, "listen": f"127.0.0.1:{port}",
                                        "upstream": f"127.0.0.1:{upstream_port}",
                                        "enabled": True})
        self.ports[name] = port
        return port

    def port_of(self, name: str) -> int:
        return self.ports[name]

    def add_toxic(self, proxy: str, name: str, kind: str, stream: str,
                  attributes: dict[str, int]) -> None:
        self._call("POST", f"/proxies/{proxy}/toxics", {
            "name": name, "type": kind, "stream": stream, "toxicity": 1.0,
            "attributes": attributes})

    def remove_toxic(self, proxy: str, name: str, timeout: float = 60.0) -> None:
        """Removed, asked again while the server is slow to answer (a reset_peer toxic
        under a retry storm keeps it busy); one already gone is fine."""
        self._until_done(lambda: self._call("DELETE", f"/proxies/{proxy}/toxics/{name}"),
                         timeout)

    def reset(self, timeout: float = 60.0) -> None:
        """Every toxic removed and every proxy enabled (Toxiproxy's POST /reset): the
        heal that holds even if a fault's own heal, or an add whose answer was lost,
        left a toxic behind."""
        self._until_done(lambda: self._call("POST", "/reset"), timeout)

    @staticmethod
    def _until_done(call: Callable[[], Any], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                call()
                return
            except OSError as exc:  # timed out, refused (the server is busy), or HTTP
                if isinstance(exc, urllib.error.HTTPError) and exc.code == 404:
                    return
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.5)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
