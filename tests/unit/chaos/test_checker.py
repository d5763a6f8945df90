"""The fault-campaign checker (tests/chaos/checker.py) on hand-made histories: each anomaly
kind is caught, and the histories a correct broker may produce (the legal surprises above
all) are reported clean, so a campaign's report can be trusted both ways."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos import checker
from tests.chaos.checker import check
from tests.chaos.history import (
    AckKind,
    Committed,
    DeadLettered,
    Fault,
    FinalLog,
    Isolation,
    OffsetsSeen,
    Op,
    Outcome,
    Produced,
    Read,
    ShareAcked,
    ShareDelivered,
    ShareGroupConfig,
    TxnEnded,
    dump,
    load,
)

pytestmark = pytest.mark.timeout(30)

T = "t"


def write(value: str, offset: int | None, *, seq: int | None = None, producer: str = "p1",
          txn: str | None = None, acked: bool = True, partition: int = 0,
          time: float = 1.0) -> Produced:
    return Produced(producer=producer, seq=offset or 0 if seq is None else seq, topic=T,
                    partition=partition, value=value, acked=acked,
                    offset=offset if acked else None, txn=txn, time=time)


def final(*records: tuple[int, str], partition: int = 0, end: int | None = None) -> FinalLog:
    last = max((o for o, _ in records), default=-1)
    return FinalLog(topic=T, partition=partition, records=records,
                    data_offsets_end=last + 1 if end is None else end)


def read(value: str, offset: int, *, consumer: str = "c1", group: str | None = "g",
         generation: int = 1, isolation: Isolation = "read_committed", partition: int = 0,
         time: float = 2.0) -> Read:
    return Read(consumer=consumer, group=group, generation=generation, isolation=isolation,
                topic=T, partition=partition, offset=offset, value=value, time=time)


def ended(txn: str, outcome: Outcome, *, time: float = 1.5,
          offsets: tuple[tuple[str, str, int, int], ...] = ()) -> TxnEnded:
    return TxnEnded(txn=txn, outcome=outcome, producer="p1", time=time, offsets=offsets)


def seen(offset: int, time: float) -> OffsetsSeen:
    return OffsetsSeen(group="g", topic=T, partition=0, offset=offset, time=time)


def delivered(count: int, time: float, *, offset: int = 0, consumer: str = "s1") -> ShareDelivered:
    return ShareDelivered(consumer=consumer, group="sg", topic=T, partition=0, offset=offset,
                          value=f"v{offset}", delivery_count=count, time=time)


def acked(kind: AckKind, time: float, *, ok: bool = True, offset: int = 0,
          consumer: str = "s1") -> ShareAcked:
    return ShareAcked(consumer=consumer, group="sg", topic=T, partition=0, offset=offset,
                      value=f"v{offset}", kind=kind, ok=ok, time=time)


def dead(offset: int = 0, time: float = 9.0) -> DeadLettered:
    return DeadLettered(group="sg", topic=T, partition=0, offset=offset, value=f"v{offset}",
                        time=time)


def config(limit: int = 2, dlq: str | None = "dlq.sg") -> ShareGroupConfig:
    return ShareGroupConfig(group="sg", delivery_count_limit=limit, dlq_topic=dlq)


def kinds(history: list[Op]) -> list[str]:
    return sorted(a.kind for a in check(history).anomalies)


# -- clean histories ------------------------------------------------------------------------


def test_a_clean_campaign_has_no_anomaly() -> None:
    """Plain and transactional writes, an aborted transaction whose data and markers leave
    gaps in the final log, a consumer reading over those gaps, rising commits, share
    records accepted, released and dead-lettered."""
    history: list[Op] = [
        write("a", 0), write("b", 1),
        write("x", 2, seq=2, txn="tx#1"), write("y", 3, seq=3, txn="tx#1"),
        ended("tx#1", "commit", offsets=(("g", T, 0, 2),)),
        # offset 4: tx#1's commit marker; 5: aborted data; 6: its abort marker
        write("z", 5, seq=4, txn="tx#2"), ended("tx#2", "abort", time=1.6),
        write("c", 7, seq=5),
        read("a", 0), read("b", 1), read("x", 2), read("y", 3), read("c", 7, time=2.5),
        Committed(group="g", topic=T, partition=0, offset=4, consumer="c1", time=2.6),
        seen(-1, 0.5), seen(2, 1.8), seen(4, 2.7), seen(8, 3.0),
        final((0, "a"), (1, "b"), (2, "x"), (3, "y"), (7, "c"), end=8),
        config(limit=2),
        delivered(1, 3.0, offset=0), acked("accept", 3.1, offset=0),
        delivered(1, 3.0, offset=1), acked("reject", 3.1, offset=1), dead(1),
        delivered(1, 3.0, offset=2), acked("release", 3.1, offset=2),
        delivered(2, 3.2, offset=2, consumer="s2"), acked("accept", 3.3, offset=2, consumer="s2"),
        Fault(kind="kill", target="broker-1", start=0.2, end=0.4),
    ]
    report = check(history)
    assert report.anomalies == [], report.render()
    assert report.ok
    assert report.counts["Produced"] == 6 and report.counts["Read"] == 5
    assert report.counts["Fault"] == 1


def test_an_unacked_idempotent_write_may_be_in_the_log_once_or_not_at_all() -> None:
    history: list[Op] = [
        write("a", 0), write("lost-ack", None, seq=1, acked=False), write("b", 2, seq=2),
        write("never", None, seq=3, acked=False),
        read("a", 0), read("lost-ack", 1), read("b", 2),
        final((0, "a"), (1, "lost-ack"), (2, "b")),
    ]
    assert kinds(history) == []


def test_read_uncommitted_may_see_aborted_data() -> None:
    history: list[Op] = [
        write("z", 0, txn="tx#1"), ended("tx#1", "abort"),
        read("z", 0, isolation="read_uncommitted"),
        final(end=2),
    ]
    assert kinds(history) == []


def test_a_consumer_may_rewind_when_its_generation_changes() -> None:
    history: list[Op] = [
        write("a", 0), write("b", 1),
        read("a", 0), read("b", 1),
        read("a", 0, generation=2), read("b", 1, generation=2),
        # another consumer's positions are its own
        read("b", 1, consumer="c2"), read("a", 0, consumer="c2", generation=2),
        final((0, "a"), (1, "b")),
    ]
    assert kinds(history) == []


def test_a_released_record_may_come_back() -> None:
    history: list[Op] = [config(limit=3), delivered(1, 1.0), acked("release", 1.1),
                         delivered(2, 1.2, consumer="s2"), acked("accept", 1.3, consumer="s2")]
    assert kinds(history) == []


def test_a_record_whose_accept_failed_may_come_back() -> None:
    history: list[Op] = [config(limit=3), delivered(1, 1.0), acked("accept", 1.1, ok=False),
                         delivered(2, 1.2, consumer="s2"), acked("accept", 1.3, consumer="s2")]
    assert kinds(history) == []


@pytest.mark.parametrize("present", [True, False])
def test_a_transaction_of_unknown_outcome_may_be_all_in_or_all_out(present: bool) -> None:
    records = ((0, "x"), (1, "y")) if present else ()
    history: list[Op] = [write("x", 0, txn="tx#1"), write("y", 1, seq=1, txn="tx#1"),
                         ended("tx#1", "unknown"), final(*records, end=3)]
    assert kinds(history) == []


def test_an_acked_write_without_a_final_log_is_not_judged() -> None:
    history: list[Op] = [write("a", 0), final(partition=1)]
    assert kinds(history) == []


# -- each anomaly kind ----------------------------------------------------------------------


def test_an_acked_write_missing_from_the_final_log_is_lost() -> None:
    """Lost only: that no consumer read it follows and is not reported again."""
    history: list[Op] = [write("a", 0), write("b", 1), read("a", 0), final((0, "a"), end=2)]
    report = check(history)
    assert [a.kind for a in report.anomalies] == [checker.LOST]
    assert report.anomalies[0].ops == [history[1]]


def test_a_value_at_two_offsets_is_a_duplicate() -> None:
    history: list[Op] = [write("a", 0), final((0, "a"), (1, "a"))]
    assert kinds(history) == [checker.DUPLICATE]


def test_a_value_found_at_another_offset_than_acked_has_moved() -> None:
    history: list[Op] = [write("a", 0), write("b", 1, seq=1), final((0, "b"), (1, "a"))]
    assert kinds(history) == [checker.MOVED, checker.MOVED]


def test_writes_acked_out_of_their_send_order_are_an_order_violation() -> None:
    history: list[Op] = [write("a", 5, seq=0), write("b", 3, seq=1),
                         write("c", 4, seq=0, producer="p2")]
    report = check(history)
    assert [a.kind for a in report.anomalies] == [checker.ORDER]
    assert report.anomalies[0].ops == [history[0], history[1]]


def test_a_read_committed_read_of_aborted_data_is_an_aborted_read() -> None:
    history: list[Op] = [write("z", 0, txn="tx#1"), ended("tx#1", "abort"), read("z", 0)]
    assert kinds(history) == [checker.ABORTED_READ]


def test_a_read_of_an_unknown_transaction_that_ended_absent_is_an_aborted_read() -> None:
    """Never ended (its producer killed): unknown, and absent from the log, so aborted."""
    history: list[Op] = [write("z", 0, txn="tx#1"), read("z", 0, group=None),
                         final(end=2)]
    assert kinds(history) == [checker.ABORTED_READ]


def test_a_committed_transaction_with_a_value_missing_is_torn() -> None:
    history: list[Op] = [write("x", 0, txn="tx#1"), write("y", 1, seq=1, txn="tx#1"),
                         ended("tx#1", "commit"), final((0, "x"), end=3)]
    assert kinds(history) == [checker.LOST, checker.TORN_TRANSACTION]


def test_an_aborted_transaction_with_a_value_present_is_torn() -> None:
    history: list[Op] = [write("x", 0, txn="tx#1"), write("y", 1, seq=1, txn="tx#1"),
                         ended("tx#1", "abort"), final((1, "y"), end=3)]
    report = check(history)
    assert sorted(report.by_kind()) == [checker.ABORTED_READ, checker.TORN_TRANSACTION]
    torn = report.by_kind()[checker.TORN_TRANSACTION][0]
    assert "'y'" in torn.message and "'x'" in torn.message


def test_an_unknown_transaction_partly_present_is_torn() -> None:
    history: list[Op] = [write("x", 0, txn="tx#1"), write("y", 1, seq=1, txn="tx#1"),
                         ended("tx#1", "unknown"), final((0, "x"), end=3)]
    assert kinds(history) == [checker.TORN_TRANSACTION]


def test_a_consumer_jumping_over_a_committed_record_skipped_it() -> None:
    history: list[Op] = [write("a", 0), write("b", 1, seq=1), write("c", 2, seq=2),
                         read("a", 0), read("c", 2),
                         read("b", 1, consumer="c2"),
                         final((0, "a"), (1, "b"), (2, "c"))]
    report = check(history)
    assert [a.kind for a in report.anomalies] == [checker.POLL_SKIP]
    assert "'b'" in report.anomalies[0].message


def test_a_jump_over_markers_and_aborted_data_is_no_skip() -> None:
    history: list[Op] = [write("a", 0), write("z", 1, seq=1, txn="tx#1"),
                         ended("tx#1", "abort"), write("c", 3, seq=2),
                         read("a", 0), read("c", 3),
                         final((0, "a"), (3, "c"), end=4)]
    assert kinds(history) == []


def test_a_consumer_going_back_within_a_generation_polls_backwards() -> None:
    history: list[Op] = [write("a", 0), write("b", 1, seq=1),
                         read("a", 0), read("b", 1), read("b", 1),
                         final((0, "a"), (1, "b"))]
    assert kinds(history) == [checker.POLL_BACKWARDS]


def test_a_committed_offset_fetched_lower_than_before_went_backwards() -> None:
    history: list[Op] = [seen(5, 1.0), seen(3, 2.0), seen(6, 3.0)]
    report = check(history)
    assert [a.kind for a in report.anomalies] == [checker.COMMIT_BACKWARDS]
    assert report.anomalies[0].ops == [history[0], history[1]]


def test_a_transactional_offset_commit_fetched_lower_afterwards_is_lost() -> None:
    history: list[Op] = [ended("tx#1", "commit", time=5.0, offsets=(("g", T, 0, 10),)),
                         seen(3, 4.0), seen(3, 5.0), seen(7, 6.0)]
    report = check(history)
    assert [a.kind for a in report.anomalies] == [checker.COMMIT_LOST]
    assert report.anomalies[0].ops == [history[0], history[3]]


def test_an_aborted_transactions_offsets_set_no_floor() -> None:
    history: list[Op] = [ended("tx#1", "abort", time=5.0, offsets=(("g", T, 0, 10),)),
                         seen(3, 6.0)]
    assert kinds(history) == []


def test_an_acked_commit_fetched_lower_afterwards_is_lost() -> None:
    history: list[Op] = [Committed(group="g", topic=T, partition=0, offset=10, consumer="c1",
                                   time=5.0), seen(4, 6.0)]
    assert kinds(history) == [checker.COMMIT_LOST]


def test_an_acked_write_no_group_consumer_read_was_never_read() -> None:
    history: list[Op] = [write("a", 0), write("b", 1, seq=1), read("a", 0),
                         read("b", 1, group=None), final((0, "a"), (1, "b"))]
    report = check(history)
    assert [a.kind for a in report.anomalies] == [checker.NEVER_READ]
    assert report.anomalies[0].ops == [history[1]]


def test_a_share_record_delivered_after_its_accept_succeeded_was_redelivered() -> None:
    history: list[Op] = [config(limit=5), delivered(1, 1.0), acked("accept", 1.1),
                         delivered(2, 1.2, consumer="s2")]
    assert kinds(history) == [checker.SHARE_REDELIVERED_AFTER_ACCEPT]


def test_a_share_delivery_over_the_limit_is_reported() -> None:
    history: list[Op] = [config(limit=2, dlq=None), delivered(1, 1.0), acked("release", 1.1),
                         delivered(2, 1.2), acked("release", 1.3), delivered(3, 1.4)]
    assert kinds(history) == [checker.SHARE_DELIVERY_COUNT]


@pytest.mark.parametrize("ending", ["release", "reject", None])
def test_an_archived_record_missing_from_the_dead_letter_topic(ending: AckKind | None) -> None:
    """Released at the limit, rejected, or left to its lock's expiry (no ack)."""
    history: list[Op] = [config(limit=2), delivered(1, 1.0), acked("release", 1.1),
                         delivered(2, 1.2)]
    if ending is not None:
        history.append(acked(ending, 1.3))
    assert kinds(history) == [checker.SHARE_DEAD_LETTER]
    assert kinds([*history, dead()]) == []


