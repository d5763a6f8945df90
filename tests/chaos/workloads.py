"""The campaign's clients (confluent-kafka, unmodified), each recording what it saw.

* `Writer`: an idempotent producer (acks=all) over the data topic's partitions, each
  value unique; its delivery reports are `Produced` ops (acknowledged or not).
* `Copier`: consume-transform-produce: a read_committed consumer in a group, a
  transactional producer copying each batch to the output topic in one transaction
  spanning partitions on every broker, with the consumer's positions
  (`send_offsets_to_transaction`); one transaction in `abort_every` is aborted on
  purpose, and a failed one is aborted or, when fatal, the producer is replaced (its
  successor fences it) and the consumer rewinds to the group's committed offsets.
* `Reader`: a read_committed consumer in a classic or a KIP-848 group, committing its
  position every batch (`Committed` ops once the commit succeeded).
* `Sharer`: a share consumer (KIP-932, explicit acknowledgement) accepting most records,
  releasing and rejecting some (seeded), each acknowledgement committed at once
  (`ShareDelivered`, `ShareAcked` with what the commit answered); the group has a
  delivery-count limit and a dead-letter topic (`ShareGroupConfig`).
* `OffsetsMonitor`: the groups' committed offsets as AdminClient lists them, every
  second (`OffsetsSeen`): they must never move back.
* `final_logs`: every partition read whole at the end (read_committed);
  `dead_letters`: the share group's dead-letter topic read whole (`DeadLettered`).

Each client stops when told, drains where told, and records with `time.time()`.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Final, Literal

from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    ShareConsumer,
    TopicPartition,
)

from tests.chaos.history import (
    AckKind,
    Committed,
    DeadLettered,
    FinalLog,
    OffsetsSeen,
    Op,
    Produced,
    Read,
    ShareAcked,
    ShareDelivered,
    TxnEnded,
)

Record = Callable[[Op], None]
READ_COMMITTED: Final = "read_committed"


class Worker(threading.Thread):
    """A client thread: `stop()` asks it to finish; errors are kept, not raised."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self._step: tuple[str, float] = ("starting", time.time())

    def _at(self, step: str) -> None:
        """Note the client call under way: a stalled worker's report names it."""
        self._step = (step, time.time())

    def where(self) -> str:
        step, since = self._step
        return f"in {step} for {time.time() - since:.0f} s"

    def stop(self, timeout: float = 120.0) -> None:
        self.stopping.set()
        self.join(timeout)

    def run(self) -> None:
        try:
            self.work()
        except Exception as exc:  # reported by the campaign, never lost
            self.errors.append(f"{self.name}: {type(exc).__name__}: {exc}")

    def work(self) -> None:
        raise NotImplementedError

    def _client_error(self, error: KafkaError) -> None:
        """librdkafka's error callback: a fatal error is the client's verdict on the
        broker (an idempotent producer must never need one under faults)."""
        if error.fatal():
            self.errors.append(f"{self.name}: fatal: {error.str()}")


class Writer(Worker):
    def __init__(self, bootstrap: str, index: int, topic: str, partitions: int,
                 record: Record, rate: float = 150.0) -> None:
        super().__init__(f"writer-{index}")
        self._producer = Producer({
            "bootstrap.servers": bootstrap, "client.id": self.name,
            "enable.idempotence": True, "acks": "all",
            # librdkafka's default message timeout (5 min): a message that times out
            # in flight is "possibly persisted", and librdkafka bumps the epoch and sends
            # the rest again under new sequence numbers, copies no broker can recognise,
            # on Kafka too (#4953, the maintainers' comment of 2025-05-16). At 90 s a
            # 93-second outage of a PostgreSQL restart storm (c27) made 6,678 copies,
            # every one under another (producer id, epoch): the client's, not the
            # broker's. How long writes went unserved is reported on its own.
            "linger.ms": 5, "message.timeout.ms": 300000, "request.timeout.ms": 10000,
            # One request in flight per broker: with more, a request that fails makes the
            # next one OUT_OF_ORDER_SEQUENCE, and librdkafka then bumps the producer's
            # epoch and renumbers every unacknowledged message, also those "possibly
            # persisted" on another partition whose leader just died: a duplicate no
            # broker can recognise, on Kafka too (librdkafka issue #4953, fix in PR
            # #4972, not merged in 2.16). docs/operations.md.
            "max.in.flight.requests.per.connection": 1,
            "error_cb": self._client_error,
            # HEADWATER_CHAOS_DEBUG=eos: librdkafka's idempotence states (epoch bumps)
            **({"debug": os.environ["HEADWATER_CHAOS_DEBUG"]}
               if os.environ.get("HEADWATER_CHAOS_DEBUG") else {})})
        self._topic, self._partitions, self._record, self._rate = (
            topic, partitions, record, rate)
        self.sent = 0

    def work(self) -> None:
        started = time.monotonic()
        while not self.stopping.is_set():
            seq = self.sent
            partition = seq % self._partitions
            value = f"{self.name}-{seq}"

            def report(err: Any, msg: Any, seq: int = seq, partition: int = partition,
                       value: str = value) -> None:
                self._record(Produced(
                    producer=self.name, seq=seq, topic=self._topic, partition=partition,
                    value=value, acked=err is None,
                    offset=msg.offset() if err is None else None, time=time.time()))
            try:
                self._producer.produce(self._topic, value=value.encode(),
                                       partition=partition, on_delivery=report)
            except BufferError:
                self._producer.poll(0.1)
                continue
            except KafkaException:
                self._producer.poll(0)  # the fatal error's reason, to `_client_error`
                raise
            self.sent += 1
            self._producer.poll(0)
            ahead = self.sent / self._rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
        self._producer.flush(120)


