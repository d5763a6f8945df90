"""Answering once a coordinator's records are committed.

In a cluster (headwater.storage=shared) a coordinator's topic is a partition of the
shared log, where an append is durable only once its commit window lands, and a window
that fails rebuilds the shard without it. A handler that wrote (or read) coordinator
records through an operation that does not wait itself takes the commits pending on the
partition it used (`CoordinatorRuntime.pending_commits`, taken right after the operation,
before any await, so its own records are among them) and answers through
`once_committed`: a failed commit answers NOT_COORDINATOR, as Kafka's coordinators answer
a failed append (the outcome is unknown: the client finds the coordinator again, retries,
and meets the shard rebuilt from what was committed). On one node nothing waits.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from kio.schema.errors import ErrorCode as E

from ..coordinator.runtime import landed

Pending = Awaitable[None] | None


def once_committed(answer: dict[str, Any], *pending: Pending
                   ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    """`answer` (at once when nothing waits) once `pending` commits land; a failed one
    turns every success in it into NOT_COORDINATOR."""
    if all(p is None for p in pending):
        return answer

    async def wait() -> dict[str, Any]:
        return answer if await landed(pending) else not_coordinator(answer)
    return wait()


def not_coordinator(answer: dict[str, Any]) -> dict[str, Any]:
    """`answer` with every error code that said success saying NOT_COORDINATOR."""
    def mark(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: (E.not_coordinator if key == "error_code" and int(item) == 0
                          else mark(item)) for key, item in value.items()}
        if isinstance(value, list):
            return [mark(item) for item in value]
        return value
    marked: dict[str, Any] = mark(answer)
    return marked

