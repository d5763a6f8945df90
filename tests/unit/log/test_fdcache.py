"""The LRU of partition-file descriptors: bounded, pinned handles never closed under a
reader, and logs whose files were evicted read and append exactly as before."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from headwater.config import LogConfig
from headwater.log import fdcache
from headwater.log.fdcache import FdCache
from headwater.log.manager import LogManager
from headwater.records.batch import build_batch, decode_records, iter_batches

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=128, retention_ms=-1)
FLAGS = os.O_RDWR | os.O_CREAT | os.O_APPEND


@pytest.fixture
def small_cache() -> Iterator[FdCache]:
    """The process-wide cache shrunk to 16 descriptors for the test."""
    saved = fdcache.FILES.capacity
    fdcache.FILES.set_capacity(16)
    yield fdcache.FILES
    fdcache.FILES.set_capacity(saved)


def test_least_recently_used_handles_are_closed_past_capacity(tmp_path: Path) -> None:
    cache = FdCache(16)
    handles = [cache.handle(tmp_path / f"f{i}", FLAGS) for i in range(40)]
    for h in handles:
        with h as fd:
            os.write(fd, h.path.name.encode())
    assert cache.open_count == 16 and cache.evictions == 24
    assert [h.fd >= 0 for h in handles] == [False] * 24 + [True] * 16
    with handles[30]:  # touched: now the most recent, so the next eviction spares it
        pass
    with handles[0] as fd:  # reopened on demand, same file
        assert os.pread(fd, 10, 0) == b"f0"
    assert handles[30].fd >= 0 and handles[24].fd < 0
    for h in handles:
        h.close()
    assert cache.open_count == 0


def test_a_pinned_handle_is_never_evicted_and_the_cap_is_soft(tmp_path: Path) -> None:
    cache = FdCache(16)
    pinned = [cache.handle(tmp_path / f"p{i}", FLAGS) for i in range(20)]
    fds = [h.__enter__() for h in pinned]  # all held at once: over the cap, none closed
    assert cache.open_count == 20 and all(h.fd == fd for h, fd in zip(pinned, fds, strict=True))
    for h in pinned:
        h.__exit__(None, None, None)
    with cache.handle(tmp_path / "next", FLAGS):
        pass
    assert cache.open_count == 16


def test_close_while_pinned_closes_on_release(tmp_path: Path) -> None:
    cache = FdCache(16)
    h = cache.handle(tmp_path / "f", FLAGS)
    with h as fd:
        h.close()
        os.write(fd, b"still mine")  # the descriptor stays valid until the pin ends
    assert h.fd == -1 and cache.open_count == 0
    with pytest.raises(OSError), h:
        pass


def test_threads_pinning_under_constant_eviction_read_their_own_files(tmp_path: Path) -> None:
    """Two threads read files through a 16-descriptor cache that every read overflows;
    a descriptor closed (and reused) under a reader would return another file's bytes."""
    cache = FdCache(16)
    handles = []
    for i in range(64):
        h = cache.handle(tmp_path / f"f{i}", FLAGS)
        with h as fd:
            os.write(fd, b"%08d" % i)
        handles.append(h)
    wrong: list[tuple[int, bytes]] = []

    def reader(order: range) -> None:
        for _ in range(30):
            for i in order:
                with handles[i] as fd:
                    data = os.pread(fd, 8, 0)
                if data != b"%08d" % i:
                    wrong.append((i, data))

    threads = [threading.Thread(target=reader, args=(range(64),)),
               threading.Thread(target=reader, args=(range(63, -1, -1),))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert wrong == [] and cache.open_count <= 16 + 2


def test_many_partitions_through_a_small_cache_read_back_everything(
        tmp_path: Path, small_cache: FdCache) -> None:
    """120 partitions (each with several segments) through 16 descriptors: appends,
    reads, a restart and appends after it, with never more than 16 files open."""
    manager = LogManager(tmp_path, lambda: 0)
    for rnd in range(6):
        for p in range(120):
            plog = manager.create("t", p, CONFIG)
            plog.append(build_batch([(b"k", b"p%d-r%d" % (p, rnd) + b"x" * 900, [], 1)]), 0)
            assert small_cache.open_count <= 16
    assert len(manager.get("t", 7).segments) > 1
    manager.close_all()
    assert small_cache.open_count == 0, "a clean close leaves nothing open"

    manager = LogManager(tmp_path, lambda: 0)
    for p in range(120):
        plog = manager.open_existing("t", p, CONFIG)
        plog.append(build_batch([(b"k", b"p%d-r6" % p, [], 1)]), 0)
    for p in range(120):
        plog = manager.get("t", p)
        data = plog.read(0, 1 << 20)
        values = [r.value.rstrip(b"x") for pos, h in iter_batches(data)
                  for r in decode_records(data[pos:pos + h.size])]
        assert values == [b"p%d-r%d" % (p, r) for r in range(7)], p
    assert small_cache.open_count <= 16
    manager.close_all()


def test_out_of_descriptors_gives_back_half_of_the_cache(tmp_path: Path) -> None:
    """Sockets may take the descriptors the cache counted on: an EMFILE on open closes
    half of the idle handles and retries instead of failing the read or append."""
    import resource

    cache = FdCache(1000)
    handles = [cache.handle(tmp_path / f"f{i}", FLAGS) for i in range(40)]
    for h in handles:
        with h:
            pass
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    hog = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 2,
                                                    hard))
        try:
            while True:
                hog.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            pass
        with cache.handle(tmp_path / "late", FLAGS) as fd:
            assert fd >= 0
        assert cache.open_count <= 21
    finally:
        for fd in hog:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        for h in handles:
            h.close()
