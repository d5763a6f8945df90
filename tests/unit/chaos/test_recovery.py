"""The campaign's recovery figures over hand-made histories."""

from __future__ import annotations

from tests.chaos.history import Fault, Produced, TxnEnded
from tests.chaos.recovery import recoveries, summary


def ack(t: float, txn: str | None = None) -> Produced:
    return Produced(producer="w", seq=int(t * 10), topic="t", partition=0, value=str(t),
                    acked=True, offset=0, txn=txn, time=t)


def test_the_longest_gap_around_a_fault_and_the_next_commit_after_its_heal() -> None:
    history = [ack(1.0), ack(2.0), Fault(kind="kill9", target="broker-1", start=2.5,
                                          end=3.0),
               ack(5.5), ack(6.0), ack(20.0),  # the 14 s gap comes after: not this fault's
               TxnEnded(txn="x#1", outcome="abort", producer="c", time=3.5, offsets=()),
               TxnEnded(txn="x#2", outcome="commit", producer="c", time=4.0, offsets=())]
    [r] = recoveries(history)
    assert (r.kind, r.unserved, r.to_commit) == ("kill9", 3.5, 1.0)


def test_writes_within_the_fault_split_the_gap() -> None:
    history = [ack(1.0), Fault(kind="pause", target="broker-2", start=1.5, end=9.0),
               ack(2.0), ack(7.0), ack(9.5)]
    [r] = recoveries(history)
    assert r.unserved == 5.0 and r.to_commit is None


def test_never_served_again_and_an_unhealed_fault() -> None:
    history = [ack(1.0), Fault(kind="objects", target="objects", start=2.0, end=3.0),
               Fault(kind="postgres", target="postgres", start=4.0, end=None)]
    [r] = recoveries(history)
    assert r.unserved == float("inf")
    [line] = summary([r])
    assert line.startswith("  objects (1): writes unserved median inf s")
    assert "(1 never)" in line


def test_network_faults_are_told_apart_by_the_link_they_cut() -> None:
    history = [ack(1.0), Fault(kind="network", target="blackhole:peers-2", start=1.5,
                               end=2.0),
               ack(3.0), Fault(kind="network", target="reset:postgres-1", start=3.5,
                               end=4.0), ack(5.0)]
    assert [r.kind for r in recoveries(history)] == ["network peers", "network postgres"]
