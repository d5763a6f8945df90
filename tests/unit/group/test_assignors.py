"""The server-side assignors as pure functions: balance, stickiness, co-partitioning."""

from __future__ import annotations

import uuid

import pytest

from headwater.group.consumer.assignors import (
    ASSIGNORS,
    MemberSpec,
    TopicSpec,
    range_assignor,
    uniform,
)

FOO, BAR, BAZ = (uuid.uuid5(uuid.NAMESPACE_DNS, n) for n in ("foo", "bar", "baz"))
TOPICS = {FOO: TopicSpec("foo", 6), BAR: TopicSpec("bar", 6), BAZ: TopicSpec("baz", 3)}


def spec(*topics: uuid.UUID, current=None) -> MemberSpec:
    return MemberSpec(frozenset(topics), current or {})


def counts(result) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def check_complete(result, members, topics) -> None:
    """Every partition of every subscribed topic goes to exactly one subscriber."""
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for m, assignment in result.items():
        for t, ps in assignment.items():
            assert t in members[m].subscribed, (m, t)
            for p in ps:
                assert (t, p) not in seen, f"{t}-{p} given to {seen[(t, p)]} and {m}"
                seen[(t, p)] = m
    wanted = {(t, p) for m in members.values() for t in m.subscribed if t in topics
              for p in range(topics[t].partitions)}
    assert set(seen) == wanted
    assert set(result) == set(members)


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_balanced_from_scratch(name):
    members = {m: spec(FOO, BAR) for m in ("a", "b", "c", "d", "e")}
    topics = {FOO: TOPICS[FOO], BAR: TOPICS[BAR]}
    result = ASSIGNORS[name](members, topics)
    check_complete(result, members, topics)
    if name == "uniform":
        assert sorted(counts(result).values()) == [2, 2, 2, 3, 3]
    else:  # range: per topic 6 over 5 -> one member gets 2 of each topic
        assert sorted(counts(result).values()) == [2, 2, 2, 2, 4]


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_empty_and_no_topics(name):
    assert ASSIGNORS[name]({}, TOPICS) == {}
    result = ASSIGNORS[name]({"a": spec()}, TOPICS)
    assert result == {"a": {}}


def test_uniform_sticky_when_a_member_joins():
    members = {"a": spec(FOO), "b": spec(FOO)}
    topics = {FOO: TOPICS[FOO]}
    first = uniform(members, topics)
    assert counts(first) == {"a": 3, "b": 3}
    # Next epoch: c joins; a and b keep what they had as far as the quota (2) allows.
    members = {"a": spec(FOO, current=first["a"]), "b": spec(FOO, current=first["b"]),
               "c": spec(FOO)}
    second = uniform(members, topics)
    check_complete(second, members, topics)
    assert counts(second) == {"a": 2, "b": 2, "c": 2}
    assert second["a"][FOO] <= first["a"][FOO]
    assert second["b"][FOO] <= first["b"][FOO]
    # Epoch after: nothing changed -> nothing moves.
    members = {m: spec(FOO, current=second[m]) for m in second}
    assert uniform(members, topics) == second


def test_uniform_sticky_when_a_member_leaves():
    topics = {FOO: TOPICS[FOO]}
    start = {"a": {FOO: frozenset({0, 1})}, "b": {FOO: frozenset({2, 3})},
             "c": {FOO: frozenset({4, 5})}}
    members = {"a": spec(FOO, current=start["a"]), "c": spec(FOO, current=start["c"])}
    result = uniform(members, topics)
    check_complete(result, members, topics)
    assert counts(result) == {"a": 3, "c": 3}
    assert result["a"][FOO] >= {0, 1} and result["c"][FOO] >= {4, 5}


