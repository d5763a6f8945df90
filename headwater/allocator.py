"""The C allocator's settings for a long-lived broker process.

glibc raises its mmap threshold each time a large block is freed (up to 32 MiB), so
after the first 1 MiB produce batch or 4 MiB fetch answer has come and gone, blocks of
that size are carved from the heap and arenas instead of mapped, and their pages often
stay with the process after they are freed: three brokers of the shared log climbed from
65 MB to 438 MB in steps that never came down while writing 2 GB of 1 MB batches
(tests/integration/test_memory.py). A fixed threshold turns the adjustment off: blocks
of at least `MMAP_THRESHOLD` are mapped and returned to the system when freed; 4 MiB
keeps the common request and batch sizes on the heap, where reuse is cheap. The trim
threshold goes with it (glibc's own adjustment keeps it at twice the mmap threshold):
left at 128 KiB, the heap was given back after every request and taken again by the
next, and 1 KiB produce lost a quarter of its rate.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 4 << 20
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # what glibc's own adjustment would pair with it

log = logging.getLogger("headwater")


def tune() -> bool:
    """Fix glibc's mmap threshold; False where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl, macOS: no mallopt, nothing to tune
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    if (mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1
            or mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) != 1):
        log.warning("could not fix the C allocator's mmap threshold; memory freed by "
                    "large requests may stay with the process")
        return False
    return True
