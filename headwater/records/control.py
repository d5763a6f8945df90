"""Transaction markers: the control batches that end a transaction on a partition.

A marker is a RecordBatch v2 with the transactional and control attribute bits set, the
producer's id and epoch in the header, base sequence -1, and exactly one record whose
key is (int16 version 0, int16 type) with type 0 = ABORT, 1 = COMMIT, and whose value is
(int16 version 0, int32 coordinator epoch) — Kafka's `EndTransactionMarker`, byte for
byte, because consumers (librdkafka, the Java client) parse it to drop aborted records
and skip the marker itself. Building and parsing one is a cold path: markers are rare
next to data batches, and only the broker's own writers may append them.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kio.schema.errors import ErrorCode as E

from headwater.records.batch import BatchHeader, Buffer, build_batch, decode_records
from headwater.storage.errors import LogError

ABORT = 0
COMMIT = 1
MARKER_VERSION = 0

_KEY = struct.Struct(">hh")  # version, control type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch


class EndTxnMarker(NamedTuple):
    """What a marker says: how the transaction ended, and which coordinator epoch wrote it
    (a marker from an older coordinator epoch is a zombie's and is fenced)."""

    commit: bool
    coordinator_epoch: int


def build_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                 timestamp: int) -> bytes:
    """One marker batch at base offset 0 (the log assigns the real offset)."""
    key = _KEY.pack(MARKER_VERSION, COMMIT if commit else ABORT)
    value = _VALUE.pack(MARKER_VERSION, coordinator_epoch)
    return build_batch([(key, value, [], timestamp)], producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=-1,
                       is_transactional=True, is_control=True)


def parse_marker(batch: Buffer) -> EndTxnMarker | None:
    """The end-transaction marker of one control batch; None for an empty control batch
    (Kafka's cleaner can leave those) or another control type (KRaft's, say), which end
    nothing. LogError(INVALID_RECORD) if the record is malformed."""
    records = decode_records(batch)
    if not records:
        return None
    key, value = records[0].key, records[0].value
    if key is None or len(key) < _KEY.size:
        raise LogError(E.invalid_record, "control record without a valid key")
    version, kind = _KEY.unpack_from(key)
    if version != MARKER_VERSION:
        raise LogError(E.invalid_record, f"unknown control record key version {version}")
    if kind not in (ABORT, COMMIT):
        return None
    if value is None or len(value) < _VALUE.size:
        raise LogError(E.invalid_record, "end transaction marker value too short")
    value_version, coordinator_epoch = _VALUE.unpack_from(value)
    if value_version < 0:
        raise LogError(E.invalid_record, f"invalid end transaction marker version {value_version}")
    return EndTxnMarker(kind == COMMIT, coordinator_epoch)


def parse_markers(data: Buffer,
                  headers: list[BatchHeader]) -> dict[int, EndTxnMarker | None] | None:
    """Index of each producer's control batch in a record set -> its marker (None: it
    ends nothing); None when there are no such batches (the common internal write)."""
    markers: dict[int, EndTxnMarker | None] = {}
    view = memoryview(data)
    pos = 0
    for i, h in enumerate(headers):
        if h.is_control and h.producer_id >= 0:
            markers[i] = parse_marker(view[pos:pos + h.size])
        pos += h.size
    return markers or None
