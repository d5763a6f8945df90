"""A real Kafka Streams 4.4 application beside a broker: the word count of
`tests/support/streams/WordCountApp.java`, its instances as JVM processes, its input and
the check of its output.

The application re-keys each input record by its value (a repartition topic), counts the
words in a persistent RocksDB store with exactly_once_v2 and the cache off, and writes
every new count to the output topic. So, read committed, the output holds for each word
the counts 1, 2, ..., N exactly once, in order, N being how often the word was produced,
however instances crash, join or leave: `verify_counts` checks exactly that.

The source is compiled once per content hash (with the classpath's jars and the javac)
into a cache directory under the system temp dir, shared by the xdist workers (a file lock
keeps them from compiling it twice at once). It runs on `.kafka/lib/*` and
`.kafka/streams/*` (`make kafka`, kafka-ref/streams/pom.xml).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from .kafka_reference import KAFKA_LIB, ROOT, java, kafka_classpath

STREAMS_LIB = ROOT / ".kafka" / "streams"
SOURCE = Path(__file__).resolve().parent / "streams" / "WordCountApp.java"
MAIN_CLASS = "WordCountApp"
CACHE = Path(tempfile.gettempdir()) / "headwater-streams-app"

# A small JVM: the app holds a few thousand keys; C1 only and serial GC spare the 2 cores
# that the brokers and the other instances share.
APP_JVM_OPTS = ["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto",
                "-Djava.awt.headless=true"]

# Kafka Streams' own INFO lines (state changes, task assignment, restoration) tell what an
# instance did; the clients' and the config dumps stay at WARN. To stderr, which the
# harness writes to the instance's log beside its STATE lines.
_LOG4J = """\
status = error
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p [%t] %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = STDERR
logger.streams.name = org.apache.kafka.streams
logger.streams.level = info
logger.config.name = org.apache.kafka.streams.StreamsConfig
logger.config.level = warn
"""


def javac() -> str:
    """A javac for Java 17 classes: beside the `java` the tests run, else Debian's 17
    (`make java` installs openjdk-17-jdk-headless), else the one on PATH."""
    beside = Path(java()).resolve().parent / "javac"
    if beside.exists():
        return str(beside)
    for cand in sorted(Path("/usr/lib/jvm").glob("java-17-openjdk-*/bin/javac")):
        return str(cand)
    found = shutil.which("javac")
    if found:
        return found
    raise RuntimeError("javac not found: run `make java` (openjdk-17-jdk-headless)")


def app_classpath() -> str:
    """Kafka's jars and Kafka Streams'; fails (never skips) when `make kafka` has not
    fetched them."""
    if not list(STREAMS_LIB.glob("kafka-streams-*.jar")):
        raise RuntimeError(f"Kafka Streams jars missing in {STREAMS_LIB}: run `make kafka`")
    return f"{kafka_classpath()}:{STREAMS_LIB}/*"


@functools.cache
def compiled_app() -> Path:
    """The directory holding WordCountApp.class and its log4j2 config, compiled at most
    once per source, jars and javac (an atomic rename publishes it)."""
    compiler = javac()
    jars = sorted(p.name for lib in (KAFKA_LIB, STREAMS_LIB) for p in lib.glob("*.jar"))
    digest = hashlib.sha256("\0".join([SOURCE.read_text(), _LOG4J, compiler, *jars]).encode())
    out = CACHE / digest.hexdigest()[:16]
    if (out / f"{MAIN_CLASS}.class").exists():
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be compiling the same
        if (out / f"{MAIN_CLASS}.class").exists():
            return out
        tmp = CACHE / f".{out.name}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        proc = subprocess.run([compiler, "--release", "17", "-Xlint:all", "-Werror",
                               "-cp", app_classpath(), "-d", str(tmp), str(SOURCE)],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError(f"javac {SOURCE.name} failed:\n{proc.stdout}{proc.stderr}")
        (tmp / "log4j2.properties").write_text(_LOG4J)
        tmp.rename(out)
    return out


class StreamsInstance:
    """One instance (one JVM) of a `StreamsApp`, with a state dir and a log of its own that
    survive restarts: `start()` again after `kill()` restarts it on the same state."""

    def __init__(self, app: StreamsApp, name: str, threads: int = 1,
                 standbys: int | None = None) -> None:
        self.app = app
        self.name = name
        self.threads = threads
        self.standbys = standbys
        self.state_dir = app.base_dir / name / "state"
        self.log_path = app.base_dir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._run_start = 0  # where the current run's lines start in the log

    def command(self) -> list[str]:
        classes = compiled_app()
        app = self.app
        args = ["--bootstrap", app.bootstrap, "--application-id", app.application_id,
                "--input", app.input_topic, "--output", app.output_topic,
                "--state-dir", str(self.state_dir), "--protocol", app.protocol,
                "--threads", str(self.threads)]
        if self.standbys is not None:
            args += ["--standbys", str(self.standbys)]
        for key, value in app.props.items():
            args += ["--prop", f"{key}={value}"]
        log4j = classes / "log4j2.properties"
        return [java(), *APP_JVM_OPTS, f"-Dlog4j2.configurationFile={log4j}",
                "-cp", f"{classes}:{app_classpath()}", MAIN_CLASS, *args]

    def start(self) -> StreamsInstance:
        """Start the JVM (it returns at once; `wait_state` waits for RUNNING)."""
        assert not self.alive, f"{self.name} is already running"
        cmd = self.command()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"=== start {self.name}: {' '.join(cmd)}\n".encode())
            log.flush()  # before the JVM appends to the same file
            self._run_start = log.tell()
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def lines(self) -> list[str]:
        """The current run's lines (stdout and stderr)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._run_start)
                return f.read().decode(errors="replace").splitlines()
        except OSError:
            return []

    def states(self) -> list[str]:
        """The KafkaStreams states of the current run, in order."""
        return [line[6:].strip() for line in self.lines() if line.startswith("STATE ")]

    def tasks(self) -> tuple[set[str], set[str]]:
        """The active and standby tasks the current run last reported (the app prints
        `TASKS active=[...] standby=[...]` whenever they change while it runs)."""
        for line in reversed(self.lines()):
            if line.startswith("TASKS "):
                m = re.fullmatch(r"TASKS active=\[(.*)\] standby=\[(.*)\]", line.strip())
                assert m, line
                return ({t for t in m[1].split(", ") if t}, {t for t in m[2].split(", ") if t})
        return set(), set()

    def wait_until(self, check: Callable[[], bool], what: str, deadline: float) -> None:
        """Poll `check` until it holds; fail with the log when the deadline passes, the
        JVM exits or KafkaStreams reports an error."""
        while not check():
            states = self.states()
            if "ERROR" in states or "PENDING_ERROR" in states \
                    or any(line.startswith("ERROR ") for line in self.lines()):
                raise AssertionError(f"{self.name}: KafkaStreams failed waiting for {what}:\n"
                                     f"{self.logs()}")
            if not self.alive:
                code = None if self.proc is None else self.proc.returncode
                raise AssertionError(f"{self.name} exited ({code}) waiting for {what}:\n"
                                     f"{self.logs()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no {what} in time (states "
                                     f"{states}):\n{self.logs()}")
            time.sleep(0.1)

    def wait_state(self, state: str, deadline: float) -> None:
        """Wait until the current run has printed `STATE <state>`."""
        self.wait_until(lambda: state in self.states(), f"STATE {state}", deadline)

    def wait_tasks(self, deadline: float) -> set[str]:
        """Wait until the instance runs with at least one active task; return them."""
        self.wait_until(lambda: bool(self.tasks()[0]), "active tasks", deadline)
        return self.tasks()[0]

    def kill(self) -> None:
        """SIGKILL: no close, no leave, no commit (a crash)."""
        if self.alive:
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout: float = 45.0) -> int:
        """SIGTERM (the app's shutdown hook closes KafkaStreams), then SIGKILL when it has
        not exited by `timeout`; returns the exit status (143 after a clean SIGTERM)."""
        assert self.proc is not None, f"{self.name} never started"
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def closed_cleanly(self) -> bool:
        """Whether the last run's KafkaStreams.close() finished in time."""
        return "CLOSED true" in self.lines()

    def logs(self, chars: int = 6000) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return f"--- {self.log_path}\n{text[-chars:]}"


