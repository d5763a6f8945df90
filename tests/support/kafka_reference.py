"""Apache Kafka beside headwater: the reference broker and Kafka's own tools.

`make kafka` puts Apache Kafka 4.4.0's jars in `.kafka/lib/` (see kafka-ref/). There are
no bin/ scripts (they are not in Maven), so tools run as `java -cp '.kafka/lib/*'
<main class>`; `TOOLS` maps each script name to its class in Kafka 4.4.

`KafkaReference` has `BrokerProcess`'s interface (`bootstrap`, `port`, `start()`,
`stop()`, `kill()`, `logs()`), so a test or a benchmark can run the same code against
either broker.
"""

from __future__ import annotations

import base64
import os
import select
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from .broker_process import free_port
from .wire import RawClient

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
KAFKA_LIB = ROOT / ".kafka" / "lib"
SPARK_KAFKA_LIB = ROOT / ".kafka" / "spark"
# kafka-metadata-shell runs on its own 4.3.1 jars (kafka-ref/shell/pom.xml says why).
SHELL_LIB = ROOT / ".kafka" / "shell"
SHELL_CLASS = "org.apache.kafka.shell.MetadataShell"
KAFKA_VERSION = "4.4.0"

# bin/<script>.sh -> main class, as in Kafka 4.3's scripts.
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "kafka-streams-application-reset": "org.apache.kafka.tools.StreamsResetter",
    "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    "kafka-delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "kafka-replica-verification": "org.apache.kafka.tools.ReplicaVerificationTool",
    "kafka-server-start": "kafka.Kafka",
    "kafka-metadata-shell": SHELL_CLASS,
}

# A short-lived tool JVM spends most of its life starting: C1 only, serial GC and the
# JDK's class-data archive cut that by about a third on 2 cores.
TOOL_JVM_OPTS = ["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto",
                 "-Djava.awt.headless=true"]
BROKER_JVM_OPTS = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                   "-Xshare:auto", "-Djava.awt.headless=true"]

# Tools log warnings to stderr (Kafka's tools-log4j2.yaml); the broker logs to a file.
_TOOLS_LOG4J = """\
status = error
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = STDERR
"""
_BROKER_LOG4J = """\
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {path}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
logger.state.name = state.change.logger
logger.state.level = warn
"""


def java() -> str:
    """Java 17: `java` on PATH, else Debian's (what `make java` installs)."""
    found = shutil.which("java")
    if found:
        return found
    for cand in sorted(Path("/usr/lib/jvm").glob("java-17-openjdk-*/bin/java")):
        return str(cand)
    raise RuntimeError("Java 17 not found: run `make java`")


def kafka_classpath() -> str:
    """The classpath of Kafka's jars; fails (never skips) when `make kafka` has not run."""
    if not list(KAFKA_LIB.glob(f"kafka_2.13-{KAFKA_VERSION}.jar")):
        raise RuntimeError(f"Apache Kafka {KAFKA_VERSION} jars missing in {KAFKA_LIB}: "
                           "run `make kafka`")
    return f"{KAFKA_LIB}/*"


def _tools_log4j() -> Path:
    path = Path(tempfile.gettempdir()) / "headwater-kafka-tools-log4j2.properties"
    if not path.exists() or path.read_text() != _TOOLS_LOG4J:
        tmp = path.with_suffix(f".{os.getpid()}")
        tmp.write_text(_TOOLS_LOG4J)
        tmp.replace(path)
    return path


def tool_command(main_class: str, *args: str) -> list[str]:
    """The java command line of a Kafka tool (`main_class` or a `TOOLS` script name)."""
    main_class = TOOLS.get(main_class, main_class)
    if main_class == SHELL_CLASS:
        if not list(SHELL_LIB.glob("kafka-shell-*.jar")):
            raise RuntimeError(f"kafka-metadata-shell missing in {SHELL_LIB}: run `make kafka`")
        classpath = f"{SHELL_LIB}/*"
    else:
        classpath = kafka_classpath()
    return [java(), *TOOL_JVM_OPTS, f"-Dlog4j2.configurationFile={_tools_log4j()}",
            "-cp", classpath, main_class, *args]


