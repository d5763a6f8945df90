"""A fault campaign against three brokers, checked the way Jepsen checks Kafka.

The workloads (`workloads.py`) run all at once while the nemesis (`faults.py`) injects
faults on a seeded schedule; then the faults are healed, the writers flush, the copiers
copy everything, the readers drain, every partition is read whole, and the checker
(`checker.py`) looks at the whole history. `make chaos` runs a long campaign
(`python -m tests.chaos.campaign --duration 1800`); `make test-shared` a short seeded one
(`tests/integration/test_chaos_campaign.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from headwater.faults import ACK_BEFORE_COMMIT_KEY
from tests.chaos.checker import NEVER_READ, Report, archived, check
from tests.chaos.faults import Nemesis, schedule
from tests.chaos.history import Op, Produced, ShareGroupConfig, TxnEnded, dump
from tests.chaos.recovery import recoveries
from tests.chaos.recovery import summary as recovery_summary
from tests.chaos.workloads import (
    Copier,
    OffsetsMonitor,
    Reader,
    Sharer,
    Worker,
    Writer,
    dead_letters,
    final_logs,
)
from tests.support.cluster import Cluster, create, start_cluster, wait_listed
from tests.support.engines import PostgresServer, VersityGateway
from tests.support.toxiproxy import Toxiproxy

DATA, OUT = "chaos-data", "chaos-out"
PARTITIONS = 6
COPY_GROUP, CLASSIC_GROUP, MODERN_GROUP = "chaos-copier", "chaos-classic", "chaos-848"
SHARE_GROUP, DEAD_LETTERS, DELIVERY_LIMIT = "chaos-share", "dlq.chaos-share", 3


@dataclass
class Outcome:
    seed: int
    duration: float
    report: Report
    faults: Counter[str]
    history: list[Op] = field(repr=False)
    errors: list[str]
    elapsed: float
    phases: dict[str, float] = field(default_factory=dict)  # seconds from the start
    revived: int = 0  # brokers that exited on their own and were started again
    skipped: list[str] = field(default_factory=list)  # faults the harness could not inject
    #: Workers still busy when the settle budget ran out: liveness, not safety (what they
    #: did is checked; what a stalled reader did not read yet is counted here, not as
    #: `never_read`).
    stalled: list[str] = field(default_factory=list)

    def summary(self) -> str:
        ops = Counter(type(op).__name__ for op in self.history)
        acked = sum(1 for op in self.history if isinstance(op, Produced) and op.acked)
        txns = Counter(op.outcome for op in self.history if isinstance(op, TxnEnded))
        return "\n".join([
            f"chaos campaign, seed {self.seed}: {self.duration:.0f} s of faults, "
            f"{self.elapsed:.0f} s in all ("
            + ", ".join(f"{k} at {v:.0f} s" for k, v in self.phases.items()) + ")",
            "faults injected: " + (", ".join(f"{k} {n}" for k, n in
                                             sorted(self.faults.items())) or "none")
            + f"; brokers started again after exiting on their own: {self.revived}",
            f"operations recorded: {len(self.history)} ({', '.join(f'{k} {n}' for k, n in sorted(ops.items()))})",
            f"writes acknowledged: {acked} ({acked / max(self.duration, 1):.0f}/s); "
            f"transactions: {', '.join(f'{k} {n}' for k, n in sorted(txns.items()))}",
            f"anomalies: {len(self.report.anomalies)}"
            + "".join(f"\n  {k}: {len(found)}"
                      for k, found in sorted(self.report.by_kind().items())),
            "time clients went unserved around each fault, by kind:",
            *recovery_summary(recoveries(self.history)),
            *(f"harness: {s}" for s in self.skipped),
            *(f"stalled: {s}" for s in self.stalled),
            *(f"client error: {e}" for e in self.errors),
        ])


class Budget:
    """One deadline for a phase of the campaign: every wait in it takes what is left, so
    a campaign that goes wrong ends in bounded time with its report, never hangs."""

    def __init__(self, seconds: float) -> None:
        self.ends = time.monotonic() + seconds

    def left(self, floor: float = 1.0) -> float:
        return max(self.ends - time.monotonic(), floor)


#: Seconds for reading every partition whole and the dead letters, after the settle.
FINAL_S = 150.0


#: Quiet seconds between a heal and the next fault (the seed picks within them).
GAP: tuple[float, float] = (2.0, 6.0)


def run(cluster: Cluster, seed: int, duration: float, settle: float = 180.0,
        gap: tuple[float, float] = GAP) -> Outcome:
    """The workloads under `duration` seconds of seeded faults, then at most `settle`
    seconds in all for healing, flushing, copying and reading what must be read, and
    at most FINAL_S for the final reads."""
    started = time.monotonic()
    history: list[Op] = []
    record = history.append  # atomic under the GIL: every client thread records here
    bootstrap = cluster.bootstrap()
    create(bootstrap, DATA, PARTITIONS)
    create(bootstrap, OUT, PARTITIONS)
    share_group(bootstrap)
    record(ShareGroupConfig(group=SHARE_GROUP, delivery_count_limit=DELIVERY_LIMIT,
                            dlq_topic=DEAD_LETTERS))
    writers = [Writer(bootstrap, i, DATA, PARTITIONS, record) for i in range(2)]
    copiers = [Copier(bootstrap, i, DATA, OUT, PARTITIONS, COPY_GROUP, record, seed + i)
               for i in range(2)]
    readers = [Reader(bootstrap, "reader-classic", DATA, CLASSIC_GROUP, "classic", record),
               Reader(bootstrap, "reader-848", OUT, MODERN_GROUP, "consumer", record)]
    sharers = [Sharer(bootstrap, i, DATA, SHARE_GROUP, record, seed + 10 + i)
               for i in range(2)]
    monitor = OffsetsMonitor(bootstrap, [(COPY_GROUP, DATA, PARTITIONS),
                                         (CLASSIC_GROUP, DATA, PARTITIONS),
                                         (MODERN_GROUP, OUT, PARTITIONS)], record)
    workers: list[Worker] = [*writers, *copiers, *readers, *sharers, monitor]
    for worker in workers:
        worker.start()
    nemesis = Nemesis(cluster, schedule(seed, duration, gap), record).start()
    time.sleep(duration)  # the campaign's length (faults run meanwhile)
    budget = Budget(settle)
    nemesis.stop(timeout=min(120.0, budget.left()))
    errors: list[str] = []
    for node in (1, 2, 3):
        try:
            _wait_listed(cluster.bootstrap(node), timeout=budget.left())
        except (AssertionError, KafkaException) as exc:
            errors.append(f"broker {node} does not list all three after the faults: {exc}")
    for writer in writers:
        writer.stop(timeout=budget.left())
    phases = {"faults": time.monotonic() - started}
    _drain_copiers(copiers, history, timeout=budget.left())
    phases["copied"] = time.monotonic() - started
    for reader in readers:
        reader.wanted = _must_read(history, reader)
    for reader in readers:
        reader.stop(timeout=budget.left())
    monitor.stop(timeout=budget.left())
    for sharer in sharers:
        sharer.stop(timeout=budget.left())
    phases["read"] = time.monotonic() - started
    final = Budget(FINAL_S)
    try:
        history.extend(final_logs(bootstrap, {DATA: PARTITIONS, OUT: PARTITIONS},
                                  deadline=final.ends, errors=errors))
        history.extend(dead_letters(bootstrap, DEAD_LETTERS, SHARE_GROUP,
                                    expect=len(archived(history)),
                                    timeout=min(60.0, final.left())))
    except (AssertionError, KafkaException) as exc:
        errors.append(f"final reads: {exc}")
    phases["final logs"] = time.monotonic() - started
    errors += [e for w in workers for e in w.errors] + nemesis.errors
    stalled = [f"{w.name} did not finish within the settle budget ({w.where()})"
               for w in workers if w.is_alive()]
    stalled += [f"{c.name} gave up {c.gave_up} producer(s) stuck in "
                f"send_offsets_to_transaction (librdkafka #5456)" for c in copiers if c.gave_up]
    report = check(history)
    late = {_topic_of(r) for r in readers if r.is_alive()}
    unread = [a for a in report.anomalies if a.kind == NEVER_READ and a.ops
              and isinstance(a.ops[0], Produced) and a.ops[0].topic in late]
    if unread:
        # A reader still reading when the budget ran out has not read these *yet*:
        # liveness (reported with the stalled workers). What it did read is checked,
        # and a read that skipped a record is `poll_skip` whether it finished or not.
        gone = {id(a) for a in unread}
        report.anomalies = [a for a in report.anomalies if id(a) not in gone]
        stalled.append(f"{len(unread)} records not read in time by the stalled readers")
    return Outcome(seed, duration, report, Counter(nemesis.injected), history,
                   errors, time.monotonic() - started, phases, nemesis.revived,
                   nemesis.skipped, stalled)


def share_group(bootstrap: str) -> None:
    """The share group reads the data topic from its start, archives a record at its
    third delivery, and writes archived records to a dead-letter topic (KIP-1191)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(DEAD_LETTERS, 1, 1, config={
        "errors.deadletterqueue.group.enable": "true"})])[DEAD_LETTERS].result(30)
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in {
        "share.auto.offset.reset": "earliest",
        "share.delivery.count.limit": str(DELIVERY_LIMIT),
        "errors.deadletterqueue.topic.name": DEAD_LETTERS}.items()]
    for future in admin.incremental_alter_configs(
            [ConfigResource("group", SHARE_GROUP, incremental_configs=entries)]).values():
        future.result(30)


