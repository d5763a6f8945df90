"""In a cluster (headwater.storage=shared), a coordinator answers once its records are
committed.

The coordinators' topics are partitions of the shared log there, and an append is
durable only once its commit window lands. The requests that write coordinator records
(`WRITES`: group, offset, transaction and share-state requests) and those that read them
(`READS`) are wrapped: the answer waits until every record the coordinators appended so
far is committed. A failed commit answers NOT_COORDINATOR, as Kafka's coordinators answer a
failed append (the outcome is unknown: the client finds the coordinator again, retries,
and meets the shard rebuilt from what was committed).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..storage.errors import CommitError, LogError
from ..wire.dispatch import ApiEntry, Handler, Middleware, RequestContext
from .services import HasCluster, HasCoordinators

if TYPE_CHECKING:
    from ..coordinator.runtime import CoordinatorRuntime

WRITES = frozenset({
    22,  # InitProducerId
    24, 25, 26, 28,  # AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit
    42,  # DeleteGroups
    91, 92,  # AlterShareGroupOffsets, DeleteShareGroupOffsets
})
# Not here, answered once their own records (or what they read) are committed
# (`CoordinatorRuntime.write_committed` / `read_committed`, Kafka's write and read
# operations), a failed commit NOT_COORDINATOR where it applies: OffsetCommit (8),
# OffsetFetch (9), OffsetDelete (47) (api/offset_commits.py), the classic group APIs
# (11-14, api/classic_groups.py: a parked JoinGroup or SyncGroup once the records of the
# operation that answered it are), Consumer/ShareGroupHeartbeat (68, 76,
# api/modern_groups.py), the group reads DescribeGroups, ListGroups (15, 16,
# api/group_admin.py), ConsumerGroupDescribe and ShareGroupDescribe (69, 77) and
# Initialize/Read/Write/DeleteShareGroupState and ReadShareGroupStateSummary (83-87,
# api/share_state.py), and ShareFetch and ShareAcknowledge (78, 79: the share-partition
# leaders persist through ShareCoordinator's writes, or another broker's answered once
# committed, before they answer).

# Reads answer from the shards' memory, where an append sits before its commit window
# lands; a window that fails rebuilds the shard without it. Answered at once, a read could
# show an offset that then vanishes (the fault campaign saw committed offsets go backwards
# during an object-store outage). Kafka reads at the coordinator's last committed offset;
# here a read waits until everything appended before it is committed, and a failed commit
# answers NOT_COORDINATOR as it does for a write (the client asks again).
READS = frozenset({
    65, 66,  # DescribeTransactions, ListTransactions
    90,  # DescribeShareGroupOffsets
})

SETTLED = WRITES | READS


class Services(HasCluster, HasCoordinators, Protocol):
    """What these handlers use of the broker."""


def middleware(broker: Services) -> Middleware | None:
    """The handlers that write or read coordinator records, answering once those are
    committed (cluster mode only)."""
    if broker.cluster is None:
        return None
    runtimes = broker.coordinator_runtimes()

    def settle(entry: ApiEntry) -> Handler | None:
        return _wrap(entry.handler, runtimes) if entry.api_key in SETTLED else None
    return settle


def _wrap(handler: Handler, runtimes: list[CoordinatorRuntime]) -> Handler:
    async def wrapped(ctx: RequestContext, req: Any) -> Any:
        failures = [runtime.commit_failures for runtime in runtimes]
        result = handler(ctx, req)
        if asyncio.iscoroutine(result):
            result = await result
        failed: LogError | None = None
        try:
            for runtime in runtimes:
                pending = runtime.settled()
                if pending is not None:
                    await pending
        except LogError as exc:
            failed = exc
        if failed is None and [runtime.commit_failures for runtime in runtimes] != failures:
            # A commit failed while the request was handled, and its future may have
            # left `settled()` before we asked: the request's own records may be among
            # those dropped. Answering success here told a client its transaction was
            # committed while the coordinator, rebuilt without the PrepareCommit, later
            # aborted it (the 30-minute campaign's torn transactions). The client retries.
            failed = CommitError(E.not_coordinator, "a coordinator's records were not "
                                 "committed while this request was handled", set())
        if failed is not None:
            # As Kafka's coordinators answer a failed append: NOT_COORDINATOR, and the
            # client finds the coordinator again and retries (closing the connection
            # instead cost it a reconnect, with librdkafka's growing backoff).
            answer = _not_coordinator(result)
            if answer is None:  # no error code to carry it: the connection is closed
                raise failed
            return answer
        return result
    return wrapped


def _not_coordinator(result: Any) -> Any:
    """`result` (a response as a dict) with every error code that said success saying
    NOT_COORDINATOR; None if it has no error code at all (or is already encoded)."""
    found = False

    def mark(value: Any) -> Any:
        nonlocal found
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                if key == "error_code":
                    found = True
                    out[key] = E.not_coordinator if int(item) == 0 else item
                else:
                    out[key] = mark(item)
            return out
        if isinstance(value, list):
            return [mark(item) for item in value]
        return value
    answer = mark(result)
    return answer if found else None
