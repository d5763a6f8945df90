"""The storage seam: the interface every reader and writer of partition data uses.

`Partition` (one partition: append, read, offsets, transactions' log side) and
`PartitionStore` (all of a broker's partitions, their durability and upkeep) are
protocols; `headwater.log` is today's implementation on local segment files. `LogError`
carries the Kafka error code of a refused append or read, and `PartitionWaiters` parks
long polls until a partition is appended to.
"""

from headwater.storage.errors import LogError
from headwater.storage.partition import AppendResult, Partition, ProducerStateInfo
from headwater.storage.store import PartitionSource, PartitionStore
from headwater.storage.waiters import PartitionWaiters

__all__ = ["AppendResult", "LogError", "Partition", "PartitionSource", "PartitionStore",
           "PartitionWaiters", "ProducerStateInfo"]
