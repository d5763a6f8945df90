"""Reopening after crashes: torn tails, garbage, lost or torn index files."""

from __future__ import annotations

import os

from headwater.records.batch import iter_batches


def fill(plog, batch, count: int) -> None:
    for i in range(count):
        plog.append(batch(3, ts=1000 + 10 * i), 0)


def last_batch(plog) -> tuple[int, int]:
    """(position, size) of the last batch of the active segment."""
    segment = plog.segments[-1]
    pos, h = list(segment.iter_headers())[-1]
    return pos, h.size


def test_torn_last_batch_is_truncated_and_appends_continue(open_log, batch) -> None:
    plog = open_log()
    fill(plog, batch, 30)
    earlier = plog.read(0, 1 << 20)
    pos, size = last_batch(plog)
    path = plog.segments[-1].log_path
    os.truncate(path, pos + size // 2)  # the process died mid-write; no close()

    again = open_log(clean_shutdown=False)
    assert again.log_end_offset == 87
    assert again.read(0, 1 << 20) == earlier[: len(earlier) - size]
    assert os.path.getsize(path) == pos
    assert again.append(batch(2), 0).base_offset == 87
    assert [h.base_offset for _, h in iter_batches(again.read(84, 1 << 20))] == [84, 87]


def test_garbage_after_last_batch_is_truncated(open_log, batch) -> None:
    plog = open_log()
    fill(plog, batch, 10)
    earlier = plog.read(0, 1 << 20)
    path = plog.segments[-1].log_path
    clean_size = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(os.urandom(300))

    again = open_log(clean_shutdown=False)
    assert os.path.getsize(path) == clean_size
    assert again.read(0, 1 << 20) == earlier
    assert again.append(batch(1), 0).base_offset == 30


def test_clean_marker_still_catches_a_torn_tail(open_log, batch) -> None:
    plog = open_log()
    fill(plog, batch, 10)
    pos, size = last_batch(plog)
    with open(plog.segments[-1].log_path, "r+b") as f:  # flip a byte inside the last batch
        f.seek(pos + size - 1)
        byte = f.read(1)
        f.seek(pos + size - 1)
        f.write(bytes([byte[0] ^ 0xFF]))

    again = open_log(clean_shutdown=True)
    assert again.log_end_offset == 27


def test_missing_index_files_are_rebuilt(open_log, batch) -> None:
    plog = open_log()
    fill(plog, batch, 30)
    reads = [plog.read(o, 200) for o in range(90)]
    middle = plog.segments[1]
    expected = (list(middle.offset_index.keys), list(middle.offset_index.values),
                list(middle.time_index.keys), list(middle.time_index.values))
    assert expected[0], "the dense test index must have entries"
    plog.close()
    for segment in (middle, plog.segments[-1]):
        segment.offset_index.path.unlink()
        segment.time_index.path.unlink()

    again = open_log(clean_shutdown=True)
    rebuilt = again.segments[1]
    assert rebuilt.offset_index.path.exists() and rebuilt.time_index.path.exists()
    assert (list(rebuilt.offset_index.keys), list(rebuilt.offset_index.values)) == expected[:2]
    # The rebuilt time index lacks only the entry a roll adds to seal the segment.
    assert list(rebuilt.time_index.keys) == expected[2][: len(rebuilt.time_index)]
    assert rebuilt.max_timestamp == middle.max_timestamp
    assert [again.read(o, 200) for o in range(90)] == reads


def test_corrupt_older_segment_drops_everything_after_it(open_log, batch) -> None:
    plog = open_log()
    fill(plog, batch, 30)
    second = plog.segments[1]
    cut_offset = second.base_offset + 3  # corrupt the second batch of the second segment
    pos = second.find_position(cut_offset)[0]
    plog.close()
    second.offset_index.path.unlink()  # forces a full check of that segment
    with open(second.log_path, "r+b") as f:
        f.seek(pos + 70)
        f.write(b"\xde\xad")

    again = open_log(clean_shutdown=True)
    assert again.log_end_offset == cut_offset
    assert len(again.segments) == 2
    assert again.append(batch(1), 0).base_offset == cut_offset


def test_torn_index_entry_is_dropped(open_log, batch) -> None:
    plog = open_log()
    fill(plog, batch, 5)
    index = plog.segments[0].offset_index
    entries = len(index)
    plog.close()
    with open(index.path, "ab") as f:
        f.write(b"\x01\x02\x03")  # half an entry

    again = open_log(clean_shutdown=True)
    assert len(again.segments[0].offset_index) == entries
    assert os.path.getsize(index.path) == entries * 8


def test_index_pointing_past_the_file_forces_recovery(open_log, batch) -> None:
    plog = open_log()
    fill(plog, batch, 4)
    segment = plog.segments[0]
    pos, _ = last_batch(plog)
    plog.close()
    os.truncate(segment.log_path, pos)  # the last indexed batch vanished, index did not

    again = open_log(clean_shutdown=True)
    assert again.log_end_offset == 9
    assert all(p < again.segments[0].size for p in again.segments[0].offset_index.values)