def run_tool(main_class: str, *args: str, timeout: float = 60.0, check: bool = True,
             input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run a Kafka tool to completion; with `check`, a non-zero exit raises with its
    output (Kafka's tools print their errors, not stack traces, on stdout or stderr)."""
    cmd = tool_command(main_class, *args)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input,
                          stdin=None if input is not None else subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{main_class} {' '.join(args)} exited {proc.returncode}\n"
                           f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}")
    return proc


class MetadataShell:
    """Kafka's metadata shell in interactive mode, fed commands through a pipe.

    The shell runs its first command once *anything* past offset 0 is applied
    (MetadataShell.waitUntilCaughtUp: lastAppliedOffset > 0), so on a log of several
    batches a one-shot command can see a partial image (Kafka's own logs behave the
    same); on a loaded machine it did so five runs in a row. One process polled with
    a deadline sees the image grow until the whole log is applied."""

    PROMPT = ">> "

    def __init__(self, log_or_snapshot: Path) -> None:
        cmd = tool_command("org.apache.kafka.shell.MetadataShell", "--snapshot",
                           str(log_or_snapshot))
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self._pending = b""
        self._read_prompt(time.monotonic() + 120)

    def _read_prompt(self, deadline: float) -> str:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while (end := self._pending.find(self.PROMPT.encode())) < 0:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                raise AssertionError(f"metadata shell: no prompt; {self._pending[-2000:]!r}")
            self._pending += chunk
        out, self._pending = self._pending[:end], self._pending[end + len(self.PROMPT):]
        return out.decode()

    def run(self, *command: str, until: Callable[[str], bool]) -> str:
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.stdin is not None
            self.proc.stdin.write((" ".join(command) + "\n").encode())
            self.proc.stdin.flush()
            out = self._read_prompt(deadline)
            if until(out):
                return out
            if time.monotonic() > deadline:
                raise AssertionError(f"{' '.join(command)}: {out[-2000:]}")
            time.sleep(0.2)  # poll interval; the deadline above bounds the wait

    def close(self) -> None:
        _, err = self.proc.communicate(b"exit\n", timeout=60)
        # Kafka's reader logs the header and footer of a snapshot at ERROR ("Ignoring
        # control record"); anything else at ERROR, or a fault, is a finding.
        bad = [line for line in err.decode().splitlines()
               if ("ERROR" in line or "fault" in line) and "Ignoring control record" not in line]
        assert not bad, "\n".join(bad[-20:])


def side_by_side(run: Callable[..., T], ours: str, theirs: str, *args: Any) -> tuple[T, T]:
    """`run(bootstrap, *args)` against headwater and the reference at once: the tests'
    time goes to JVM start-ups, two of which fit the two cores."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        a, b = pool.submit(run, ours, *args), pool.submit(run, theirs, *args)
        return a.result(), b.result()


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0,
                 configs: dict[str, str] | None = None) -> None:
    """Create `topic` and wait until the broker at `bootstrap` lists a leader for each
    partition. Kafka answers CreateTopics once its controller has committed the topic; its
    broker's metadata image learns of it a moment later, and a raw request in between gets
    UNKNOWN_TOPIC_OR_PARTITION (seen in CI on AlterShareGroupOffsets)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs or {})])[topic].result(
        timeout)
    deadline = time.monotonic() + timeout
    while True:
        t = admin.list_topics(topic, timeout=10).topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions \
                and all(p.leader >= 0 for p in t.partitions.values()):
            return
        assert time.monotonic() < deadline, f"{topic} has no leaders at {bootstrap}: {t}"
        time.sleep(0.1)