#: How long a copier waits for send_offsets_to_transaction before it gives the producer up.
#: librdkafka can block in it for good although it takes a timeout: its group-coordinator
#: request is never timed out (confluentinc/librdkafka#5456), and waits for a state change
#: of a broker dropped from Metadata while it was down (#5511).
SEND_OFFSETS_GIVE_UP_S: Final = 90.0


class _GaveUp(Exception):
    """A client call that did not return in its time: the producer is given up."""


def _bounded(call: Callable[[], None], seconds: float) -> None:
    """`call` in a thread of its own; _GaveUp if it has not returned after `seconds` (the
    thread is left blocked, daemonic: nothing can unblock librdkafka's wait)."""
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)
    thread = threading.Thread(target=run, name="bounded-call", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise _GaveUp(f"no answer in {seconds:.0f} s")
    if outcome:
        raise outcome[0]


class Copier(Worker):
    def __init__(self, bootstrap: str, index: int, source: str, sink: str,
                 sink_partitions: int, group: str, record: Record, seed: int,
                 abort_every: int = 6) -> None:
        super().__init__(f"copier-{index}")
        self._servers, self._source, self._sink = bootstrap, source, sink
        self._sink_partitions, self._group, self._record = sink_partitions, group, record
        self._rng = random.Random(seed)
        self._abort_every = abort_every
        self._generation = 0
        self._txns = 0
        self._txn_id = f"{group}-{index}"
        self._instance = 0  # a replaced producer is another producer in the history
        self._seq = 0
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap, "client.id": self.name, "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "isolation.level": READ_COMMITTED,
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
            # the classic protocol's rebalance timeout: a member that does not rejoin
            # holds the group that long (300 s by default)
            "max.poll.interval.ms": 30000})
        self._group_metadata: Any = None  # the group's, as of the last rebalance
        self._assignment: list[TopicPartition] = []  # as of the last rebalance
        self._producer = self._new_producer()
        self.copied = 0
        self.gave_up = 0  # producers given up in send_offsets_to_transaction

    def _new_producer(self) -> Producer:
        self._instance += 1
        self._seq = 0
        producer = Producer({"bootstrap.servers": self._servers, "client.id": self.name,
                             "transactional.id": self._txn_id, "linger.ms": 5,
                             "transaction.timeout.ms": 60000, "message.timeout.ms": 60000,
                             "request.timeout.ms": 10000,
                             **({"debug": os.environ["HEADWATER_CHAOS_DEBUG"]}
                                if os.environ.get("HEADWATER_CHAOS_DEBUG") else {})})
        while True:  # as an application would, for as long as it runs: an outage
            # longer than a fixed budget (InitProducerId answering CONCURRENT_TRANSACTIONS
            # or COORDINATOR_LOAD_IN_PROGRESS meanwhile) left the campaign without copiers
            try:
                self._at("init_transactions")
                producer.init_transactions(30)
                return producer
            except KafkaException as exc:
                if exc.args[0].fatal() or self.stopping.is_set():
                    raise
                time.sleep(0.5)

    # confluent-kafka calls librdkafka's consumer_group_metadata() and assignment() holding
    # the GIL, and librdkafka waits for its main thread to answer without a timeout. Once
    # that thread is deadlocked (confluentinc/librdkafka#5476: rk_lock against a
    # partition's lock when a broker is decommissioned while an OffsetForLeaderEpoch is in
    # flight) every thread of the campaign, the nemesis too, stopped for good (gdb on a
    # frozen run). So the copier asks neither in its loop: the group's metadata is read
    # once a rebalance (the main thread is running then: it delivered the rebalance) and
    # the assignment is kept from the rebalance callbacks.
    def _assigned(self, consumer: Any, parts: list[TopicPartition]) -> None:
        self._generation += 1
        self._assignment = list(parts)
        self._group_metadata = consumer.consumer_group_metadata()

    def _revoked(self, _consumer: Any, _parts: list[TopicPartition]) -> None:
        self._generation += 1
        self._assignment = []

    def work(self) -> None:
        self._consumer.subscribe([self._source], on_assign=self._assigned,
                                 on_revoke=self._revoked)
        while not self.stopping.is_set():
            self._at("consume")
            batch = [m for m in self._consumer.consume(100, 0.5) if not m.error()]
            if batch:
                self._copy(batch)
        self._at("close")
        self._consumer.close()

    def _copy(self, batch: list[Any]) -> None:
        self._txns += 1
        txn = f"{self._txn_id}#{self._txns}"
        for m in batch:
            self._record(Read(consumer=self.name, group=self._group,
                              generation=self._generation, isolation=READ_COMMITTED,
                              topic=m.topic(), partition=m.partition(), offset=m.offset(),
                              value=m.value().decode(), time=time.time()))
        positions: dict[int, int] = {}
        for m in batch:
            positions[m.partition()] = max(positions.get(m.partition(), 0), m.offset() + 1)
        offsets = [(self._group, self._source, p, o) for p, o in sorted(positions.items())]
        producer_name = f"{self.name}/{self._instance}"
        try:
            self._at(f"begin_transaction of {txn}")
            self._producer.begin_transaction()
            self._at(f"produce of {txn}")
            seen: Counter[str] = Counter()
            for m in batch:
                source = m.value().decode()
                seen[source] += 1  # a source value read twice (a duplicate upstream,
                # which the checker reports there) still gets a value of its own here
                repeat = "" if seen[source] == 1 else f"~{seen[source] - 1}"
                value = f"{txn}:{source}{repeat}"
                partition = zlib.crc32(value.encode()) % self._sink_partitions

                def report(err: Any, msg: Any, seq: int = self._seq, value: str = value,
                           partition: int = partition) -> None:
                    self._record(Produced(
                        producer=producer_name, seq=seq, topic=self._sink,
                        partition=partition, value=value, acked=err is None,
                        offset=msg.offset() if err is None else None, txn=txn,
                        time=time.time()))
                self._producer.produce(self._sink, value=value.encode(),
                                       partition=partition, on_delivery=report)
                self._seq += 1
            self._at(f"send_offsets_to_transaction of {txn}")
            producer, group = self._producer, self._group_metadata
            _bounded(lambda: producer.send_offsets_to_transaction(
                [TopicPartition(self._source, p, o) for p, o in sorted(positions.items())],
                group, 30), SEND_OFFSETS_GIVE_UP_S)
            aborted = self._rng.randrange(self._abort_every) == 0
            self._at(f"{'abort' if aborted else 'commit'}_transaction of {txn}")
            if aborted:
                self._producer.abort_transaction(30)
            else:
                self._producer.commit_transaction(30)
        except KafkaException as exc:
            self._failed(txn, exc.args[0], offsets)
            return
        except _GaveUp:
            self.gave_up += 1  # as after a fatal error: a new instance fences this one
            self._ended(txn, "unknown", offsets)
            self._producer = self._new_producer()
            self._rewind()
            return
        if aborted:
            self._ended(txn, "abort", offsets)
            self._rewind()
            return
        self._ended(txn, "commit", offsets)
        self.copied += len(batch)

    def _ended(self, txn: str, outcome: Literal["commit", "abort", "unknown"],
               offsets: list[tuple[str, str, int, int]]) -> None:
        self._producer.flush(0)  # delivery reports first: they belong to `txn`
        self._record(TxnEnded(txn=txn, outcome=outcome, producer=self.name,
                              time=time.time(), offsets=tuple(offsets)))

    def _failed(self, txn: str, error: KafkaError,
                offsets: list[tuple[str, str, int, int]]) -> None:
        if error.txn_requires_abort():
            try:
                self._at(f"abort_transaction of {txn} after {error.name()}")
                self._producer.abort_transaction(30)
            except KafkaException:
                pass
            else:
                self._ended(txn, "abort", offsets)
                self._rewind()
                return
        # fatal, or an abort or a commit whose outcome is unknown: a new instance
        # fences this one and completes or aborts what it left open
        self._ended(txn, "unknown", offsets)
        self._producer = self._new_producer()
        self._rewind()

    def _rewind(self) -> None:
        """Back to the group's committed offsets (what the transactions committed)."""
        assignment = [TopicPartition(tp.topic, tp.partition) for tp in self._assignment]
        if not assignment:
            return
        deadline = time.monotonic() + 120
        while True:  # NOT_COORDINATOR while the group's coordinator moves: ask again
            try:
                self._at("committed (rewinding)")
                committed = self._consumer.committed(assignment, 30)
                break
            except KafkaException:
                if time.monotonic() > deadline or self.stopping.is_set():
                    raise
                time.sleep(0.5)
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else 0
            self._consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
        self._generation += 1


