"""`Unmerged`: which committed ranges of a partition merging rewrites (small pieces
only), kept right while windows keep committing during a merge."""

from __future__ import annotations

from headwater.shared.unmerged import SMALL_PIECE, Unmerged


def row(base: int, last: int, key: str | None, size: int) -> dict[str, object]:
    return {"base_offset": base, "last_offset": last, "object_key": key, "byte_length": size}


def test_rows_make_pieces_and_only_small_ones_are_unmerged() -> None:
    rows = [row(0, 9, "seg/a", 5000), row(10, 19, "seg/a", 5000),  # merged already
            row(20, 29, None, 300), row(30, 39, None, 300),  # inline
            row(40, 49, "wal/w1", 400), row(50, 59, "wal/w1", 400),  # a small piece
            row(60, 99, "wal/w2", SMALL_PIECE),  # a large piece: stays
            row(100, 109, "wal/w3", 100)]
    u = Unmerged.of_rows(rows, now_ms=7)
    assert u.ranges == [(20, 60, 1400), (100, 110, 100)]
    assert u.total == 1500 and u.since_ms == 7


def test_contiguous_pieces_join_and_a_merge_keeps_what_grew_meanwhile() -> None:
    u = Unmerged()
    u.add(0, 10, 100, now_ms=1)
    u.add(10, 20, 100, now_ms=2)
    u.add(30, 40, 50, now_ms=3)  # a large piece (not added) left a gap
    assert u.ranges == [(0, 20, 200), (30, 40, 50)] and u.since_ms == 1
    taken = list(u.ranges)
    u.add(40, 45, 25, now_ms=4)  # committed while the merge ran
    u.done(taken, now_ms=5, pieces=3)
    assert u.ranges == [(40, 45, 25)] and u.total == 25 and u.since_ms == 5


def test_compaction_clips_what_it_rewrote() -> None:
    u = Unmerged([(0, 10, 100), (20, 40, 200)])
    u.clip(30)
    assert u.ranges == [(30, 40, 100)] and u.total == 100


def test_pieces_are_counted_and_a_merge_leaves_those_added_meanwhile() -> None:
    u = Unmerged.of_rows([row(0, 9, "wal/a", 10), row(10, 19, "wal/b", 10),
                          row(20, 29, "wal/c", 10)], now_ms=0)
    assert u.ranges == [(0, 30, 30)] and u.pieces == 3  # joined, each still a read
    taken, pieces = list(u.ranges), u.pieces
    u.add(30, 40, 10, now_ms=1)
    u.add(40, 50, 10, now_ms=2)  # two windows committed while the merge ran
    u.done(taken, now_ms=3, pieces=pieces)
    assert u.ranges == [(30, 50, 20)] and u.pieces == 2
    u.clip(50)
    assert u.ranges == [] and u.pieces == 0
