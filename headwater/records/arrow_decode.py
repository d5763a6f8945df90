"""Decode Kafka v2 records straight into Arrow column buffers.

Why: the Spark engine can take ~2 M rows/s of Arrow on this class of machine, but going
through a Kafka client means one Python object per record (~1 µs each, several times what
Spark spends per row). Here the records section of a batch is walked once by a small
compiled kernel (numba) that writes offsets, timestamps and the key/value/header bytes
into preallocated numpy arrays; Arrow arrays are then views of those buffers. No Python
code runs per record.

The caller (``fetcher.py``) works per batch: it skips control batches and aborted
transactional data, decompresses, and hands each batch's records section to
:meth:`ColumnBuilder.add_records`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numba import njit

# Fill levels of the output buffers, kept in one int64 array between kernel calls.
ROWS, KEY_BYTES, VALUE_BYTES, HEADERS, HKEY_BYTES, HVALUE_BYTES, STATUS = range(7)
OK, CORRUPT = 0, 1


class CorruptRecordsError(ValueError):
    """A records section that does not parse as Kafka v2 records."""


@njit(cache=True, nogil=True, inline="always")
def _varint(buf, pos, end):  # pragma: no cover - compiled
    """Zig-zag varint at ``pos``: (value, next position); next position -1 if truncated."""
    shift = 0
    raw = np.int64(0)
    while pos < end and shift < 64:
        b = np.int64(buf[pos])
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    return 0, -1


@njit(cache=True, nogil=True, inline="always")
def _copy_field(buf, pos, end, out, filled):  # pragma: no cover - compiled
    """A length-prefixed field (length -1: null) copied to ``out`` at ``filled``:
    (new fill level, next position or -1 if it overruns ``end``, 1 present / 0 null)."""
    length, pos = _varint(buf, pos, end)
    if pos < 0 or pos + max(length, 0) > end:
        return filled, -1, 0
    if length < 0:
        return filled, pos, 0
    out[filled:filled + length] = buf[pos:pos + length]
    return filled + length, pos + length, 1


@njit(cache=True, nogil=True)
def _decode(buf, pos, end, count, base_offset, base_ts, log_append_ts, lo, hi, fill,
            offsets, stamps, key_ends, key_data, key_valid, value_ends, value_data,
            value_valid, with_headers, header_ends, hkey_ends, hkey_data, hvalue_ends,
            hvalue_data, hvalue_valid):  # pragma: no cover - compiled
    """Append the records of one batch with offsets in [lo, hi) to the column buffers.

    ``*_ends`` hold each item's end position in its data buffer (Arrow offsets shifted by
    one); ``fill`` holds the fill levels (see the module constants) and gets STATUS set
    to CORRUPT when a record runs past the section."""
    n = fill[ROWS]
    nk = fill[KEY_BYTES]
    nv = fill[VALUE_BYTES]
    nh = fill[HEADERS]
    nhk = fill[HKEY_BYTES]
    nhv = fill[HVALUE_BYTES]
    for _ in range(count):
        length, pos = _varint(buf, pos, end)
        if pos < 0 or length < 0 or pos + length > end:
            fill[STATUS] = CORRUPT
            break
        record_end = pos + length
        p = pos + 1  # attributes: unused in v2
        ts_delta, p = _varint(buf, p, record_end)
        offset_delta, p = _varint(buf, p, record_end) if p >= 0 else (0, -1)
        if p < 0:
            fill[STATUS] = CORRUPT
            break
        offset = base_offset + offset_delta
        if offset < lo or offset >= hi:
            pos = record_end
            continue
        nk, p, key_valid[n] = _copy_field(buf, p, record_end, key_data, nk)
        if p >= 0:
            nv, p, value_valid[n] = _copy_field(buf, p, record_end, value_data, nv)
        if p >= 0 and with_headers:
            hcount, p = _varint(buf, p, record_end)
            if hcount < 0:
                p = -1
            for _h in range(hcount):
                if p < 0:
                    break
                nhk, p, present = _copy_field(buf, p, record_end, hkey_data, nhk)
                if present == 0:  # a header key is never null
                    p = -1
                    break
                hkey_ends[nh] = nhk
                nhv, p, hvalue_valid[nh] = _copy_field(buf, p, record_end, hvalue_data, nhv)
                hvalue_ends[nh] = nhv
                nh += 1
            header_ends[n] = nh
        if p < 0:
            fill[STATUS] = CORRUPT
            break
        offsets[n] = offset
        stamps[n] = log_append_ts if log_append_ts >= 0 else base_ts + ts_delta
        key_ends[n] = nk
        value_ends[n] = nv
        n += 1
        pos = record_end
    fill[ROWS] = n
    fill[KEY_BYTES] = nk
    fill[VALUE_BYTES] = nv
    fill[HEADERS] = nh
    fill[HKEY_BYTES] = nhk
    fill[HVALUE_BYTES] = nhv


def _grow(array: np.ndarray, need: int) -> np.ndarray:
    if need <= len(array):
        return array
    grown = np.empty(max(need, 2 * len(array)), dtype=array.dtype)
    grown[:len(array)] = array
    return grown


def _offsets(ends: np.ndarray, n: int) -> pa.Buffer:
    out = np.empty(n + 1, dtype=np.int32)
    out[0] = 0
    out[1:] = ends[:n]
    return pa.py_buffer(out)


def _validity(valid: np.ndarray, n: int) -> tuple[pa.Buffer | None, int]:
    nulls = n - int(np.count_nonzero(valid[:n]))
    if nulls == 0:
        return None, 0
    return pa.py_buffer(np.packbits(valid[:n], bitorder="little")), nulls


def _binary_array(arrow_type: pa.DataType, ends: np.ndarray, data: np.ndarray, used: int,
                  valid: np.ndarray, n: int) -> pa.Array:
    validity, nulls = _validity(valid, n)
    if nulls == n:
        return pa.nulls(n, arrow_type)
    return pa.Array.from_buffers(arrow_type, n, [validity, _offsets(ends, n),
                                                 pa.py_buffer(data[:used].copy())],
                                 null_count=nulls)


def _constant_string(value: str, n: int) -> pa.Array:
    raw = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(raw * n)])


# Per-row buffers; per-header buffers; key/value/header bytes are sized separately.
_ROW_ARRAYS = (("offsets", np.int64), ("stamps", np.int64), ("types", np.int32),
               ("key_ends", np.int32), ("key_valid", np.uint8), ("value_ends", np.int32),
               ("value_valid", np.uint8))
_HEADER_ROW_ARRAYS = (("header_ends", np.int32),)
_HEADER_ARRAYS = (("hkey_ends", np.int32), ("hvalue_ends", np.int32),
                  ("hvalue_valid", np.uint8), ("hkey_data", np.uint8),
                  ("hvalue_data", np.uint8))


class ColumnBuilder:
    """Accumulates decoded records of one topic-partition; :meth:`flush` emits an Arrow
    RecordBatch in the source schema (key, value, topic, partition, offset, timestamp,
    timestampType [, headers])."""

    # Set in __init__ with setattr from _ROW_ARRAYS, _HEADER_ROW_ARRAYS, _HEADER_ARRAYS.
    offsets: np.ndarray
    stamps: np.ndarray
    types: np.ndarray
    key_ends: np.ndarray
    key_valid: np.ndarray
    value_ends: np.ndarray
    value_valid: np.ndarray
    header_ends: np.ndarray
    hkey_ends: np.ndarray
    hvalue_ends: np.ndarray
    hvalue_valid: np.ndarray
    hkey_data: np.ndarray
    hvalue_data: np.ndarray

    def __init__(self, schema: pa.Schema, topic: str, partition: int, headers: bool,
                 rows_hint: int = 65536, bytes_hint: int = 8 << 20) -> None:
        self.schema = schema
        self.topic = topic
        self.partition = partition
        self.with_headers = headers
        self._ts_type = schema.field("timestamp").type
        self.fill = np.zeros(7, dtype=np.int64)
        small = 1  # header buffers start tiny and grow only when headers are read
        for name, dtype in _ROW_ARRAYS + (_HEADER_ROW_ARRAYS if headers else ()):
            setattr(self, name, np.empty(rows_hint, dtype))
        for name, dtype in _HEADER_ARRAYS + (() if headers else _HEADER_ROW_ARRAYS):
            setattr(self, name, np.empty(small, dtype))
        self.key_data = np.empty(1 << 16, np.uint8)
        self.value_data = np.empty(bytes_hint, np.uint8)

    @property
    def rows(self) -> int:
        return int(self.fill[ROWS])

    def add_records(self, section: np.ndarray, count: int, base_offset: int, base_ts: int,
                    log_append_time: bool, lo: int, hi: int) -> None:
        """Decode one batch's records section (uint8 array) keeping offsets in [lo, hi).

        With ``log_append_time`` every record gets ``base_ts`` (pass the batch's max
        timestamp, which the broker set). Raises CorruptRecordsError when the section
        does not parse."""
        fill = self.fill
        n = int(fill[ROWS])
        rows = n + count
        size = len(section)
        for name, _ in _ROW_ARRAYS + (_HEADER_ROW_ARRAYS if self.with_headers else ()):
            setattr(self, name, _grow(getattr(self, name), rows))
        # A section's keys and values together are never longer than the section.
        self.key_data = _grow(self.key_data, int(fill[KEY_BYTES]) + size)
        self.value_data = _grow(self.value_data, int(fill[VALUE_BYTES]) + size)
        if self.with_headers:
            # Every header costs at least two bytes of the section.
            headers = int(fill[HEADERS]) + size // 2 + 1
            for name, _ in _HEADER_ARRAYS:
                setattr(self, name, _grow(getattr(self, name), headers))
            self.hkey_data = _grow(self.hkey_data, int(fill[HKEY_BYTES]) + size)
            self.hvalue_data = _grow(self.hvalue_data, int(fill[HVALUE_BYTES]) + size)
        log_append_ts = base_ts if log_append_time else -1
        before = fill.copy()
        _decode(section, 0, size, count, base_offset, base_ts, log_append_ts, lo, hi, fill,
                self.offsets, self.stamps, self.key_ends, self.key_data, self.key_valid,
                self.value_ends, self.value_data, self.value_valid, self.with_headers,
                self.header_ends, self.hkey_ends, self.hkey_data, self.hvalue_ends,
                self.hvalue_data, self.hvalue_valid)
        if fill[STATUS] != OK:
            fill[:] = before  # nothing of a bad batch is kept
            raise CorruptRecordsError(
                f"corrupt records in the batch at offset {base_offset} of "
                f"{self.topic}-{self.partition}")
        self.types[n:int(fill[ROWS])] = 1 if log_append_time else 0

    def flush(self) -> pa.RecordBatch:
        """The accumulated rows as one RecordBatch; the builder starts empty again."""
        fill = self.fill
        n = int(fill[ROWS])
        columns = [
            _binary_array(pa.binary(), self.key_ends, self.key_data, int(fill[KEY_BYTES]),
                          self.key_valid, n),
            _binary_array(pa.binary(), self.value_ends, self.value_data,
                          int(fill[VALUE_BYTES]), self.value_valid, n),
            _constant_string(self.topic, n),
            pa.array(np.full(n, self.partition, dtype=np.int32)),
            pa.array(self.offsets[:n].copy()),
            pa.Array.from_buffers(self._ts_type, n,
                                  [None, pa.py_buffer(self.stamps[:n] * 1000)]),
            pa.array(self.types[:n].copy()),
        ]
        if self.with_headers:
            columns.append(self._headers(n))
        fill[:] = 0
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def _headers(self, n: int) -> pa.Array:
        """list<struct<key: string, value: binary>>, null for a record without headers
        (what confluent-kafka and Spark's Kafka source give)."""
        nh = int(self.fill[HEADERS])
        list_type = self.schema.field("headers").type
        struct_type = list_type.value_type
        keys = _binary_array(pa.string(), self.hkey_ends, self.hkey_data,
                             int(self.fill[HKEY_BYTES]), np.ones(nh, np.uint8), nh)
        values = _binary_array(pa.binary(), self.hvalue_ends, self.hvalue_data,
                               int(self.fill[HVALUE_BYTES]), self.hvalue_valid, nh)
        entries = pa.StructArray.from_arrays([keys, values], fields=list(struct_type))
        ends = self.header_ends[:n]
        starts = np.empty(n, np.int32)
        starts[0:1] = 0
        starts[1:] = ends[:-1]
        valid = (ends > starts).astype(np.uint8)
        validity, nulls = _validity(valid, n)
        return pa.ListArray.from_buffers(list_type, n, [validity, _offsets(ends, n)],
                                         null_count=nulls, children=[entries])
