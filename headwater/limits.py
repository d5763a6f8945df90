"""What one process can hold: descriptors for partition files, and partitions.

Partition files are opened on demand and kept in a bounded LRU (`log.fdcache`), so
descriptors no longer bound the partition count: an idle partition holds none. Half of
the descriptors (after a reserve) go to that cache, the rest stay for client
connections, the metadata log and Python's own files. What still bounds partitions is
memory (a few kB each, open or not), hence `headwater.max.partitions`: a CreateTopics /
CreatePartitions past it is refused, so the broker can always start again.
The soft RLIMIT_NOFILE is raised to the hard one first, as Kafka's scripts expect
operators to do.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger("headwater.limits")

# Descriptors kept out of the file cache's share: the listeners, the metadata log, the
# metrics server, files of Python's own imports.
RESERVED_FDS = 1024
MAX_OPEN_FILES = 65_536


def raise_nofile_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard or (
            hard == resource.RLIM_INFINITY and soft != hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("could not raise RLIMIT_NOFILE from %d to %s: %s", soft, hard, exc)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def open_file_capacity(nofile: int) -> int:
    """Descriptors the partition-file cache may keep open under `nofile`."""
    return max(64, min(MAX_OPEN_FILES, (nofile - RESERVED_FDS) // 2))