def _wait_listed(bootstrap: str, timeout: float = 120.0) -> None:
    """wait_listed, through the moments a just-restarted broker refuses connections."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            wait_listed(bootstrap, [1, 2, 3], timeout=max(deadline - time.monotonic(), 1))
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def _drain_copiers(copiers: list[Copier], history: list[Op], timeout: float) -> None:
    """The copiers run until every acknowledged write of the data topic is copied
    (their committed transactions read it), then stop."""
    wanted = {op.value for op in list(history) if isinstance(op, Produced)
              and op.topic == DATA and op.acked}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        copied = _committed_reads(list(history))
        if wanted <= copied:
            break
        time.sleep(0.5)
    for copier in copiers:
        copier.stop(timeout=max(deadline - time.monotonic(), 1.0))


def _committed_reads(history: list[Op]) -> set[str]:
    """The data values the copiers' committed transactions copied."""
    committed = {op.txn for op in history if isinstance(op, TxnEnded)
                 and op.outcome == "commit"}
    return {op.value.split(":", 1)[1] for op in history
            if isinstance(op, Produced) and op.topic == OUT and op.acked
            and op.txn in committed}


def _topic_of(reader: Reader) -> str:
    """The classic reader reads the writers' topic, the KIP-848 one the copiers'."""
    return DATA if reader.name == "reader-classic" else OUT


