"""Checks a fault campaign's history (history.py) against what a Kafka broker promises.

`check` sorts the history once into dicts keyed by value and by partition, then runs each
check as a pass over them, so a history of a million ops takes seconds. Each check reports
only what no correct broker can produce: an unacknowledged write may or may not be in the
log, a read_uncommitted consumer may see aborted data, a consumer may rewind when its
assignment changes, a released or failed-to-accept share record may come back.

The final logs are the reference: a write is judged present or absent only in a partition
with a FinalLog (the last one recorded for it wins), so a campaign that could not drain a
partition gets no verdict on it rather than a false one.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from .history import (
    Committed,
    DeadLettered,
    Fault,
    FinalLog,
    OffsetsSeen,
    Op,
    Outcome,
    Produced,
    Read,
    ShareAcked,
    ShareDelivered,
    ShareGroupConfig,
    TxnEnded,
)

LOST = "lost"
DUPLICATE = "duplicate"
MOVED = "moved"
ORDER = "order"
ABORTED_READ = "aborted_read"
TORN_TRANSACTION = "torn_transaction"
POLL_SKIP = "poll_skip"
POLL_BACKWARDS = "poll_backwards"
COMMIT_BACKWARDS = "commit_backwards"
COMMIT_LOST = "commit_lost"
NEVER_READ = "never_read"
SHARE_REDELIVERED_AFTER_ACCEPT = "share_redelivered_after_accept"
SHARE_DELIVERY_COUNT = "share_delivery_count"
SHARE_DEAD_LETTER = "share_dead_letter"
KINDS = (LOST, DUPLICATE, MOVED, ORDER, ABORTED_READ, TORN_TRANSACTION, POLL_SKIP,
         POLL_BACKWARDS, COMMIT_BACKWARDS, COMMIT_LOST, NEVER_READ,
         SHARE_REDELIVERED_AFTER_ACCEPT, SHARE_DELIVERY_COUNT, SHARE_DEAD_LETTER)

TopicPartition = tuple[str, int]
ShareKey = tuple[str, str, int, int]  # group, topic, partition, offset
OffsetKey = tuple[str, str, int]  # group, topic, partition


@dataclass(slots=True)
class Anomaly:
    """One violated promise: its kind (a constant above), what happened, and the ops that
    show it (never a whole FinalLog: the message names its offsets instead)."""

    kind: str
    message: str
    ops: list[Op] = field(default_factory=list)


@dataclass(slots=True)
class Report:
    """The anomalies found, the ops checked by type, and the faults to read them beside."""

    anomalies: list[Anomaly]
    counts: dict[str, int]
    faults: list[Fault] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.anomalies

    def by_kind(self) -> dict[str, list[Anomaly]]:
        kinds: dict[str, list[Anomaly]] = {}
        for anomaly in self.anomalies:
            kinds.setdefault(anomaly.kind, []).append(anomaly)
        return kinds

    def render(self, margin: float = 1.0) -> str:
        """Each anomaly with its ops and the faults active within `margin` seconds of them:
        a fault just before a lost write is usually its cause."""
        checked = ", ".join(f"{n} {name}" for name, n in sorted(self.counts.items()))
        lines = [f"{len(self.anomalies)} anomalies in {sum(self.counts.values())} ops "
                 f"({checked})"]
        for kind, anomalies in self.by_kind().items():
            lines.append(f"{kind}: {len(anomalies)}")
        for anomaly in self.anomalies:
            lines.append(f"[{anomaly.kind}] {anomaly.message}")
            lines.extend(f"    {op!r}" for op in anomaly.ops)
            times = [t for op in anomaly.ops if (t := _time(op)) is not None]
            if not times:
                continue
            start, end = min(times) - margin, max(times) + margin
            for fault in self.faults:
                if fault.start <= end and (fault.end is None or fault.end >= start):
                    healed = "never healed" if fault.end is None else f"until {fault.end}"
                    lines.append(f"    during fault {fault.kind} on {fault.target} "
                                 f"from {fault.start} {healed}")
        return "\n".join(lines)


def _time(op: Op) -> float | None:
    if isinstance(op, Fault):
        return op.start
    if isinstance(op, FinalLog | ShareGroupConfig):
        return None
    return op.time


def _where(topic: str, partition: int, offset: int | None) -> str:
    return f"{topic}-{partition}@{offset}"


class _Index:
    """The history sorted by type, value and partition in one pass, so every check is a pass
    with dict lookups, never a scan per op."""

    def __init__(self, history: Iterable[Op]) -> None:  # noqa: C901
        self.counts: Counter[str] = Counter()
        self.produced: dict[str, Produced] = {}
        self.txns: dict[str, list[Produced]] = defaultdict(list)
        self.ended: dict[str, TxnEnded] = {}
        self.reads: list[Read] = []
        self.commits: list[Committed] = []
        self.seen: list[OffsetsSeen] = []
        self.finals: dict[TopicPartition, FinalLog] = {}
        self.delivered: list[ShareDelivered] = []
        self.acks: list[ShareAcked] = []
        self.share_configs: dict[str, ShareGroupConfig] = {}
        self.dead: list[DeadLettered] = []
        self.faults: list[Fault] = []
        for op in history:
            self.counts[type(op).__name__] += 1
            if isinstance(op, Produced):
                if op.value in self.produced:
                    # every verdict is keyed by value: a reused one would judge the wrong write
                    raise ValueError(f"value {op.value!r} produced twice: values must be unique")
                self.produced[op.value] = op
                if op.txn is not None:
                    self.txns[op.txn].append(op)
            elif isinstance(op, Read):
                self.reads.append(op)
            elif isinstance(op, TxnEnded):
                self.ended[op.txn] = op
            elif isinstance(op, Committed):
                self.commits.append(op)
            elif isinstance(op, OffsetsSeen):
                self.seen.append(op)
            elif isinstance(op, FinalLog):
                self.finals[(op.topic, op.partition)] = op
            elif isinstance(op, ShareDelivered):
                self.delivered.append(op)
            elif isinstance(op, ShareAcked):
                self.acks.append(op)
            elif isinstance(op, ShareGroupConfig):
                self.share_configs[op.group] = op
            elif isinstance(op, DeadLettered):
                self.dead.append(op)
            else:
                self.faults.append(op)
        # value -> every (partition, offset) holding it in a final log
        self.final_at: dict[str, list[tuple[TopicPartition, int]]] = defaultdict(list)
        # partition -> its final records by offset, for bisecting gaps between reads
        self.final_sorted: dict[TopicPartition, list[tuple[int, str]]] = {}
        for tp, log in self.finals.items():
            for offset, value in log.records:
                self.final_at[value].append((tp, offset))
            self.final_sorted[tp] = sorted(log.records)
        self.faults.sort(key=lambda f: f.start)

    def outcome(self, txn: str) -> Outcome:
        """A transaction never ended (its producer killed) is "unknown": aborted by its
        timeout, or committed if the kill came after the commit was written."""
        ended = self.ended.get(txn)
        return "unknown" if ended is None else ended.outcome

    def must_exist(self, write: Produced) -> bool:
        """Acknowledged, and outside a transaction or in a committed one."""
        return write.acked and (write.txn is None or self.outcome(write.txn) == "commit")

    def present(self, write: Produced) -> bool | None:
        """Whether the write is in its partition's final log; None without one."""
        tp = (write.topic, write.partition)
        if tp not in self.finals:
            return None
        return any(place == tp for place, _ in self.final_at.get(write.value, ()))