@dataclass
class StreamsApp:
    """The word count as one application (one application.id, hence one group) on a
    broker; `instance(name)` makes an instance of it, `start(name)` starts one."""

    bootstrap: str
    application_id: str
    input_topic: str
    output_topic: str
    protocol: str  # "classic" or "streams" (group.protocol)
    base_dir: Path
    #: extra StreamsConfig / client properties (`--prop key=value`)
    props: dict[str, str] = field(default_factory=dict)
    instances: list[StreamsInstance] = field(default_factory=list)

    def instance(self, name: str, threads: int = 1,
                 standbys: int | None = None) -> StreamsInstance:
        inst = StreamsInstance(self, name, threads, standbys)
        self.instances.append(inst)
        return inst

    def start(self, name: str, deadline: float, threads: int = 1,
              standbys: int | None = None) -> StreamsInstance:
        """A new instance, started and RUNNING."""
        inst = self.instance(name, threads, standbys).start()
        inst.wait_state("RUNNING", deadline)
        return inst

    def kill_all(self) -> None:
        for inst in self.instances:
            inst.kill()

    def logs(self) -> str:
        return "\n".join(inst.logs() for inst in self.instances)


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """Set dynamic group configs (streams.session.timeout.ms, ...) on `group`, which
    need not exist yet."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]
    for done in admin.incremental_alter_configs(
            [ConfigResource("group", group, incremental_configs=entries)]).values():
        done.result(30)


# --- input ---------------------------------------------------------------------------


def word_sequence(count: int, distinct: int = 200, seed: int = 37) -> list[str]:
    """`count` words out of `distinct` (w000, w001, ...), seeded, skewed (Zipf-like
    weights) so that some words are counted into the hundreds and some a few times."""
    rng = random.Random(seed)
    names = [f"w{i:03d}" for i in range(distinct)]
    words = rng.choices(names, weights=[1 / (i + 1) for i in range(distinct)], k=count)
    # every word at least once, so that each has a count to check
    return names + words[: count - distinct] if count >= distinct else words


def produce_words(bootstrap: str, topic: str, words: Iterable[str], first_key: int = 0,
                  rate: float | None = None, timeout: float = 60.0) -> int:
    """Produce `words` as values (keys "0", "1", ... from `first_key`) with an idempotent,
    acks=all producer, at most `rate` records a second when given (a steady stream, so an
    instance killed or stopped meanwhile is caught mid-stream, whatever its speed); every
    record is acknowledged or this fails. Returns the count."""
    errors: list[KafkaError] = []
    start = time.monotonic()

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(err)

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5})
    n = 0
    for n, word in enumerate(words, start=1):
        while True:
            try:
                p.produce(topic, key=str(first_key + n - 1).encode(), value=word.encode(),
                          on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                p.poll(0.1)
        p.poll(0)
        if rate is not None and (ahead := start + n / rate - time.monotonic()) > 0.01:
            time.sleep(ahead)  # pacing the stream, not waiting for anything
    left = p.flush(timeout)
    assert left == 0 and not errors, f"{left} records unacknowledged, errors: {errors[:5]}"
    return n


# --- output --------------------------------------------------------------------------


def _consumer(bootstrap: str, topic: str, timeout: float = 30.0) -> Consumer:
    """A read_committed consumer assigned every partition of `topic` from the beginning
    (no group membership, no commits), reporting the end of each partition (the last
    stable offset, past commit markers) as a PARTITION_EOF event."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{uuid.uuid4().hex}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    meta = c.list_topics(topic, timeout=timeout).topics[topic]
    assert meta.error is None and meta.partitions, f"{topic}: {meta.error}"
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(meta.partitions)])
    return c


