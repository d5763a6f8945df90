"""Partition storage: segments, sparse indexes, producer state, retention, recovery,
and the log side of transactions (markers, last stable offset, aborted-transaction index).

Public entry points: `LogManager` (all partitions of a data dir), `PartitionLog` (one
partition; `append_marker`, `last_stable_offset` and `aborted_transactions` are what the
transaction coordinator and read_committed fetches use), `LogCleaner` (compaction),
`LogError` (Kafka error codes), the batch helpers in `batch` and the marker codec in
`control`.
"""

from headwater.log.cleaner import CleanStats, LogCleaner
from headwater.log.errors import LogError
from headwater.log.manager import LogManager
from headwater.log.partition_log import AppendResult, PartitionLog

__all__ = ["AppendResult", "CleanStats", "LogCleaner", "LogError", "LogManager",
           "PartitionLog"]
