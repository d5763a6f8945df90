"""Share sessions: KIP-932's epoch rules, sans-IO."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from headwater.share.sessions import FINAL_EPOCH, ShareSessionCache, ShareSessionError

T = uuid.uuid4()


def test_open_then_each_request_carries_the_next_epoch():
    cache = ShareSessionCache()
    session, old = cache.open("g", "m")
    assert old is None and session.epoch == 1
    session.partitions[(T, 0)] = None
    assert cache.resolve("g", "m", 1) is session
    cache.advance(session)
    with pytest.raises(ShareSessionError) as info:
        cache.resolve("g", "m", 1)  # a replayed request
    assert info.value.code is ErrorCode.invalid_share_session_epoch
    assert cache.resolve("g", "m", 2) is session
    assert cache.resolve("g", "m", FINAL_EPOCH) is session  # the final request: any epoch


def test_reopening_replaces_the_session_and_hands_back_the_old_one():
    cache = ShareSessionCache()
    first, _ = cache.open("g", "m")
    first.partitions[(T, 3)] = None
    second, old = cache.open("g", "m")
    assert old is first and second is not first and second.partitions == {}
    assert len(cache) == 1


def test_unknown_session_and_the_cache_limit():
    cache = ShareSessionCache(max_sessions=2)
    with pytest.raises(ShareSessionError) as info:
        cache.resolve("g", "nobody", 1)
    assert info.value.code is ErrorCode.share_session_not_found
    cache.open("g", "a")
    cache.open("g", "b")
    with pytest.raises(ShareSessionError) as info:
        cache.open("g", "c")
    assert info.value.code is ErrorCode.share_session_limit_reached
    cache.open("g", "a")  # reopening one of its own is not a new session
    assert cache.close("g", "a") is not None and cache.close("g", "a") is None
    cache.open("g", "c")