class Reader(Worker):
    def __init__(self, bootstrap: str, name: str, topic: str, group: str, protocol: str,
                 record: Record) -> None:
        super().__init__(name)
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "client.id": name, "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "isolation.level": READ_COMMITTED,
            "on_commit": self._committed,
            # The client's own view, for a stall's report (`where`): its group state and
            # each partition's fetch state, every 10 s.
            "statistics.interval.ms": 10000, "stats_cb": self._stats}
        if protocol == "consumer":
            config["group.protocol"] = "consumer"
        else:
            config.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
                           "max.poll.interval.ms": 30000})
        self._consumer = Consumer(config)
        self._topic, self._group, self._record = topic, group, record
        self._generation = 0
        self._committing = False  # an asynchronous commit awaits its answer
        self.seen: set[str] = set()
        self._client_view = "no statistics yet"
        #: Values the reader must read before it stops (set by the campaign's drain).
        self.wanted: set[str] | None = None

    def _assigned(self, _consumer: Any, _parts: list[TopicPartition]) -> None:
        self._generation += 1

    def work(self) -> None:
        self._consumer.subscribe([self._topic], on_assign=self._assigned,
                                 on_revoke=self._assigned)
        while not (self.stopping.is_set() and (self.wanted is None
                                               or self.wanted <= self.seen)):
            self._at("consume")
            batch: list[Any] = [m for m in self._consumer.consume(200, 0.5)
                                if not m.error()]
            self._at("recording")
            for m in batch:
                value = m.value().decode()
                self.seen.add(value)
                self._record(Read(consumer=self.name, group=self._group,
                                  generation=self._generation, isolation=READ_COMMITTED,
                                  topic=m.topic(), partition=m.partition(),
                                  offset=m.offset(), value=value, time=time.time()))
            if batch:
                self._commit()
        self._at("close")
        self._consumer.close()

    def where(self) -> str:
        missing = len(self.wanted - self.seen) if self.wanted is not None else "?"
        return (f"{missing} wanted values not read yet, {super().where()}; the client's "
                f"last statistics: {self._client_view}")

    def _stats(self, raw: str) -> None:
        """librdkafka's statistics: the consumer group's state and the partitions not
        fetching, kept for `where`."""
        try:
            stats = json.loads(raw)
        except ValueError:
            return
        cgrp = stats.get("cgrp") or {}
        fetch = Counter(p.get("fetch_state") for t in (stats.get("topics") or {}).values()
                        for n, p in (t.get("partitions") or {}).items() if n != "-1"
                        and p.get("fetch_state") != "none")
        # A partition behind its end: what the client believes of it (its leader and
        # leader epoch, where it fetches, the end it was told), to tell a stall's cause.
        behind = [f"{name}-{n} leader {p.get('leader')} epoch {p.get('leader_epoch')} "
                  f"{p.get('fetch_state')} at {p.get('next_offset')} of hw "
                  f"{p.get('hi_offset')} lso {p.get('ls_offset')} queued "
                  f"{p.get('fetchq_cnt')}"
                  for name, t in (stats.get("topics") or {}).items()
                  for n, p in (t.get("partitions") or {}).items()
                  if n != "-1" and p.get("fetch_state") != "none"
                  and 0 <= p.get("next_offset", -1) < p.get("ls_offset", -1)]
        self._client_view = (f"group {cgrp.get('state')}/{cgrp.get('join_state')}, "
                             f"{cgrp.get('assignment_size')} assigned, rebalanced "
                             f"{cgrp.get('rebalance_age', 0) / 1000:.0f} s ago "
                             f"({cgrp.get('rebalance_reason')!r}), fetch states "
                             f"{dict(fetch)}, behind: {'; '.join(behind) or 'none'} "
                             f"at {time.strftime('%H:%M:%S')}")

    def _commit(self) -> None:
        """Asynchronous, recorded once acknowledged (`_committed`): a synchronous commit
        blocks while the group's coordinator moves, and a reader blocked past
        max.poll.interval.ms leaves its group. One at a time: two in flight can land in
        either order when one is retried at a new coordinator, and the older offset
        then overwrites the newer (a 20-minute campaign's 12 `commit_lost` were that)."""
        if self._committing:
            return
        self._at("commit")
        try:
            self._consumer.commit(asynchronous=True)
            self._committing = True
        except KafkaException:
            return  # nothing to commit, or refused at once: nothing recorded

    def _committed(self, error: Any, partitions: list[TopicPartition]) -> None:
        self._committing = False
        if error is not None:
            return  # not acknowledged: nothing recorded
        now = time.time()
        for tp in partitions:
            if tp.error is None and tp.offset >= 0:
                self._record(Committed(group=self._group, topic=tp.topic,
                                       partition=tp.partition, offset=tp.offset,
                                       consumer=self.name, time=now))


