"""Run a real headwater broker as a subprocess on an ephemeral loopback port."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

from headwater.wire.client import RawClient  # readiness asks this very process
from headwater.wire.client_security import PLAINTEXT, ClientSecurity

from .metrics import metrics_port, scrape
from .ports import free_port


def _java_hash(text: str) -> int:
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h & 0x7FFFFFFF  # Kafka's Utils.abs(hashCode) for the partition of a key


def _ids_for_every_partition(count: int = 50) -> list[str]:
    """Group / transactional ids that land on each of the `count` coordinator partitions."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < count:
        key = f"ready-{i}"
        found.setdefault(_java_hash(key) % count, key)
        i += 1
    return list(found.values())


READY_IDS = _ids_for_every_partition()


class BrokerProcess:
    def __init__(self, data_dir: Path, *extra: str, port: int | None = None,
                 nofile: int | None = None, probe: ClientSecurity = PLAINTEXT) -> None:
        self.data_dir = Path(data_dir)
        #: How readiness logs in on `port` (a broker with no PLAINTEXT listener).
        self.probe = probe
        #: RLIMIT_NOFILE (soft and hard) of the broker process, to test a small one.
        self.nofile = nofile
        self.port = port or free_port()
        self.extra = list(extra)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}-broker.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def node_id(self) -> int:
        """Its node.id (1 unless an override says otherwise)."""
        for arg in self.extra:
            if arg.startswith("node.id="):
                return int(arg.partition("=")[2])
        return 1

    @property
    def node_ports(self) -> dict[int, int]:
        """Node id -> port of every broker of the cluster a client sees here (one:
        this one). `BrokerTrio` and `KafkaReference` have the same, so a test can
        expect what Kafka would show for as many brokers."""
        return {self.node_id: self.port}

    @property
    def node_ids(self) -> list[int]:
        return sorted(self.node_ports)

    @property
    def data_dirs(self) -> list[Path]:
        """The data directory of every broker (one here)."""
        return [self.data_dir]

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        self.launch()
        self.wait_ready(timeout)
        return self

    def launch(self) -> None:
        """The broker's process, started without waiting for it to serve."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        cmd = [sys.executable, "-m", "headwater.cli", "serve", "--listen",
               f"127.0.0.1:{self.port}", "--data-dir", str(self.data_dir), *self.extra]
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                     preexec_fn=self._limit if self.nofile else None)
        log.close()

    def _limit(self) -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))

    def open_fds(self) -> int:
        """Descriptors the broker holds now."""
        assert self.proc is not None
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.logs()}")
            try:
                client = RawClient("127.0.0.1", self.port, timeout=2, security=self.probe)
                try:
                    resp = client.request(18, 3, {"client_software_name": "t",
                                                  "client_software_version": "1"})
                    if int(resp.error_code) == 0 and self._loaded(client):
                        return
                finally:
                    client.close()
            except OSError as exc:
                last = exc
            time.sleep(0.05)
        raise TimeoutError(f"broker not ready after {timeout}s ({last}):\n{self.logs()}")

    @property
    def wait_loaded(self) -> bool:
        """Whether `start` also waits for the group and transaction coordinators to
        load: a test's first group or transaction request then never meets
        COORDINATOR_LOAD_IN_PROGRESS on a loaded machine. Not when a test delays the
        load on purpose to see that answer."""
        return not any("coordinator.load.delay.ms" in arg for arg in self.extra)

    def _loaded(self, client: RawClient) -> bool:
        if not self.wait_loaded:
            return True
        try:
            return self._coordinators_loaded(client)
        except ConnectionError:  # a SASL listener: nothing may be asked before login
            return True

    @staticmethod
    def _coordinators_loaded(client: RawClient) -> bool:
        groups = client.request(15, 5, {"groups": READY_IDS,
                                        "include_authorized_operations": False}).groups
        if any(int(g.error_code) == 14 for g in groups):
            return False
        txns = client.request(65, 0, {"transactional_ids": READY_IDS}).transaction_states
        return not any(int(t.error_code) == 14 for t in txns)

    def exit_codes(self) -> list[int | None]:
        """The process's exit code (None while it runs), in a list as a cluster's
        (broker_trio.py): tests that crash a broker on purpose wait for a 1 in it."""
        return [None if self.proc is None else self.proc.poll()]

    def metrics(self) -> str:
        """The exposition of the broker's `--metrics-listen` endpoint."""
        port = metrics_port(self.extra)
        assert port is not None, "started without --metrics-listen"
        return scrape(port)

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 20.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def wait_exit(self, timeout: float) -> int:
        """The broker's exit status, once it exits (within `timeout` seconds)."""
        assert self.proc is not None
        return self.proc.wait(timeout)

    def restart(self, timeout: float = 30.0) -> BrokerProcess:
        self.stop()
        return self.start(timeout)

    def rss_bytes(self) -> int:
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0