def check(history: Iterable[Op]) -> Report:
    """Every anomaly of the history, in the order of the checks."""
    ix = _Index(history)
    anomalies = list(_lost(ix))
    lost = {a.ops[0].value for a in anomalies if isinstance(a.ops[0], Produced)}
    aborted = _aborted_txns(ix)
    for found in (_duplicates(ix), _moved(ix), _order(ix), _aborted_reads(ix, aborted),
                  _torn(ix), _polls(ix), _commits(ix), _never_read(ix, lost), _share(ix)):
        anomalies.extend(found)
    return Report(anomalies, dict(ix.counts), ix.faults)


def _lost(ix: _Index) -> Iterator[Anomaly]:
    for write in ix.produced.values():
        if ix.must_exist(write) and ix.present(write) is False:
            log = ix.finals[(write.topic, write.partition)]
            in_txn = "" if write.txn is None else f" in committed {write.txn}"
            yield Anomaly(LOST, f"{write.value!r} acked at "
                          f"{_where(write.topic, write.partition, write.offset)}{in_txn} is "
                          f"absent from the final log ({len(log.records)} records, data end "
                          f"{log.data_offsets_end})", [write])


def _duplicates(ix: _Index) -> Iterator[Anomaly]:
    for value, places in ix.final_at.items():
        if len(places) > 1:
            at = ", ".join(_where(t, p, o) for (t, p), o in places)
            write = ix.produced.get(value)
            yield Anomaly(DUPLICATE, f"{value!r} is in the final logs at {at}",
                          [] if write is None else [write])