ACK_TYPES: Final[dict[AckKind, Any]] = {"accept": AcknowledgeType.ACCEPT,
                                        "release": AcknowledgeType.RELEASE,
                                        "reject": AcknowledgeType.REJECT}


class Sharer(Worker):
    """A share consumer of `group`: every record it gets is acknowledged (accept, or one
    in `every` released and one in `every` rejected, by the seed) and the
    acknowledgements committed at once; `ok` is what the commit answered for the
    record's partition (False when it raised: the outcome is unknown)."""

    def __init__(self, bootstrap: str, index: int, topic: str, group: str,
                 record: Record, seed: int, every: int = 20) -> None:
        super().__init__(f"sharer-{index}")
        self._consumer = ShareConsumer({
            "bootstrap.servers": bootstrap, "client.id": self.name, "group.id": group,
            "share.acknowledgement.mode": "explicit", "max.poll.records": 100})
        self._topic, self._group, self._record = topic, group, record
        self._rng = random.Random(seed)
        self._every = every
        self.acked = 0

    def _kind(self) -> AckKind:
        roll = self._rng.randrange(self._every)
        return "release" if roll == 0 else "reject" if roll == 1 else "accept"

    def work(self) -> None:
        self._consumer.subscribe([self._topic])
        while not self.stopping.is_set():
            try:
                batch: list[Any] = [m for m in self._consumer.poll(0.5)
                                    if m.error() is None]
            except KafkaException:
                continue  # a broker is down for a moment
            now = time.time()
            decided = []
            for m in batch:
                value = m.value().decode()
                self._record(ShareDelivered(
                    consumer=self.name, group=self._group, topic=m.topic(),
                    partition=m.partition(), offset=m.offset(), value=value,
                    delivery_count=m.delivery_count(), time=now))
                kind = self._kind()
                self._consumer.acknowledge(m, ACK_TYPES[kind])
                decided.append((m, value, kind))
            if decided:
                self._commit(decided)
        self._at("close")
        self._consumer.close()

    def _commit(self, decided: list[tuple[Any, str, AckKind]]) -> None:
        try:
            results = self._consumer.commit_sync(15)
            answered = {(tp.topic, tp.partition): err for tp, err in (results or {}).items()}
        except KafkaException:
            answered = {}
        now = time.time()
        for m, value, kind in decided:
            key = (m.topic(), m.partition())
            ok = key in answered and answered[key] is None
            self._record(ShareAcked(consumer=self.name, group=self._group, topic=m.topic(),
                                    partition=m.partition(), offset=m.offset(), value=value,
                                    kind=kind, ok=ok, time=now))
        self.acked += len(decided)


