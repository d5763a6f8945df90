"""How long clients went unserved around each fault, from the recorded history.

For every healed fault: the longest stretch without an acknowledged write (the
idempotent writers', outside transactions) that overlaps the fault — from the last
acknowledgement before the stretch to the first after it — and the time from the heal to
the first committed transaction ended after it. Both are per fault kind in the campaign's
summary: what a user sees of a kill -9, a pause, a database restart or an object-store
outage.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from .history import Fault, Op, Produced, TxnEnded


@dataclass(frozen=True, slots=True)
class Recovery:
    kind: str
    unserved: float  # seconds: the longest gap in acknowledged writes overlapping the fault
    to_commit: float | None  # seconds from the heal to the next committed transaction


def recoveries(history: Iterable[Op]) -> list[Recovery]:
    ops = list(history)
    acks = sorted(op.time for op in ops if isinstance(op, Produced) and op.acked
                  and op.txn is None)
    commits = sorted(op.time for op in ops if isinstance(op, TxnEnded)
                     and op.outcome == "commit")
    out = []
    for fault in (op for op in ops if isinstance(op, Fault) and op.end is not None):
        assert fault.end is not None
        # the acknowledgements bounding the fault: the last before it starts, the first
        # after it ends, and every one in between
        lo = max(bisect_left(acks, fault.start) - 1, 0)
        hi = min(bisect_right(acks, fault.end) + 1, len(acks))
        window = acks[lo:hi]
        if not window or window[-1] <= fault.end:
            unserved = float("inf")  # never acknowledged again
        else:
            unserved = max((b - a for a, b in zip(window, window[1:], strict=False)),
                           default=0.0)
        i = bisect_right(commits, fault.end)
        out.append(Recovery(_label(fault), unserved,
                            commits[i] - fault.end if i < len(commits) else None))
    return out


def summary(found: Iterable[Recovery]) -> list[str]:
    """A line per fault kind: how many, and the median and worst of both measures."""
    by_kind: dict[str, list[Recovery]] = defaultdict(list)
    for r in found:
        by_kind[r.kind].append(r)
    lines = []
    for kind, rs in sorted(by_kind.items()):
        gaps = [r.unserved for r in rs]
        commits = [r.to_commit for r in rs if r.to_commit is not None]
        never = sum(1 for r in rs if r.to_commit is None)
        lines.append(
            f"  {kind} ({len(rs)}): writes unserved median {statistics.median(gaps):.1f} s, "
            f"worst {max(gaps):.1f} s; heal to next committed transaction "
            + (f"median {statistics.median(commits):.1f} s, worst {max(commits):.1f} s"
               if commits else "none")
            + (f" ({never} never)" if never else ""))
    return lines


def _label(fault: Fault) -> str:
    """A network fault's kind with the link it cut ("network postgres"): how long
    clients wait differs with what the broker lost."""
    if fault.kind != "network" or ":" not in fault.target:
        return fault.kind
    return f"network {fault.target.split(':', 1)[1].rsplit('-', 1)[0]}"