def _moved(ix: _Index) -> Iterator[Anomaly]:
    for write in ix.produced.values():
        places = ix.final_at.get(write.value)
        if not write.acked or write.offset is None or not places:
            continue
        if ((write.topic, write.partition), write.offset) not in places:
            at = ", ".join(_where(t, p, o) for (t, p), o in places)
            yield Anomaly(MOVED, f"{write.value!r} acked at "
                          f"{_where(write.topic, write.partition, write.offset)} is in the "
                          f"final log at {at}", [write])


def _order(ix: _Index) -> Iterator[Anomaly]:
    """Every producer is idempotent: its acked writes to a partition keep their send order."""
    streams: dict[tuple[str, str, int], list[Produced]] = defaultdict(list)
    for write in ix.produced.values():
        if write.acked and write.offset is not None:
            streams[(write.producer, write.topic, write.partition)].append(write)
    for writes in streams.values():
        writes.sort(key=lambda w: w.seq)
        for before, after in zip(writes, writes[1:], strict=False):
            assert before.offset is not None and after.offset is not None
            if after.offset <= before.offset:
                yield Anomaly(ORDER, f"{before.producer} sent {before.value!r} (seq "
                              f"{before.seq}) before {after.value!r} (seq {after.seq}) but they "
                              f"were acked at offsets {before.offset} and {after.offset}",
                              [before, after])


def _txn_presence(ix: _Index, txn: str) -> tuple[list[Produced], list[Produced]]:
    """The transaction's writes present and absent, over partitions with a final log."""
    present: list[Produced] = []
    absent: list[Produced] = []
    for write in ix.txns.get(txn, ()):
        found = ix.present(write)
        if found is not None:
            (present if found else absent).append(write)
    return present, absent


def _aborted_txns(ix: _Index) -> dict[str, str]:
    """Transactions known aborted, and why: ended "abort", or of unknown outcome with every
    write judged absent (a read_committed consumer may not have seen any of them)."""
    aborted: dict[str, str] = {}
    for txn in ix.txns:
        outcome = ix.outcome(txn)
        if outcome == "abort":
            aborted[txn] = "aborted"
        elif outcome == "unknown":
            present, absent = _txn_presence(ix, txn)
            if absent and not present:
                aborted[txn] = "of unknown outcome and absent from the final logs"
    return aborted


def _aborted_reads(ix: _Index, aborted: dict[str, str]) -> Iterator[Anomaly]:
    for read in ix.reads:
        if read.isolation != "read_committed":
            continue
        write = ix.produced.get(read.value)
        if write is not None and write.txn in aborted:
            yield Anomaly(ABORTED_READ, f"{read.consumer} read {read.value!r} at "
                          f"{_where(read.topic, read.partition, read.offset)} read_committed, "
                          f"but {write.txn} is {aborted[write.txn]}", [write, read])
    for txn in aborted:
        if ix.outcome(txn) != "abort":
            continue
        for write in ix.txns[txn]:
            for (topic, partition), offset in ix.final_at.get(write.value, ()):
                yield Anomaly(ABORTED_READ, f"{write.value!r} of aborted {txn} is in the "
                              f"final log at {_where(topic, partition, offset)}", [write])


def _torn(ix: _Index) -> Iterator[Anomaly]:
    for txn in ix.txns:
        present, absent = _txn_presence(ix, txn)
        outcome = ix.outcome(txn)
        if ((outcome == "commit" and absent) or (outcome == "abort" and present)
                or (outcome == "unknown" and present and absent)):
            names = ", ".join(repr(w.value) for w in present) or "none"
            missing = ", ".join(repr(w.value) for w in absent) or "none"
            ended = ix.ended.get(txn)
            yield Anomaly(TORN_TRANSACTION, f"{txn} ({outcome}): present {names}; absent "
                          f"{missing}", [*present, *absent, *([] if ended is None else [ended])])