def _must_read(history: list[Op], reader: Reader) -> set[str]:
    """What the reader's topic holds for certain: acknowledged writes outside
    transactions, and those of committed transactions."""
    ops = list(history)
    committed = {op.txn for op in ops if isinstance(op, TxnEnded) and op.outcome == "commit"}
    topic = _topic_of(reader)
    return {op.value for op in ops if isinstance(op, Produced) and op.topic == topic
            and op.acked and (op.txn is None or op.txn in committed)}


_SHAPE = re.compile(r"[0-9a-f]{32}|\d+")


def log_digest(cluster: Path, top: int = 25) -> str:
    """The brokers' warnings and errors, counted by shape (numbers and ids replaced):
    what CI shows of a failed campaign, whose brokers' logs it does not keep."""
    shapes: Counter[str] = Counter()
    for path in sorted(cluster.glob("broker-*-broker.log")):
        with path.open(errors="replace") as lines:
            for line in lines:
                words = line.split(" ", 3)  # date, time, level, the rest
                if len(words) == 4 and words[2] in ("WARNING", "ERROR"):
                    shapes[f"{words[2]} {_SHAPE.sub('N', words[3].strip())[:160]}"] += 1
    return "\n".join(["the brokers' warnings and errors, by shape:",
                      *(f"{n:6d} {shape}" for shape, n in shapes.most_common(top))])


