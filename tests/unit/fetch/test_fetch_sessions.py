import pytest
from kio.schema.errors import ErrorCode

from headwater.fetch.sessions import FetchSessionCache, FetchSessionError


def test_sessionless_full_fetch_creates_nothing():
    cache = FetchSessionCache(10)
    session, full = cache.resolve(0, -1, 0)
    assert session is None and full and len(cache) == 0


def test_new_session_then_incremental_epochs():
    cache = FetchSessionCache(10)
    session, full = cache.resolve(0, 0, 0)
    assert full and session is not None and session.epoch == 1
    same, full = cache.resolve(session.session_id, 1, 1)
    assert same is session and not full
    cache.advance(session)
    with pytest.raises(FetchSessionError) as err:
        cache.resolve(session.session_id, 1, 2)
    assert err.value.code == ErrorCode.invalid_fetch_session_epoch
    with pytest.raises(FetchSessionError) as err:
        cache.resolve(session.session_id + 1, 1, 2)
    assert err.value.code == ErrorCode.fetch_session_id_not_found


def test_final_epoch_closes_and_cache_evicts_oldest():
    cache = FetchSessionCache(2)
    a, _ = cache.resolve(0, 0, 0)
    b, _ = cache.resolve(0, 0, 0)
    c, _ = cache.resolve(0, 0, 0)
    assert len(cache) == 2
    with pytest.raises(FetchSessionError):
        cache.resolve(a.session_id, 1, 0)
    cache.resolve(b.session_id, -1, 0)
    assert len(cache) == 1
    assert cache.resolve(c.session_id, 1, 0)[0] is c