def test_a_record_rejected_below_the_limit_missing_from_the_dead_letter_topic() -> None:
    history: list[Op] = [config(limit=5), delivered(1, 1.0), acked("reject", 1.1)]
    assert kinds(history) == [checker.SHARE_DEAD_LETTER]
    assert kinds([*history, dead()]) == []
    assert kinds([*history[:2], acked("reject", 1.1, ok=False)]) == []


def test_a_record_dead_lettered_twice_is_reported() -> None:
    history: list[Op] = [config(limit=5), delivered(1, 1.0), acked("reject", 1.1), dead(),
                         dead(time=9.5)]
    report = check(history)
    assert [a.kind for a in report.anomalies] == [checker.SHARE_DEAD_LETTER]
    assert "2 times" in report.anomalies[0].message


def test_an_accepted_record_in_the_dead_letter_topic_is_reported() -> None:
    history: list[Op] = [config(limit=5), delivered(1, 1.0), acked("accept", 1.1), dead()]
    assert kinds(history) == [checker.SHARE_DEAD_LETTER]


def test_a_failed_ack_at_the_limit_leaves_the_dead_letter_undecided() -> None:
    history: list[Op] = [config(limit=1), delivered(1, 1.0), acked("accept", 1.1, ok=False)]
    assert kinds(history) == []
    assert kinds([*history, dead()]) == []


