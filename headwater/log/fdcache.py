"""Open file descriptors of partition files, kept in one bounded LRU.

Why: a broker with 100,000 partitions would otherwise hold ~300,000 descriptors (each
segment's log, offset index and time index), far over a usual RLIMIT_NOFILE; an idle
partition needs none. Kafka keeps only what it needs open; so do we: every segment file
is a `Handle` that opens its file on first use and that the cache may close again once
more than `capacity` are open, least recently used first.

Threading: the event loop reads and appends, a worker thread fsyncs (`flush`) and the
log cleaner reads in another. A descriptor in use is *pinned* (`with handle as fd:`), and
eviction skips pinned handles, so no thread ever sees its descriptor closed (or, worse,
reused for another file) under it. Pins, opens and evictions happen under one lock; a
pin that finds its handle open costs a lock round trip and a dict move. The cap is soft:
when everything open is pinned, a new open goes over it rather than fail.

Closing the descriptor of a file with unsynced writes loses nothing: the data is in the
page cache, and a later `fsync` through a fresh descriptor flushes the same inode.
"""

from __future__ import annotations

import errno
import os
import threading
from collections import OrderedDict
from pathlib import Path
from types import TracebackType

DEFAULT_CAPACITY = 8192


class FdCache:
    """The LRU of open `Handle`s; `capacity` is the number of descriptors kept open."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = max(16, capacity)
        self._lock = threading.Lock()
        self._open: OrderedDict[Handle, None] = OrderedDict()
        #: Descriptors closed by eviction since start (tests).
        self.evictions = 0

    def handle(self, path: Path, flags: int) -> Handle:
        """A handle on `path`, not yet open (`flags` as for os.open; O_CREAT makes it)."""
        return Handle(self, path, flags)

    @property
    def open_count(self) -> int:
        return len(self._open)

    def set_capacity(self, capacity: int) -> None:
        with self._lock:
            self.capacity = max(16, capacity)
            self._evict()

    def _evict(self, keep: int | None = None) -> None:
        """Close least recently used, unpinned handles until at most `keep` (default: the
        capacity) are open (lock held)."""
        excess = len(self._open) - (self.capacity if keep is None else keep)
        if excess <= 0:
            return
        victims = []
        for handle in self._open:
            if handle.pins == 0:
                victims.append(handle)
                if len(victims) == excess:
                    break
        for handle in victims:
            del self._open[handle]
            os.close(handle.fd)
            handle.fd = -1
            self.evictions += 1


class Handle:
    """One file, opened on demand; `with handle as fd:` pins it open for the block."""

    __slots__ = ("_cache", "path", "flags", "fd", "pins", "closed")

    def __init__(self, cache: FdCache, path: Path, flags: int) -> None:
        self._cache = cache
        self.path = path
        self.flags = flags
        self.fd = -1
        self.pins = 0
        self.closed = False

    def __enter__(self) -> int:
        cache = self._cache
        with cache._lock:
            if self.fd >= 0:
                cache._open.move_to_end(self)
                self.pins += 1
            else:
                if self.closed:
                    raise OSError(errno.EBADF, f"{self.path} is closed")
                try:
                    self.fd = os.open(self.path, self.flags, 0o644)
                except OSError as exc:
                    if exc.errno not in (errno.EMFILE, errno.ENFILE):
                        raise
                    # Out of descriptors (sockets took them): give back half of ours.
                    cache._evict(len(cache._open) // 2)
                    self.fd = os.open(self.path, self.flags, 0o644)
                cache._open[self] = None
                self.pins += 1  # before evicting: never this one
                cache._evict()
            return self.fd

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        cache = self._cache
        with cache._lock:
            self.pins -= 1
            if self.closed and self.pins == 0 and self.fd >= 0:
                self._close_locked()

    def close(self) -> None:
        """Close for good; a pin still held elsewhere closes the descriptor on release."""
        cache = self._cache
        with cache._lock:
            self.closed = True
            if self.pins == 0 and self.fd >= 0:
                self._close_locked()

    def _close_locked(self) -> None:
        self._cache._open.pop(self, None)
        os.close(self.fd)
        self.fd = -1

    def __repr__(self) -> str:
        return f"Handle({self.path}, fd={self.fd}, pins={self.pins})"


#: The broker's cache (one data directory per process); `Broker.open` sizes it from the
#: descriptor limit and `headwater.max.open.partition.files`.
FILES = FdCache()