def test_uniform_heterogeneous_balances_where_it_can():
    # a: foo only; b: foo+bar; c: bar+baz. 15 partitions over 3 members.
    members = {"a": spec(FOO), "b": spec(FOO, BAR), "c": spec(BAR, BAZ)}
    result = uniform(members, TOPICS)
    check_complete(result, members, TOPICS)
    assert sorted(counts(result).values()) == [5, 5, 5]
    # Same input again: nothing moves.
    same = {m: MemberSpec(members[m].subscribed, result[m]) for m in members}
    assert uniform(same, TOPICS) == result
    # b unsubscribes from bar: it keeps its foo partitions, c keeps everything it had,
    # and foo is split evenly between a and b (a gives up the difference).
    members2 = {"a": spec(FOO, current=result["a"]), "b": spec(FOO, current=result["b"]),
                "c": spec(BAR, BAZ, current=result["c"])}
    again = uniform(members2, TOPICS)
    check_complete(again, members2, TOPICS)
    assert counts(again)["a"] == counts(again)["b"] == 3
    assert again["a"][FOO] <= result["a"][FOO]
    assert again["b"][FOO] >= result["b"][FOO]
    assert all(again["c"][t] >= ps for t, ps in result["c"].items())


def test_uniform_ignores_topics_that_do_not_exist_and_stale_partitions():
    ghost = uuid.uuid4()
    members = {"a": spec(FOO, ghost, current={FOO: frozenset({0, 99}), ghost: frozenset({0})}),
               "b": spec(FOO, ghost)}
    topics = {FOO: TopicSpec("foo", 2)}
    result = uniform(members, topics)
    assert result == {"a": {FOO: frozenset({0})}, "b": {FOO: frozenset({1})}}


def test_range_three_members_seven_partitions_then_a_fourth():
    """Scenario 48: sizes 3,2,2 in ascending ranges; a fourth member takes the leftover."""
    topics = {FOO: TopicSpec("foo", 7)}
    members = {m: spec(FOO) for m in ("a", "b", "c")}
    first = range_assignor(members, topics)
    assert first == {"a": {FOO: frozenset({0, 1, 2})}, "b": {FOO: frozenset({3, 4})},
                     "c": {FOO: frozenset({5, 6})}}
    members = {m: spec(FOO, current=first[m]) for m in first} | {"d": spec(FOO)}
    second = range_assignor(members, topics)
    check_complete(second, members, topics)
    # quota 1 with 3 extras: a, b and c keep their two lowest, d gets what is left.
    assert second == {"a": {FOO: frozenset({0, 1})}, "b": {FOO: frozenset({3, 4})},
                      "c": {FOO: frozenset({5, 6})}, "d": {FOO: frozenset({2})}}


def test_range_co_partitions_topics_with_the_same_partition_count():
    members = {m: spec(FOO, BAR) for m in ("m1", "m2", "m3", "m4")}
    topics = {FOO: TOPICS[FOO], BAR: TOPICS[BAR]}
    result = range_assignor(members, topics)
    check_complete(result, members, topics)
    for m, a in result.items():
        assert a[FOO] == a[BAR], m
        ps = sorted(a[FOO])
        assert ps == list(range(ps[0], ps[0] + len(ps)))  # a contiguous range
    # Still aligned after a member leaves (stickiness keeps the lowest partitions).
    members = {m: spec(FOO, BAR, current=result[m]) for m in ("m1", "m2", "m4")}
    after = range_assignor(members, topics)
    check_complete(after, members, topics)
    for m, a in after.items():
        assert a[FOO] == a[BAR], m
        assert result[m][FOO] <= a[FOO]


def test_range_more_members_than_partitions():
    members = {m: spec(BAZ) for m in ("a", "b", "c", "d")}
    result = range_assignor(members, {BAZ: TOPICS[BAZ]})
    check_complete(result, members, {BAZ: TOPICS[BAZ]})
    assert counts(result) == {"a": 1, "b": 1, "c": 1, "d": 0}


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_deterministic_regardless_of_input_order(name):
    a = {m: spec(FOO, BAR) for m in ("x", "y", "z")}
    b = {m: a[m] for m in ("z", "x", "y")}
    topics_b = {BAR: TOPICS[BAR], FOO: TOPICS[FOO]}
    assert ASSIGNORS[name](a, {FOO: TOPICS[FOO], BAR: TOPICS[BAR]}) == ASSIGNORS[name](b, topics_b)
