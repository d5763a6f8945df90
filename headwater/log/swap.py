"""Crash-safe replacement of a run of segments by one cleaned segment (file steps only).

The cleaner writes `<base>.log.cleaned` (plus `<base>.index.cleaned`,
`<base>.timeindex.cleaned` and, when the run had aborted transactions,
`<base>.txnindex.cleaned`) and fsyncs them; renaming the log file to `<base>.log.swap`
and fsyncing the directory is the commit point. Then the old segments are deleted in
ascending order and the cleaned files renamed into place (indexes first, the log last).
`recover_swaps`, run before a partition directory is loaded, discards uncommitted
`.cleaned` files and finishes a committed swap: it deletes the old segments whose base
offsets lie in [base, max(next offset of the swap file, base + 1)) and renames the swap
file.

The sparse indexes of a finished swap are rebuilt by segment recovery, but the
aborted-transaction index cannot be (a transaction may start in an earlier segment), so a
committed swap keeps its `.txnindex.cleaned`. If that file is gone, either `install`
already moved it to `<base>.txnindex` (after deleting the old segments, the old first
one's index included) or the run had no aborted transactions at all; either way an
existing `<base>.txnindex` is the right one and stays.

Why that range is enough: old segments outside it (whose records were all removed) are
left with their uncleaned content, which is merely less compact. Their removed records
are superseded by later records, and every later segment is still intact while this swap
is in flight, so nothing deleted can reappear.
"""

from __future__ import annotations

import os
from pathlib import Path

from headwater.log.segment import segment_path
from headwater.log.synced import fsync_dir
from headwater.records.batch import HEADER_SIZE, check_header, parse_header

CLEANED = ".cleaned"
SWAP = ".swap"
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")
_INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


def cleaned_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / f"{base_offset:020d}{suffix}{CLEANED}"


def commit(directory: Path, base_offset: int) -> Path:
    """`<base>.log.cleaned` -> `<base>.log.swap`, durably: from here on the swap wins."""
    swap = segment_path(directory, base_offset, ".log" + SWAP)
    os.replace(cleaned_path(directory, base_offset, ".log"), swap)
    fsync_dir(directory)
    return swap


def install(directory: Path, base_offset: int) -> None:
    """After the old segments are gone: move the cleaned indexes, then the log, in place."""
    for suffix in _INDEX_SUFFIXES:
        source = cleaned_path(directory, base_offset, suffix)
        if source.exists():
            os.replace(source, segment_path(directory, base_offset, suffix))
    os.replace(segment_path(directory, base_offset, ".log" + SWAP),
               segment_path(directory, base_offset, ".log"))


def discard(directory: Path, base_offset: int) -> None:
    """Remove an uncommitted clean's files."""
    for suffix in SEGMENT_SUFFIXES:
        cleaned_path(directory, base_offset, suffix).unlink(missing_ok=True)


def recover_swaps(directory: Path) -> list[int]:
    """Discard `.cleaned` files and complete `.swap` files; returns the swapped bases."""
    swaps = {}
    for swap in directory.glob(f"*.log{SWAP}"):
        stem = swap.name.split(".", 1)[0]
        if stem.isdigit():
            swaps[int(stem)] = swap
    keep = {cleaned_path(directory, base, ".txnindex") for base in swaps}
    for leftover in directory.glob(f"*{CLEANED}"):
        if leftover not in keep:
            leftover.unlink(missing_ok=True)
    done = []
    for base, swap in sorted(swaps.items()):
        end = max(_next_offset(swap, base), base + 1)
        txn_cleaned = cleaned_path(directory, base, ".txnindex")
        installed_txn = not txn_cleaned.exists()  # see the module docstring
        for log_file in directory.glob("*.log"):
            if log_file.stem.isdigit() and base < int(log_file.stem) < end:
                _delete_segment_files(directory, int(log_file.stem))
        # The base's own files: old ones, or indexes of a half-installed swap.
        _delete_segment_files(directory, base, keep_txn_index=installed_txn)
        if not installed_txn:
            os.replace(txn_cleaned, segment_path(directory, base, ".txnindex"))
        os.replace(swap, segment_path(directory, base, ".log"))
        done.append(base)
    if done:
        fsync_dir(directory)
    return done


def _delete_segment_files(directory: Path, base_offset: int,
                          keep_txn_index: bool = False) -> None:
    suffixes = (".index", ".timeindex") if keep_txn_index else _INDEX_SUFFIXES
    for suffix in (*suffixes, ".log"):  # the log last: it names the segment
        segment_path(directory, base_offset, suffix).unlink(missing_ok=True)


def _next_offset(path: Path, base_offset: int) -> int:
    """Offset after the last whole batch of a (fsynced, so intact) swap file."""
    next_offset = base_offset
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pos = 0
        while pos + HEADER_SIZE <= size:
            h = parse_header(os.pread(fd, HEADER_SIZE, pos))
            if check_header(h) or pos + h.size > size:
                break
            next_offset = h.next_offset
            pos += h.size
    finally:
        os.close(fd)
    return next_offset
