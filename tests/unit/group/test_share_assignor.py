"""The simple share assignor: every partition assigned, balanced, sticky, shared."""

from __future__ import annotations

import itertools
import uuid

import pytest

from headwater.group.share.assignor import assign

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def flat(assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def check(result, subscriptions, counts) -> None:
    """Every subscribed partition has a member; members only get what they subscribe to;
    per topic group, holders per partition and sizes differ by at most one."""
    wanted = {(t, p) for ts in subscriptions.values() for t in ts for p in range(counts[t])}
    got = set().union(*(flat(a) for a in result.values())) if result else set()
    assert got == wanted
    for m, a in result.items():
        assert {t for t, _ in flat(a)} <= subscriptions[m]


@pytest.mark.parametrize("members,partitions", itertools.product(range(1, 8), range(1, 8)))
def test_homogeneous_balance(members: int, partitions: int) -> None:
    subs = {f"m{i}": frozenset({T1}) for i in range(members)}
    result = assign(subs, {T1: partitions}, {})
    check(result, subs, {T1: partitions})
    sizes = [len(flat(a)) for a in result.values()]
    assert max(sizes) - min(sizes) <= 1
    holders = [sum((T1, p) in flat(a) for a in result.values()) for p in range(partitions)]
    sharing = -(-members // partitions)
    assert holders == [sharing] * partitions  # more members than partitions: shared


def test_sticky_when_a_member_joins_and_leaves() -> None:
    subs = {m: frozenset({T1}) for m in ("a", "b", "c")}
    first = assign(subs, {T1: 6}, {})
    second = assign({**subs, "d": frozenset({T1})}, {T1: 6}, first)
    for m in ("a", "b", "c"):  # existing members keep what they had, within quota
        assert len(flat(first[m]) & flat(second[m])) >= len(flat(second[m])) - 1
    third = assign(subs, {T1: 6}, {m: second[m] for m in subs})
    check(third, subs, {T1: 6})
    assert sorted(len(flat(a)) for a in third.values()) == [2, 2, 2]
    # Nothing changes when nothing changed.
    assert assign(subs, {T1: 6}, third) == third


def test_heterogeneous_topics_go_to_their_subscribers() -> None:
    subs = {"a": frozenset({T1}), "b": frozenset({T1, T2}), "c": frozenset({T2})}
    counts = {T1: 3, T2: 1}
    result = assign(subs, counts, {})
    check(result, subs, counts)
    assert {t for t, _ in flat(result["a"])} == {T1}
    holders_t2 = [m for m, a in result.items() if (T2, 0) in flat(a)]
    assert sorted(holders_t2) == ["b", "c"]  # 2 subscribers, 1 partition: shared


def test_no_topics_no_partitions() -> None:
    assert {m: dict(a) for m, a in assign({"a": frozenset()}, {}, {}).items()} == {"a": {}}
    assert assign({}, {T1: 3}, {}) == {}
    result = assign({"a": frozenset({T1})}, {T1: 0}, {})
    assert dict(result["a"]) == {}