def test_a_value_produced_twice_is_refused_rather_than_misjudged() -> None:
    with pytest.raises(ValueError, match="'a' produced twice"):
        check([write("a", 0), write("a", 1, seq=1)])


# -- the history file and the report -------------------------------------------------------


def test_a_history_survives_a_json_lines_round_trip(tmp_path: Path) -> None:
    history: list[Op] = [
        write("x", 0, txn="tx#1"), write("u", None, acked=False),
        ended("tx#1", "commit", offsets=(("g", T, 0, 1),)),
        read("x", 0), Committed(group="g", topic=T, partition=0, offset=1, consumer="c1",
                                time=2.0),
        seen(1, 3.0), final((0, "x"), end=2), config(), delivered(1, 1.0),
        acked("accept", 1.1), dead(), Fault(kind="partition", target="b1|b2", start=1.0),
    ]
    path = tmp_path / "history.jsonl"
    dump(history, path)
    assert len(path.read_text().splitlines()) == len(history)
    assert load(path) == history


def test_render_names_each_anomaly_its_values_and_the_faults_around_it() -> None:
    history: list[Op] = [
        write("a", 0, time=10.0), write("b", 1, seq=1, time=10.2),
        Fault(kind="kill", target="broker-2", start=9.8, end=10.1),
        Fault(kind="pause", target="broker-3", start=50.0, end=None),
        final((0, "a"), end=2),
    ]
    text = check(history).render()
    assert "[lost]" in text and "'b'" in text
    assert "kill on broker-2" in text
    assert "broker-3" not in text


def test_a_large_history_is_checked_in_linear_time() -> None:
    """A million-op campaign must check in seconds: 200k ops here, within the timeout."""
    n = 50_000
    history: list[Op] = [write(f"v{i}", i, seq=i) for i in range(n)]
    history += [read(f"v{i}", i) for i in range(n)]
    history += [seen(i, float(i)) for i in range(n)]
    history.append(final(*((i, f"v{i}") for i in range(n))))
    report = check(history)
    assert report.ok, report.render()[:2000]
    assert report.counts == {"Produced": n, "Read": n, "OffsetsSeen": n, "FinalLog": 1}
