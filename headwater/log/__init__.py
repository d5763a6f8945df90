"""Partition storage on local segment files: today's implementation of the storage seam
(`headwater.storage`): segments, sparse indexes, producer state, retention, recovery, and
the log side of transactions (markers, last stable offset, aborted-transaction index).

Public entry points: `LocalStore` (the `PartitionStore` of one data dir), `LogManager`
(its partitions), `PartitionLog` (one partition: a `Partition`), `LogCleaner`
(compaction), the batch helpers in `batch` and the marker codec in `control`.
"""

from headwater.log.cleaner import CleanStats, LogCleaner
from headwater.log.manager import LogManager
from headwater.log.partition_log import PartitionLog
from headwater.log.store import LocalStore

__all__ = ["CleanStats", "LocalStore", "LogCleaner", "LogManager", "PartitionLog"]