#: Seconds the harness's threads may all be held up (one holding the GIL in a client
#: library's call) before faulthandler writes every thread's stack.
STALL_S = 10.0


def _watch_the_harness(path: Path) -> None:
    """Every thread's stack to `path` whenever no Python code of this process ran for
    STALL_S: faulthandler's own thread needs no GIL. A thread re-arms it each second."""
    import faulthandler
    import threading

    out = open(path, "w")  # noqa: SIM115 (for the process's life)

    def rearm() -> None:
        while True:
            faulthandler.dump_traceback_later(STALL_S, file=out)
            time.sleep(1.0)
    threading.Thread(target=rearm, name="stall-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    parser.add_argument("--duration", type=float, default=1800.0,
                        help="seconds of faults (the drain and the check follow)")
    parser.add_argument("--settle", type=float, default=180.0,
                        help="seconds at most for healing, copying and reading after them")
    parser.add_argument("--planted", action="store_true",
                        help="brokers built with a bug (produce acknowledged before its "
                             "commit, faults.py) that the checker must catch")
    parser.add_argument("--history", type=Path, help="write the history here (JSON lines)")
    parser.add_argument("--result", type=Path,
                        help="write the outcome here (JSON: faults, anomalies by kind, "
                             "errors, summary)")
    parser.add_argument("--gap", type=lambda text: tuple(map(float, text.split(","))),
                        default=GAP, help="quiet seconds after each heal, LOW,HIGH "
                                          "(default %(default)s)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the brokers' data and logs whatever the outcome")
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="headwater-chaos-"))
    _watch_the_harness(base / "harness-stalls.txt")
    postgres = PostgresServer(base / "pg").start()
    gateway = VersityGateway(base / "gw").start()
    proxies = Toxiproxy(base / "toxiproxy").start()
    overrides = (f"{ACK_BEFORE_COMMIT_KEY}=true",) if args.planted else ()
    clusters = start_cluster(postgres, gateway, base / "cluster", overrides=overrides,
                             proxies=proxies)
    cluster = next(clusters)
    try:
        outcome = run(cluster, args.seed, args.duration, settle=args.settle, gap=args.gap)
    finally:
        for _ in clusters:  # stops the brokers
            pass
        proxies.kill()
        gateway.kill()
        postgres.stop("immediate")  # its directory (and log) is removed below, or kept
    if args.history:
        dump(outcome.history, args.history)
    failed = bool(outcome.report.anomalies or outcome.errors)
    digest = log_digest(base / "cluster") if failed else ""
    print(outcome.summary())
    if outcome.report.anomalies:
        print(outcome.report.render())
    if args.result:
        args.result.write_text(json.dumps({
            "seed": outcome.seed, "faults": dict(outcome.faults),
            "anomalies": {k: len(v) for k, v in outcome.report.by_kind().items()},
            "counts": dict(outcome.report.counts), "errors": outcome.errors,
            "stalled": outcome.stalled,
            "summary": outcome.summary(),
            "report": outcome.report.render()[:20000] if outcome.report.anomalies else "",
            "digest": digest}))
    if digest:
        print(digest)
    print(json.dumps({"seed": outcome.seed, "anomalies": len(outcome.report.anomalies)}))
    if args.keep or ((failed or outcome.stalled) and not args.planted):  # to look into
        print(f"kept the brokers' data and logs under {base}, PostgreSQL's under "
              f"{postgres.base}")
    else:
        shutil.rmtree(base, ignore_errors=True)
        postgres.remove()
    return 1 if failed else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Not sys.exit: a client thread still blocked in librdkafka (a reader that never
    # read what it must) would hold the interpreter's shutdown; the outcome is written.
    os._exit(code)
