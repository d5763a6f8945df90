"""The nemesis: faults on a seeded schedule against a three-broker cluster.

Each fault is one of `KINDS`, against a target the seed picks, held for a duration the
seed picks, then healed; the schedule is a pure function of the seed (`schedule`), so a
campaign's faults can be replayed. What actually happened (start, heal) is recorded as
`Fault` ops beside the clients' operations, and the checker prints the faults that
overlap an anomaly.

Kinds: `kill9` (kill -9 of a broker, restarted at heal), `pause` (SIGSTOP past the
lease, SIGCONT at heal), `postgres` (`pg_ctl -m immediate`, started at heal), `objects`
(versitygw killed, restarted at heal), `network` (between one broker and PostgreSQL,
the object store, or the other brokers (what they send to its inter-broker listener),
through Toxiproxy: a second of latency, every connection reset, or connections that
blackhole; the toxic removed at heal). The controller's and the coordinators' brokers are
among the targets like any other: the seed picks a node, whatever it runs.

The nemesis is also the brokers' supervisor, as systemd's `Restart=always` would be: a
broker that exits (it was restarted while PostgreSQL or the object store was down, and
refused to start: a broker fails fast at start with one line naming the setting) is
started again before the next fault and when the campaign stops (`revived`).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tests.chaos.history import Fault
from tests.support.cluster import LEASE_MS, Cluster

KINDS = ("kill9", "pause", "postgres", "objects", "network")
#: Toxiproxy toxics: (type, stream, attributes).
TOXICS: dict[str, tuple[str, str, dict[str, int]]] = {
    "latency": ("latency", "downstream", {"latency": 1000, "jitter": 500}),
    "reset": ("reset_peer", "upstream", {"timeout": 0}),
    "blackhole": ("timeout", "upstream", {"timeout": 0}),
}
NODES = (1, 2, 3)


@dataclass(frozen=True, slots=True)
class Planned:
    at: float  # seconds after the campaign's start
    kind: str
    target: str  # "broker-N", "postgres", "objects", "TOXIC:{postgres,objects,peers}-N"
    hold: float  # seconds until healed


def schedule(seed: int, duration: float, gap: tuple[float, float] = (2.0, 6.0)
             ) -> list[Planned]:
    """The faults of a campaign of `duration` seconds: one at a time, a quiet `gap`
    between a heal and the next fault; every kind in turn first, so that even a short
    campaign has each. (`Nemesis` keeps the gaps after the actual heals: a campaign whose
    heals run slow has fewer of these faults.)"""
    rng = random.Random(seed)
    lease = LEASE_MS / 1000
    out: list[Planned] = []
    at = rng.uniform(*gap)
    kinds = list(KINDS)
    rng.shuffle(kinds)
    while True:
        kind = kinds.pop(0) if kinds else rng.choice(KINDS)
        if kind in ("kill9", "pause"):
            target = f"broker-{rng.choice(NODES)}"
        elif kind == "network":
            target = (f"{rng.choice(sorted(TOXICS))}:"
                      f"{rng.choice(('postgres', 'objects', 'peers'))}-{rng.choice(NODES)}")
        else:
            target = kind
        hold = {"kill9": rng.uniform(0.5, 2 * lease),
                "pause": rng.uniform(lease + 0.5, 2 * lease + 1),  # past the lease
                "postgres": rng.uniform(0.5, lease + 1),
                "objects": rng.uniform(0.5, 3.0),
                "network": rng.uniform(1.0, 2 * lease)}[kind]
        if at + hold > duration:
            return out
        out.append(Planned(at, kind, target, hold))
        at += hold + rng.uniform(*gap)


class Nemesis:
    """Runs a schedule in a thread, recording each fault; `stop` heals what is open."""

    def __init__(self, cluster: Cluster, plan: list[Planned],
                 record: Callable[[Fault], None]) -> None:
        self._cluster = cluster
        self._plan = plan
        self._record = record
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self.injected: dict[str, int] = {}
        self.errors: list[str] = []
        #: Faults the harness could not inject (not counted in `injected`) or heal.
        self.skipped: list[str] = []
        #: Brokers started again after they exited on their own.
        self.revived = 0

    def start(self) -> Nemesis:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def stop(self, timeout: float = 120.0) -> None:
        """Heal what is open, then start again every broker that exited."""
        self._stop.set()
        self._thread.join(timeout=timeout)
        deadline = time.monotonic() + timeout
        if self._cluster.proxies is not None:
            # A toxic whose add timed out but landed, or whose removal failed, would cut
            # a broker off from a service for good (a campaign on 2026-11-29 waited on a
            # reset_peer left on objects-2).
            try:
                self._cluster.proxies.reset(timeout=max(deadline - time.monotonic(), 1.0))
            except OSError as exc:
                self.errors.append(f"removing every toxic: {type(exc).__name__}: {exc}")
        while self._revive():
            if time.monotonic() > deadline:
                self.errors.append("a broker did not start again after the faults")
                return
            time.sleep(1)

    def _revive(self) -> bool:
        """Start the brokers that exited; whether one still is not running."""
        down = False
        for node, proc in list(self._cluster.brokers.items()):
            if proc.proc is None or proc.proc.poll() is None:
                continue
            try:
                self._cluster.start(node)
                self.revived += 1
            except Exception:  # exited again (an engine still down): next time
                down = True
        return down

    def _run(self) -> None:
        # Each fault comes its planned quiet gap after the previous one *healed*, not at
        # its planned time: a heal slower than planned (PostgreSQL recovering, a broker
        # starting on a loaded machine) would otherwise be followed by faults back to back
        # until the schedule caught up, and the cluster never had the quiet it was given.
        healed, planned_end = time.monotonic(), 0.0
        for fault in self._plan:
            wait = healed + (fault.at - planned_end) - time.monotonic()
            planned_end = fault.at + fault.hold
            if self._stop.wait(max(wait, 0)):
                return
            self._revive()
            start = time.time()
            try:
                heal = self._inject(fault)
            except Exception as exc:
                # The harness's failure, not the brokers' (Toxiproxy too busy to answer
                # in time under load): reported, not counted; `stop` removes any toxic
                # it may have left.
                self.skipped.append(f"{fault}: {type(exc).__name__}: {exc}")
                continue
            self.injected[fault.kind] = self.injected.get(fault.kind, 0) + 1
            self._stop.wait(fault.hold)  # heal early when stopped
            try:
                heal()
            except Exception as exc:
                # The harness's too (a broker slower than 30 s to start on a loaded
                # machine): `stop` revives what exited and removes every toxic, and the
                # campaign then checks that all three brokers serve.
                self.skipped.append(f"healing {fault}: {type(exc).__name__}: {exc}")
            self._record(Fault(kind=fault.kind, target=fault.target, start=start,
                               end=time.time()))
            healed = time.monotonic()
            if self._stop.is_set():
                return

    def _inject(self, fault: Planned) -> Callable[[], None]:
        cluster = self._cluster
        if fault.kind == "kill9":
            node = int(fault.target.split("-")[1])
            cluster.brokers[node].kill()
            return lambda: _ignore(cluster.start(node))
        if fault.kind == "pause":
            node = int(fault.target.split("-")[1])
            proc = cluster.brokers[node].proc
            assert proc is not None
            pid = proc.pid
            os.kill(pid, signal.SIGSTOP)
            return lambda: os.kill(pid, signal.SIGCONT)
        if fault.kind == "postgres":
            cluster.postgres.kill()
            return lambda: _ignore(cluster.postgres.start())
        if fault.kind == "objects":
            cluster.gateway.kill()
            return lambda: _ignore(cluster.gateway.start())
        if fault.kind == "network":
            proxies = cluster.proxies
            assert proxies is not None, "network faults need the cluster behind Toxiproxy"
            toxic, proxy = fault.target.split(":")
            kind, stream, attributes = TOXICS[toxic]
            proxies.add_toxic(proxy, "chaos", kind, stream, attributes)
            return lambda: proxies.remove_toxic(proxy, "chaos")
        raise ValueError(f"unknown fault kind {fault.kind}")


def _ignore(_started: object) -> None:
    """A heal's result (the restarted process) is not needed."""