def _polls(ix: _Index) -> Iterator[Anomaly]:
    """Reads of one consumer+generation on a partition, in history order (the order polled),
    move forward and, read_committed, over no committed record of the final log."""
    last: dict[tuple[str, int, str, int], Read] = {}
    for read in ix.reads:
        key = (read.consumer, read.generation, read.topic, read.partition)
        before = last.get(key)
        last[key] = read
        if before is None:
            continue
        if read.offset <= before.offset:
            yield Anomaly(POLL_BACKWARDS, f"{read.consumer} (generation {read.generation}) "
                          f"read {read.topic}-{read.partition} at {before.offset}, then at "
                          f"{read.offset}", [before, read])
        elif read.offset > before.offset + 1 and read.isolation == "read_committed":
            records = ix.final_sorted.get((read.topic, read.partition))
            if not records:
                continue
            i = bisect_right(records, before.offset, key=lambda r: r[0])
            if i < len(records) and records[i][0] < read.offset:
                offset, value = records[i]
                yield Anomaly(POLL_SKIP, f"{read.consumer} (generation {read.generation}) "
                              f"read {read.topic}-{read.partition} at {before.offset}, then at "
                              f"{read.offset}, skipping {value!r} at {offset}", [before, read])


def _commits(ix: _Index) -> Iterator[Anomaly]:
    """A group's committed offset, as fetched over time, never goes back, and never below
    an acknowledged commit (plain or in a committed transaction) fetched after it."""
    seen: dict[OffsetKey, list[OffsetsSeen]] = defaultdict(list)
    for s in sorted(ix.seen, key=lambda s: s.time):
        seen[(s.group, s.topic, s.partition)].append(s)
    # the lowest fetch from each position on, to judge every commit with one bisect
    lowest: dict[OffsetKey, list[OffsetsSeen]] = {}
    for key, fetched in seen.items():
        highest = fetched[0]
        for s in fetched[1:]:
            if s.offset < highest.offset:
                yield Anomaly(COMMIT_BACKWARDS, f"{s.group} {s.topic}-{s.partition}: "
                              f"committed offset fetched as {highest.offset}, later as "
                              f"{s.offset}", [highest, s])
            elif s.offset > highest.offset:
                highest = s
        suffix = list(fetched)
        for i in range(len(suffix) - 2, -1, -1):
            if suffix[i + 1].offset < suffix[i].offset:
                suffix[i] = suffix[i + 1]
        lowest[key] = suffix
    floors: list[tuple[OffsetKey, int, TxnEnded | Committed]] = [
        ((c.group, c.topic, c.partition), c.offset, c) for c in ix.commits]
    for ended in ix.ended.values():
        if ended.outcome == "commit":
            floors.extend(((g, t, p), o, ended) for g, t, p, o in ended.offsets)
    for key, offset, commit in floors:
        if key not in lowest:
            continue
        i = bisect_right(seen[key], commit.time, key=lambda s: s.time)
        if i < len(seen[key]) and lowest[key][i].offset < offset:
            low = lowest[key][i]
            how = "acked" if isinstance(commit, Committed) else f"committed in {commit.txn}"
            yield Anomaly(COMMIT_LOST, f"{key[0]} {key[1]}-{key[2]}: offset {offset} {how} "
                          f"at {commit.time}, fetched as {low.offset} at {low.time}",
                          [commit, low])


def _never_read(ix: _Index, lost: set[str]) -> Iterator[Anomaly]:
    """The campaign drains every topic its groups consume: each write that must exist there
    was returned to some group consumer (lost writes are reported as lost only)."""
    group_reads = [r for r in ix.reads if r.group is not None]
    topics = {r.topic for r in group_reads}
    values = {r.value for r in group_reads}
    for write in ix.produced.values():
        if (write.topic in topics and write.value not in values and write.value not in lost
                and ix.must_exist(write)):
            yield Anomaly(NEVER_READ, f"{write.value!r} acked at "
                          f"{_where(write.topic, write.partition, write.offset)} was never "
                          f"read by a group consumer", [write])


