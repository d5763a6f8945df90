"""Three brokers on one shared log behind `BrokerProcess`'s interface, for
`--storage=cluster`: the client-facing suite's `broker` fixture becomes a cluster while
the tests stay as they are.

Clients bootstrap on broker 1 only (`bootstrap`, `port`), as a user pointing a client at
one broker of a cluster would; Metadata and FindCoordinator then send them to all three,
since topics' partitions and the coordinators' shards are spread over the three. `start`,
`stop`, `kill` and `restart` act on all three (a test that restarts "the broker" restarts
the cluster; `start` after one of them exited, as a crash fault point makes the broker
that reaches it exit, first stops the others); `extra` is every broker's options (set
it, as a test that disarms a fault point does, for the next start); `wait_exit` waits
for the first of them to exit; `proc` and `data_dir` are broker 1's, for the tests that
signal or inspect one process; `node_ports`, `node_ids` and `data_dirs` are all three's
(as BrokerProcess's and KafkaReference's are their one node's), and
`rss_bytes`/`open_fds` the largest. Every option goes to all three (a fault point is the
cluster's), except a `--metrics-listen` port: broker 1 gets it, the others one of their
own each; `metrics()` is the three endpoints' series added up.
"""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from .broker_process import BrokerProcess, free_port
from .metrics import merge
from .routed_client import route_port

NODES = (1, 2, 3)
#: Short leases, as the cluster tests use (tests/support/cluster.py): a restarted
#: cluster, or a killed broker's partitions, are served again within seconds.
LEASE_MS = 3000


class BrokerTrio:
    def __init__(self, data_dir: Path, shared: list[str], *extra: str,
                 nofile: int | None = None) -> None:
        self.data_dir = Path(data_dir)
        self._extra = list(extra)
        ports = {n: free_port() for n in NODES}  # they find each other in PostgreSQL
        #: Each broker's own options, before the trio's `extra`.
        self._own = {n: [*shared, "--override", f"node.id={n}",
                         "--override", f"headwater.shared.lease.ms={LEASE_MS}"]
                     for n in NODES}
        self.brokers = {
            n: BrokerProcess(self.data_dir if n == 1 else
                             self.data_dir.with_name(f"{self.data_dir.name}-node{n}"),
                             *self._own[n], *(extra if n == 1 else _own_ports(extra)),
                             port=ports[n], nofile=nofile)
            for n in NODES}

    @property
    def extra(self) -> list[str]:
        return self._extra

    @extra.setter
    def extra(self, value: list[str]) -> None:
        self._extra = list(value)
        for n, proc in self.brokers.items():
            proc.extra = [*self._own[n],
                          *(self._extra if n == 1 else _own_ports(self._extra))]

    @property
    def first(self) -> BrokerProcess:
        return self.brokers[1]

    @property
    def port(self) -> int:
        return self.first.port

    @property
    def bootstrap(self) -> str:
        return self.first.bootstrap

    @property
    def node_ports(self) -> dict[int, int]:
        return {n: proc.port for n, proc in self.brokers.items()}

    @property
    def node_ids(self) -> list[int]:
        return list(NODES)

    @property
    def data_dirs(self) -> list[Path]:
        return [proc.data_dir for proc in self.brokers.values()]

    @property
    def proc(self):  # type: ignore[no-untyped-def]
        return self.first.proc

    @property
    def log_path(self) -> Path:
        return self.first.log_path

    @property
    def nofile(self) -> int | None:
        return self.first.nofile

    def start(self, timeout: float = 60.0) -> BrokerTrio:
        if any(p.proc is not None and p.proc.poll() is None for p in self.brokers.values()):
            self.stop()  # one exited (a crash point): the cluster starts again as a whole
        # Broker 1 first, so it takes the controller lease and a run is the same every
        # time (Kafka's texts name the controller: "Local controller 1 ..."); then 2 and 3
        # together: three one after the other took 9 s of each of ~150 starts.
        first, *rest = self.brokers.values()
        first.launch()
        first.wait_ready(timeout)
        for proc in rest:
            proc.launch()
        for proc in rest:
            proc.wait_ready(timeout)
        self.wait_listed(timeout)
        route_port(self.port)  # raw requests to broker 1 go where a client sends them
        return self

    def wait_listed(self, timeout: float) -> None:
        """Until every broker lists all three at the ports they listen on now: before
        that, a client might be sent to a broker the others do not know yet, or (a trio
        started again on new ports over the same PostgreSQL) to a port of the killed
        trio that the others' view still holds until their next refresh. A client caches
        such an address until it refreshes its metadata (librdkafka: not after a refused
        connection; a CI run's reader was sent to the dead port for 60 s)."""
        want = self.node_ports
        deadline = time.monotonic() + timeout
        for proc in self.brokers.values():
            admin = AdminClient({"bootstrap.servers": proc.bootstrap})
            while (listed := {n: b.port for n, b in
                              admin.list_topics(timeout=10).brokers.items()}) != want:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{proc.bootstrap} lists {listed}, not {want}")
                time.sleep(0.1)

    def wait_ready(self, timeout: float) -> None:
        for proc in self.brokers.values():
            proc.wait_ready(timeout)

    def metrics(self) -> str:
        return merge(proc.metrics() for proc in self.brokers.values())

    def exit_codes(self) -> list[int | None]:
        """Each broker's exit code (None while it runs)."""
        return [code for proc in self.brokers.values() for code in proc.exit_codes()]

    def logs(self) -> str:
        return "\n".join(f"--- broker {n}\n{proc.logs()}" for n, proc in self.brokers.items())

    def stop(self, timeout: float = 20.0) -> int | None:
        codes = [proc.stop(timeout) for proc in self.brokers.values()]
        return codes[0]

    def kill(self) -> None:
        for proc in self.brokers.values():
            proc.kill()

    def wait_exit(self, timeout: float) -> int:
        """The exit status of the first broker to exit within `timeout` seconds (a fault
        point armed on all three fires on the one that reaches it)."""
        deadline = time.monotonic() + timeout
        while True:
            for proc in self.brokers.values():
                if proc.proc is not None and proc.proc.poll() is not None:
                    return proc.proc.returncode
            if time.monotonic() > deadline:
                raise TimeoutError(f"no broker exited within {timeout} s")
            time.sleep(0.05)

    def restart(self, timeout: float = 60.0) -> BrokerTrio:
        self.stop()
        return self.start(timeout)

    def open_fds(self) -> int:
        """The most descriptors any of the three holds (a limit holds per process)."""
        return max(proc.open_fds() for proc in self.brokers.values())

    def rss_bytes(self) -> int:
        """The largest RSS of the three (a bound on memory holds per process)."""
        return max(proc.rss_bytes() for proc in self.brokers.values())


def _own_ports(extra: list[str]) -> list[str]:
    """`extra` for brokers 2 and 3: a port to listen on that only one process can have
    (`--metrics-listen`) is replaced by a free one."""
    out = list(extra)
    for i, arg in enumerate(out[:-1]):
        if arg == "--metrics-listen":
            host = out[i + 1].rpartition(":")[0]
            out[i + 1] = f"{host}:{free_port()}"
    return out