class OffsetsMonitor(Worker):
    """Reads committed offsets through a group-less Consumer of each group
    (`committed()`: OffsetFetch from the group's coordinator). Not AdminClient's
    list_consumer_group_offsets: librdkafka 2.16's admin handler of an OffsetFetch that
    answers NOT_COORDINATOR dereferences the consumer group it does not have
    (rd_kafka_handle_OffsetFetch -> rd_kafka_cgrp_op) and the process dies of SIGSEGV,
    as it did here whenever a coordinator moved."""

    def __init__(self, bootstrap: str, groups: Iterable[tuple[str, str, int]],
                 record: Record) -> None:
        super().__init__("offsets-monitor")
        self._groups = [(group, topic, partitions, Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}))
            for group, topic, partitions in groups]
        self._record = record

    def work(self) -> None:
        while not self.stopping.wait(1.0):
            for group, topic, partitions, consumer in self._groups:
                sent = time.time()  # a fetch counts from when it was sent
                try:
                    answer = consumer.committed(
                        [TopicPartition(topic, p) for p in range(partitions)], timeout=10)
                except KafkaException:
                    continue  # unavailable during a fault: nothing seen
                for tp in answer:
                    if tp.error is None:
                        self._record(OffsetsSeen(group=group, topic=tp.topic,
                                                 partition=tp.partition,
                                                 offset=max(tp.offset, -1), time=sent))
        for _g, _t, _p, consumer in self._groups:
            consumer.close()