def _end_offsets(c: Consumer, topic: str, parts: Iterable[int]) -> int:
    return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
               for p in parts)


def committed_end(bootstrap: str, topic: str) -> int:
    """The sum of `topic`'s partitions' end offsets for a read_committed reader (commit
    markers included, so a little above the number of records): a cheap measure of an
    application's progress."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"progress-{uuid.uuid4().hex}",
                  "isolation.level": "read_committed"})
    try:
        return _end_offsets(c, topic, c.list_topics(topic, timeout=10).topics[topic].partitions)
    finally:
        c.close()


def wait_progress(bootstrap: str, topic: str, at_least: int, deadline: float,
                  app: StreamsApp | None = None) -> int:
    """Poll `committed_end` (one reader, every 50 ms) until it reaches `at_least`; returns
    the value reached."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"progress-{uuid.uuid4().hex}",
                  "isolation.level": "read_committed"})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        while (end := _end_offsets(c, topic, parts)) < at_least:
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: committed output {end} < {at_least} in time\n"
                                     + (app.logs() if app else ""))
            time.sleep(0.05)
        return end
    finally:
        c.close()


@dataclass
class CountCheck:
    """What `verify_counts` read and what is wrong with it (nothing when `ok`)."""

    expected: dict[str, int]
    #: word -> the counts read for it, in order, with the (partition, offset) of each
    seen: dict[str, list[tuple[int, int, int]]]
    records: int
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        head = (f"{len(self.problems)} problems in {self.records} output records "
                f"({len(self.expected)} words, {sum(self.expected.values())} expected)")
        shown = self.problems[:40]
        more = len(self.problems) - len(shown)
        return "\n".join([head, *shown] + ([f"... and {more} more"] if more else []))


