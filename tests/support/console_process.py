"""A `headwater console` subprocess on an ephemeral loopback port, for the tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from .broker_process import free_port


class ConsoleProcess:
    def __init__(self, bootstrap: str, log_path: Path, *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.argv = [sys.executable, "-m", "headwater.cli", "console", "--bootstrap-server",
                     bootstrap, "--listen", f"127.0.0.1:{self.port}", "--sample-interval",
                     "1", *extra]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20.0) -> ConsoleProcess:
        """Start it and wait until it serves (plain HTTP)."""
        self.start_process()
        deadline = time.monotonic() + timeout
        assert self.proc is not None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"console exited with {self.proc.returncode}:\n"
                                   f"{self.log_path.read_text()}")
            try:
                with urllib.request.urlopen(f"{self.url}/static/console.css", timeout=2):
                    return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        raise TimeoutError(f"console not serving after {timeout}s")

    def start_process(self) -> None:
        """Start it without waiting (an HTTPS console: the test polls it itself)."""
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
