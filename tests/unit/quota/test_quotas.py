"""Client quotas without a broker: Kafka's rate, throttle time, precedence and filter."""

from __future__ import annotations

import pytest

from headwater.metadata.records import ClientQuotaRecord
from headwater.quota.entities import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    Alteration,
    QuotaError,
    alter,
    describe,
)
from headwater.quota.throttle import QuotaManager, Rate, resolve

U, C = "user", "client-id"


def test_a_new_rate_is_measured_over_num_minus_one_windows():
    rate = Rate(1000, 11)
    rate.record(1_000_000, 0)
    assert rate.per_second(0) == pytest.approx(100_000)  # 1 MB over 10 s, not 0 s
    rate.record(1_000_000, 15_000)  # the first sample (11 windows old) is gone
    assert rate.per_second(15_000) == pytest.approx(100_000)


def test_throttle_time_brings_the_rate_back_to_the_quota():
    quotas = {((C, "app"),): {"producer_byte_rate": 100_000.0}}
    m = QuotaManager("producer_byte_rate", 1000, 11)
    assert m.record(quotas, "ANONYMOUS", "app", 900_000, 0) == 0  # 90 kB/s over 10 s
    throttle = m.record(quotas, "ANONYMOUS", "app", 600_000, 100)  # 1.5 MB over 10.1 s
    rate = 1_500_000 / 10.1
    assert throttle == round((rate - 100_000) / 100_000 * 10_100) == 4_900
    # While the samples span less than 10 windows the rate is still over them...
    assert m.record(quotas, "ANONYMOUS", "app", 0, 100 + throttle) > 0
    # ...and once they span 15 s, 1.5 MB is the quota itself: no throttle.
    assert m.record(quotas, "ANONYMOUS", "app", 0, 15_000) == 0
    assert m.record(quotas, "ANONYMOUS", "other", 10**9, 200) == 0  # no quota: unlimited
    huge = m.record(quotas, "ANONYMOUS", "app", 10**9, 300)
    assert huge == 11_000  # capped at the whole window
    assert m.max_in_window(quotas, "ANONYMOUS", "app") == 1_000_000


def test_the_most_specific_entity_wins_and_decides_who_shares_the_rate():
    quotas = {
        ((C, None),): {"k": 1.0},
        ((C, "c"),): {"k": 2.0},
        ((U, None),): {"k": 3.0},
        ((C, None), (U, None)): {"k": 4.0},
        ((C, "c"), (U, None)): {"k": 5.0},
        ((U, "u"),): {"k": 6.0},
        ((C, None), (U, "u")): {"k": 7.0},
        ((C, "c"), (U, "u")): {"k": 8.0},
    }
    order = [((C, "c"), (U, "u")), ((C, None), (U, "u")), ((U, "u"),),
             ((C, "c"), (U, None)), ((C, None), (U, None)), ((U, None),), ((C, "c"),),
             ((C, None),)]
    tags = [("u", "c"), ("u", "c"), ("u", ""), ("u", "c"), ("u", "c"), ("u", ""),
            ("", "c"), ("", "c")]
    q = dict(quotas)
    for entity, expected_tags in zip(order, tags, strict=True):
        assert resolve(q, "k", "u", "c") == (q[entity]["k"], expected_tags)
        del q[entity]
    assert resolve(q, "k", "u", "c") is None


def test_alterations_write_only_changes_and_refuse_bad_ones():
    quotas = {((C, "c"),): {"producer_byte_rate": 10.0}}
    records, results = alter(quotas, [
        Alteration(((C, "c"),), (("producer_byte_rate", 10.0), ("consumer_byte_rate", 5.0))),
        Alteration(((C, "d"),), (("producer_byte_rate", None),)),  # removing nothing
        Alteration(((U, "u"), (C, "c")), (("request_percentage", 12.5),)),
        Alteration(((C, "e"),), (("producer_byte_rate", 1.5),)),
        Alteration(((C, "f"),), (("bogus", 1.0),)),
        Alteration(((C, "c"),), (("consumer_byte_rate", 6.0),)),  # duplicate entity
    ])
    assert records == [ClientQuotaRecord(((C, "c"),), "consumer_byte_rate", 5.0),
                       ClientQuotaRecord(((C, "c"), (U, "u")), "request_percentage", 12.5)]
    assert [code for code, _ in results] == [0, 0, 0, 42, 42, 42]
    assert results[3][1] == "producer_byte_rate cannot be a fractional value."
    assert results[4][1] == "Invalid configuration key bogus"


def test_the_describe_filter_is_kafkas():
    quotas = {((C, "c"),): {"a": 1.0}, ((C, None),): {"a": 2.0},
              ((C, "c"), (U, "u")): {"a": 3.0}, (("ip", "1.2.3.4"),): {"b": 4.0}}
    names = lambda found: sorted(map(str, (e for e, _ in found)))  # noqa: E731
    assert names(describe(quotas, [(C, MATCH_EXACT, "c")], False)) == names(
        [(((C, "c"),), 0), (((C, "c"), (U, "u")), 0)])
    assert names(describe(quotas, [(C, MATCH_EXACT, "c")], True)) == names(
        [(((C, "c"),), 0)])
    assert names(describe(quotas, [(C, MATCH_DEFAULT, None)], True)) == names(
        [(((C, None),), 0)])
    assert len(describe(quotas, [(C, MATCH_SPECIFIED, None)], True)) == 2
    assert len(describe(quotas, [], False)) == 4 and describe(quotas, [], True) == []
    for bad in ([(C, MATCH_EXACT, None)], [(C, MATCH_DEFAULT, "x")], [("", 0, "x")],
                [(C, 0, "a"), (C, 1, None)], [("ip", 2, None), (U, 2, None)], [(C, 7, None)]):
        with pytest.raises(QuotaError) as exc:
            describe(quotas, bad, False)
        assert exc.value.code == 42
    with pytest.raises(QuotaError) as exc:
        describe(quotas, [("group", 2, None)], False)
    assert exc.value.code == 35
