"""The records decoder (a numba kernel writing Arrow buffers): `headwater.records.
arrow_decode`, shared with the broker's Iceberg table writer. Re-exported here, where
the connector's readers (`fetcher.py`) import it."""

from headwater.records.arrow_decode import ColumnBuilder, CorruptRecordsError

__all__ = ["ColumnBuilder", "CorruptRecordsError"]