def _word_problems(word: str, want: int, seq: list[tuple[int, int, int]]) -> list[str]:
    out = []
    prev = 0
    for value, part, offset in seq:
        if value == prev:
            out.append(f"{word}: count {value} repeated (p{part}@{offset})")
        elif value < prev:
            out.append(f"{word}: count went back {prev} -> {value} (p{part}@{offset})")
        elif value > prev + 1:
            out.append(f"{word}: counts {prev + 1}..{value - 1} missing before "
                       f"{value} (p{part}@{offset})")
        prev = max(prev, value)
    final = seq[-1][0] if seq else 0
    if final != want:
        out.append(f"{word}: final count {final}, expected {want}"
                   + ("" if seq else " (never emitted)"))
    return out


def check_counts(expected: dict[str, int],
                 seen: dict[str, list[tuple[int, int, int]]], records: int) -> CountCheck:
    """Each expected word's counts read must be exactly 1, 2, ..., expected."""
    problems = []
    for word in sorted(expected.keys() | seen.keys()):
        if word not in expected:
            counts = [v for v, _, _ in seen[word]]
            problems.append(f"{word}: not a produced word, counts {counts[:10]}")
            continue
        problems += _word_problems(word, expected[word], seen.get(word, []))
    return CountCheck(dict(expected), seen, records, problems)


def verify_counts(bootstrap: str, output_topic: str, expected: dict[str, int],
                  deadline: float) -> CountCheck:
    """Read `output_topic` read_committed from the beginning until every word's last
    count is the expected one and the reader is at the committed end of every partition,
    or until `deadline` (a `time.monotonic()` value); check each word's counts are exactly
    1, 2, ..., expected. `CountCheck.ok` says whether they are; `str()` shows the diff."""
    seen: dict[str, list[tuple[int, int, int]]] = {}
    records = 0
    c = _consumer(bootstrap, output_topic)
    try:
        parts = {tp.partition for tp in c.assignment()}
        at_end: set[int] = set()  # partitions read to their end since their last record
        while True:
            for msg in c.consume(1000, timeout=0.2):
                part = msg.partition() or 0
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_end.add(part)
                        continue
                    raise AssertionError(f"{output_topic}: {err}")
                key, value = msg.key(), msg.value()
                assert key is not None and value is not None and len(value) == 8, msg
                (count,) = struct.unpack(">q", value)
                seen.setdefault(key.decode(), []).append((count, part, msg.offset() or 0))
                at_end.discard(part)
                records += 1
            complete = all(seen.get(w, [(0, 0, 0)])[-1][0] == n for w, n in expected.items())
            if (complete and at_end == parts) or time.monotonic() > deadline:
                break
    finally:
        c.close()
    return check_counts(expected, seen, records)


def expected_counts(words: Iterable[str]) -> dict[str, int]:
    return dict(Counter(words))