def _high_watermark(consumer: Consumer, tp: TopicPartition, timeout: float) -> int:
    """The partition's high watermark, asked again while the answer is an error
    (NOT_LEADER_FOR_PARTITION while a partition moves after the last fault)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return int(consumer.get_watermark_offsets(
                tp, timeout=min(30.0, max(deadline - time.monotonic(), 1.0)))[1])
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def final_logs(bootstrap: str, topics: dict[str, int], deadline: float,
               errors: list[str]) -> list[FinalLog]:
    """Every partition of `topics` read from its start to its end, read_committed, all
    by `deadline` (time.monotonic()), each in its share of what is left. A partition
    that cannot be read in time goes into `errors` and gets no FinalLog (the checker
    gives no verdict on it): the others are still read."""
    out = []
    todo = [(topic, partition) for topic, partitions in topics.items()
            for partition in range(partitions)]
    for i, (topic, partition) in enumerate(todo):
        ends = time.monotonic() + max((deadline - time.monotonic()) / (len(todo) - i), 10.0)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-final",
                             "enable.auto.commit": False, "isolation.level": READ_COMMITTED,
                             "enable.partition.eof": True})
        try:
            high = _high_watermark(consumer, TopicPartition(topic, partition),
                                   max(ends - time.monotonic(), 1.0))
            consumer.assign([TopicPartition(topic, partition, 0)])
            records: list[tuple[int, str]] = []
            while time.monotonic() < ends:
                m: Any = consumer.poll(1.0)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        break
                    continue
                records.append((m.offset(), m.value().decode()))
            else:
                raise AssertionError(f"not read to its end in time ({len(records)} records "
                                     f"read, high watermark {high})")
            out.append(FinalLog(topic=topic, partition=partition, records=tuple(records),
                                data_offsets_end=high))
        except (AssertionError, KafkaException) as exc:
            errors.append(f"final read of {topic}-{partition}: {exc}")
        finally:
            consumer.close()
    return out


def dead_letters(bootstrap: str, topic: str, group: str, expect: int,
                 timeout: float = 60.0) -> list[DeadLettered]:
    """The share group's dead letters (partition 0 of `topic`), each named by its
    original's __dlq.errors.* headers; read until at least `expect` are there (the
    archive and its dead letter are written a moment apart) or `timeout` passes."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-final",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    out: list[DeadLettered] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m: Any = consumer.poll(1.0)
            if m is None or (m.error() and m.error().code() == KafkaError._PARTITION_EOF):
                if len(out) >= expect:
                    break
                continue
            if m.error():
                continue
            headers = {k: v.decode() for k, v in (m.headers() or []) if v is not None}
            if headers.get("__dlq.errors.group") != group:
                continue
            out.append(DeadLettered(
                group=group, topic=headers["__dlq.errors.topic"],
                partition=int(headers["__dlq.errors.partition"]),
                offset=int(headers["__dlq.errors.offset"]),
                value=(m.value() or b"").decode(), time=time.time()))
    finally:
        consumer.close()
    return out