def random_cluster_id() -> str:
    """Kafka's Uuid text form (url-safe base64 of 16 bytes, no padding), as
    `kafka-storage random-uuid` prints it, without starting a JVM for it."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class KafkaReference:
    """Apache Kafka in KRaft combined mode (one node, broker + controller) on free
    loopback ports, with its data under `data_dir`.

    `overrides` are `key=value` lines for server.properties (the defaults below are
    Kafka's single-node settings: replication factors 1, no initial rebalance delay).
    """

    def __init__(self, data_dir: Path, *overrides: str, port: int | None = None,
                 heap: str = "512m", jvm_opts: tuple[str, ...] = ()) -> None:
        self.data_dir = Path(data_dir)
        #: extra JVM options of the broker (system properties such as Kafka 4's
        #: -Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=...)
        self.jvm_opts = list(jvm_opts)
        self.port = port or free_port()
        self.controller_port = free_port()
        self.overrides = list(overrides)
        self.heap = heap
        self.proc: subprocess.Popen[bytes] | None = None
        self.work_dir = self.data_dir.parent / f"{self.data_dir.name}-kafka"
        self.log_path = self.work_dir / "server.log"
        self.stdout_path = self.work_dir / "stdout.log"
        self.cluster_id = random_cluster_id()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def node_ports(self) -> dict[int, int]:
        """Node id -> port (one node, id 1), as `BrokerProcess.node_ports`."""
        return {1: self.port}

    @property
    def node_ids(self) -> list[int]:
        return [1]

    @property
    def data_dirs(self) -> list[Path]:
        return [self.data_dir]

    def properties(self) -> dict[str, str]:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
                         f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        for line in self.overrides:
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
        return props

    def _write_config(self) -> Path:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.work_dir / "server.properties"
        cfg.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        (self.work_dir / "log4j2.properties").write_text(
            _BROKER_LOG4J.format(path=self.log_path))
        return cfg

    def _format(self, cfg: Path) -> None:
        """`kafka-storage format` once per data dir (a restart keeps the data)."""
        if (self.data_dir / "meta.properties").exists():
            return
        # --cluster-id=ID: an id may start with "-", which argparse takes for an option
        run_tool("kafka-storage", "format", f"--cluster-id={self.cluster_id}",
                 "--config", str(cfg), "--ignore-formatted", timeout=120)

    def start(self, timeout: float = 120.0) -> KafkaReference:
        cfg = self._write_config()
        self._format(cfg)
        out = open(self.stdout_path, "ab")
        cmd = [java(), *BROKER_JVM_OPTS, *self.jvm_opts, f"-Xmx{self.heap}", f"-Xms{self.heap}",
               f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
               f"-Dkafka.logs.dir={self.work_dir}",
               "-cp", kafka_classpath(), TOOLS["kafka-server-start"], str(cfg)]
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        out.close()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def wait_ready(self, timeout: float) -> None:
        """Ready when Metadata lists this broker (the listener accepts connections a
        little before the broker is unfenced)."""
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"Apache Kafka exited with {self.proc.returncode}:\n"
                                   f"{self.logs()}")
            try:
                client = RawClient("127.0.0.1", self.port, timeout=2)
                try:
                    resp = client.request(3, 12, {"topics": [],
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations":
                                                      False})
                    if [b.node_id for b in resp.brokers] == [1]:
                        return
                    last = resp
                finally:
                    client.close()
            except (OSError, ConnectionError) as exc:
                last = exc
            time.sleep(0.1)
        raise TimeoutError(f"Apache Kafka not ready after {timeout}s ({last}):\n{self.logs()}")

    def logs(self, chars: int = 5000) -> str:
        """The tail of Kafka's server.log and of the JVM's stdout/stderr."""
        parts = []
        for path in (self.stdout_path, self.log_path):
            try:
                parts.append(f"--- {path.name}\n" + path.read_text(errors="replace")[-chars:])
            except OSError:
                pass
        return "\n".join(parts)

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> KafkaReference:
        self.stop()
        return self.start()


def reference_fixture(base: Path, *overrides: str) -> Iterator[KafkaReference]:
    """The body of a `kafka_ref`-like fixture: a reference started under `base` (with
    `overrides`, as for `KafkaReference`), stopped after its last test. Fails, never
    skips, when `make kafka` has not fetched the jars."""
    proc = KafkaReference(base / "data", *overrides).start()
    try:
        yield proc
    finally:
        proc.stop()
