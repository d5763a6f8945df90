"""Partition storage: segments, sparse indexes, producer state, retention, recovery.

Public entry points: `LogManager` (all partitions of a data dir), `PartitionLog` (one
partition), `LogCleaner` (compaction), `LogError` (Kafka error codes), and the batch
helpers in `batch`.
"""

from headwater.log.cleaner import CleanStats, LogCleaner
from headwater.log.errors import LogError
from headwater.log.manager import LogManager
from headwater.log.partition_log import AppendResult, PartitionLog

__all__ = ["AppendResult", "CleanStats", "LogCleaner", "LogError", "LogManager",
           "PartitionLog"]