def archived(history: Iterable[Op]) -> set[ShareKey]:
    """The share records the history says ended archived (rejected, or released at the
    delivery-count limit): each must appear once on its group's dead-letter topic. The
    campaign reads that topic until they are there."""
    ix = _Index(history)
    acks, last = _share_ends(ix)
    return {key for key in acks.keys() | last.keys()
            if key[0] in ix.share_configs and _archived(
                acks.get(key, []), last.get(key),
                ix.share_configs[key[0]].delivery_count_limit) is True}


def _share_ends(ix: _Index) -> tuple[dict[ShareKey, list[ShareAcked]],
                                     dict[ShareKey, ShareDelivered]]:
    """Each share record's acknowledgements, and its last delivery."""
    acks: dict[ShareKey, list[ShareAcked]] = defaultdict(list)
    for ack in ix.acks:
        acks[(ack.group, ack.topic, ack.partition, ack.offset)].append(ack)
    last: dict[ShareKey, ShareDelivered] = {}
    for d in ix.delivered:
        key = (d.group, d.topic, d.partition, d.offset)
        held = last.get(key)
        if held is None or (d.delivery_count, d.time) >= (held.delivery_count, held.time):
            last[key] = d
    return acks, last


def _share(ix: _Index) -> Iterator[Anomaly]:
    accepted: dict[ShareKey, ShareAcked] = {}
    for ack in ix.acks:
        key = (ack.group, ack.topic, ack.partition, ack.offset)
        if ack.kind == "accept" and ack.ok and (key not in accepted
                                               or ack.time < accepted[key].time):
            accepted[key] = ack
    for d in ix.delivered:
        key = (d.group, d.topic, d.partition, d.offset)
        first_accept = accepted.get(key)
        if first_accept is not None and d.time > first_accept.time:
            yield Anomaly(SHARE_REDELIVERED_AFTER_ACCEPT, f"{d.group}: {d.value!r} at "
                          f"{_where(d.topic, d.partition, d.offset)} delivered to {d.consumer} "
                          f"(count {d.delivery_count}) after {first_accept.consumer}'s accept "
                          f"succeeded", [first_accept, d])
        config = ix.share_configs.get(d.group)
        if config is not None and d.delivery_count > config.delivery_count_limit:
            yield Anomaly(SHARE_DELIVERY_COUNT, f"{d.group}: {d.value!r} at "
                          f"{_where(d.topic, d.partition, d.offset)} delivered with count "
                          f"{d.delivery_count} over the limit {config.delivery_count_limit}",
                          [config, d])
    acks, last = _share_ends(ix)
    dead: dict[ShareKey, list[DeadLettered]] = defaultdict(list)
    for letter in ix.dead:
        dead[(letter.group, letter.topic, letter.partition, letter.offset)].append(letter)
    for key, letters in dead.items():
        if len(letters) > 1:
            yield Anomaly(SHARE_DEAD_LETTER, f"{key[0]}: {_where(*key[1:])} dead-lettered "
                          f"{len(letters)} times", list(letters))
    for key in acks.keys() | last.keys():
        config = ix.share_configs.get(key[0])
        if config is None or config.dlq_topic is None:
            continue
        archived = _archived(acks.get(key, []), last.get(key), config.delivery_count_limit)
        letters = dead.get(key, [])
        shown: list[Op] = [config, *([] if key not in last else [last[key]]), *acks.get(key, [])]
        if archived is True and not letters:
            yield Anomaly(SHARE_DEAD_LETTER, f"{key[0]}: {_where(*key[1:])} was archived but "
                          f"is not in {config.dlq_topic}", shown)
        elif archived is False and letters:
            yield Anomaly(SHARE_DEAD_LETTER, f"{key[0]}: {_where(*key[1:])} was accepted but "
                          f"is in {config.dlq_topic}", [*shown, *letters])


def _archived(acks: list[ShareAcked], last: ShareDelivered | None, limit: int) -> bool | None:
    """Whether the record ended archived: rejected, or delivered `limit` times and not
    accepted after the last delivery (released, or its lock expired). False when accepted;
    None when an ack whose result the client did not see decides it."""
    if any(a.kind == "reject" and a.ok for a in acks):
        return True
    if last is not None and last.delivery_count >= limit:
        after = [a for a in acks if a.time >= last.time]
        if any(a.kind == "accept" and a.ok for a in after):
            return False
        if any(a.kind != "release" and not a.ok for a in after):
            return None
        return True
    if any(a.kind == "accept" and a.ok for a in acks):
        return False
    return None
