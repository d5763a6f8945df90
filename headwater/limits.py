"""How many partitions this process can hold open, from its file-descriptor limit.

Every partition keeps its active segment's files open (log, offset index, time index,
and a transaction index once used), so a broker asked for more partitions than its
descriptors allow would fail later, at an append or at the next start, and could not
start again. Refusing the request that would cross the limit keeps it startable.
The soft RLIMIT_NOFILE is raised to the hard one first, as Kafka's scripts expect
operators to do.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger("headwater.limits")

FDS_PER_PARTITION = 4
# Descriptors kept for everything else: client connections, the metadata log, sockets
# of the metrics server, files of Python's own imports.
RESERVED_FDS = 2048


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


def partition_capacity(nofile: int) -> int:
    """Partitions whose open files fit in `nofile` descriptors beside the reserve."""
    return max(100, (nofile - RESERVED_FDS) // FDS_PER_PARTITION)
