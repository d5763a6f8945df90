"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets, plus
DeleteGroups' share-group path: the I/O half of KIP-932's administration table (the
records: `group/share/admin.py`; the handlers: `api/share_admin.py`).

Each operation runs group-shard step, share coordinator call(s), group-shard step, as
Kafka's `GroupCoordinatorService` does. The share-partition leaders cached on this broker
for a reset or deleted share-partition are forgotten, so the next ShareFetch reads the
new state. Deletions interrupted by a crash are finished after the group shard loads.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..coordinator.runtime import CoordinatorRuntime, NotReady, Result
from ..faults import SHARE_AFTER_PENDING_DELETION, Faults
from ..group.share import admin as A
from ..storage.errors import LogError
from .coordinator_shard import StateSummary

if TYPE_CHECKING:
    from ..group.shard import GroupShard
    from ..metadata.events import ImageSource
    from ..storage.store import PartitionSource

log = logging.getLogger("headwater.share.admin")

UNINITIALIZED = -1
DEFAULT_LEADER_EPOCH = 0
ZERO_UUID = uuid.UUID(int=0)


class ShareLeaders(Protocol):
    """The share-partition leaders of this broker, as the admin uses them."""

    def forget(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None: ...


class ShareGroups(Protocol):
    """The group coordinator as the admin uses it: operations on a group's shard."""

    @property
    def runtime(self) -> CoordinatorRuntime: ...

    def write(self, group_id: str, op: Callable[[GroupShard, int], Result]) -> Any: ...

    async def write_committed(self, group_id: str,
                              op: Callable[[GroupShard, int], Result]) -> Any:
        """`write`, answered once its records are committed (LogError if not)."""
        ...

    async def read_committed(self, group_id: str, fn: Callable[[GroupShard], Any]) -> Any:
        """A read, answered once what it read is committed (LogError if not)."""
        ...


class ShareState(Protocol):
    """The share coordinator as the admin uses it (Kafka's Persister calls)."""

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int
                           ) -> StateSummary: ...

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> int: ...

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int: ...


class ShareAdmin:
    """The operations, callable from handlers and from the load hook."""

    def __init__(self, groups: ShareGroups, state: ShareState, leaders: ShareLeaders, *,
                 image: ImageSource, partitions: PartitionSource,
                 faults: Faults | None = None,
                 end_offset: Callable[[str, int], Awaitable[int | None]] | None = None
                 ) -> None:
        self.groups = groups
        self.state = state
        self.leaders = leaders
        self._image = image
        self._partitions = partitions
        #: A partition's high watermark from its leader, for one this broker does not
        #: serve (a cluster: `ClusterNode.end_offset`); None answers lag -1.
        self._end_offset = end_offset
        self._tasks: set[asyncio.Task[None]] = set()
        # Test-only: the fault point share.after-pending-deletion (headwater/faults.py).
        self._faults = faults if faults is not None else Faults()

    def _forget(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        self.leaders.forget(group_id, topic_id, partition)

    def group_partition_loaded(self, partition: int) -> None:
        """A group shard loaded (subscribed to the group runtime's loads): finish the
        share-state deletions a crash interrupted there."""
        if not self.groups.runtime.read(partition, A.pending_deletions):
            return
        task = asyncio.get_running_loop().create_task(self.finish_pending(partition))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- describe ------------------------------------------------------------------
    async def describe(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
                       version: int) -> dict[str, Any]:
        """One group's entry; `topics` None = every initialized share-partition."""
        image = self._image()
        wanted: list[tuple[uuid.UUID, str, list[int]]] = []
        unknown: list[dict[str, Any]] = []
        if topics is None:
            try:
                parts = await self.groups.read_committed(
                    group_id, lambda s: A.initialized_partitions(s, group_id))
            except NotReady as exc:
                return _group_error(group_id, exc.code)
            except LogError:  # what it read was not committed: the client asks again
                return _group_error(group_id, E.not_coordinator)
            for t, ps in parts.items():
                topic = image.topic_by_id(t)
                if topic is not None:
                    wanted.append((t, topic.name, ps))
        else:
            for name, ps in topics:
                topic = image.topic(name)
                if topic is None:  # absence of data, not an error (Kafka)
                    unknown.append({"topic_name": name, "topic_id": ZERO_UUID, "partitions": [
                        _partition(p, UNINITIALIZED, DEFAULT_LEADER_EPOCH, UNINITIALIZED)
                        for p in ps]})
                else:
                    wanted.append((topic.topic_id, name, list(ps)))
        out = []
        for t, name, ps in wanted:
            rows = []
            for p in ps:
                summary = await self.state.read_summary(group_id, t, p)
                if summary.error_code:
                    rows.append(_partition(p, UNINITIALIZED, DEFAULT_LEADER_EPOCH,
                                           UNINITIALIZED))
                    continue
                lag = UNINITIALIZED
                if summary.start_offset != UNINITIALIZED \
                        and summary.delivery_complete_count != UNINITIALIZED:
                    end = await self._high_watermark(name, p)
                    if end is not None:
                        lag = end - summary.start_offset - summary.delivery_complete_count
                rows.append(_partition(p, summary.start_offset, summary.leader_epoch, lag))
            out.append({"topic_name": name, "topic_id": t, "partitions": rows})
        return {"group_id": group_id, "topics": out + unknown, "error_code": 0,
                "error_message": None}

    async def _high_watermark(self, topic: str, partition: int) -> int | None:
        plog = self._partitions.partition(topic, partition)
        if plog is not None:
            return plog.high_watermark
        if self._end_offset is None:
            return None
        return await self._end_offset(topic, partition)

    # ---- alter ---------------------------------------------------------------------
    async def alter(self, group_id: str, topics: list[tuple[str, list[tuple[int, int]]]]
                    ) -> tuple[int, str | None, list[A.TopicRow]]:
        try:
            plan: A.Plan = await self.groups.write_committed(
                group_id, lambda s, now: A.alter_offsets(s, group_id, topics))
        except A.AdminError as exc:
            return exc.code, exc.message, []
        except NotReady as exc:
            return exc.code, None, []
        except LogError:
            return E.not_coordinator, None, []
        by_id = {row.topic_id: row for row in plan.rows}
        for t, p, offset in plan.initialize:
            summary = await self.state.read_summary(group_id, t, p)
            epoch = summary.state_epoch + 1 if summary.error_code == 0 else 0
            code = summary.error_code or await self.state.initialize(group_id, t, p, epoch,
                                                                      offset)
            self._forget(group_id, t, p)  # a stale leader is fenced by the new epoch
            if code:
                by_id[t].partitions[p] = (code, None)
        return 0, None, plan.rows

    # ---- delete --------------------------------------------------------------------
    async def _delete_state(self, group_id: str, plan: dict[uuid.UUID, list[int]]
                            ) -> dict[uuid.UUID, int]:
        """State tombstones per partition; topic -> first error (0: all deleted)."""
        if plan:
            self._faults.hit(SHARE_AFTER_PENDING_DELETION)
        errors: dict[uuid.UUID, int] = {}
        for t, ps in plan.items():
            errors[t] = 0
            for p in ps:
                code = await self.state.delete(group_id, t, p)
                self._forget(group_id, t, p)
                if code and not errors[t]:
                    errors[t] = code
        return errors

    async def delete_offsets(self, group_id: str, names: list[str]
                             ) -> tuple[int, str | None, list[A.TopicRow]]:
        try:
            plan: A.Plan = await self.groups.write_committed(
                group_id, lambda s, now: A.delete_offsets(s, group_id, names))
        except A.AdminError as exc:
            return exc.code, exc.message, []
        except NotReady as exc:
            return exc.code, None, []
        except LogError:
            return E.not_coordinator, None, []
        errors = await self._delete_state(group_id, plan.delete)
        done = [t for t, code in errors.items() if code == 0]
        try:
            await self.groups.write_committed(
                group_id, lambda s, now: A.complete_deletion(s, group_id, done))
        except NotReady as exc:
            return exc.code, None, []
        except LogError:
            return E.not_coordinator, None, []
        for row in plan.rows:
            if errors.get(row.topic_id):
                row.error_code = errors[row.topic_id]
        return 0, None, plan.rows

    async def delete_group(self, group_id: str) -> int | None:
        """DeleteGroups for a share group: None when the group is not one (the generic
        path answers), else the code of the first failing step (0: the caller writes
        the group's tombstones, the last step)."""
        try:
            plan: A.Plan | None = await self.groups.write_committed(
                group_id, lambda s, now: A.delete_group_state(s, group_id))
        except A.AdminError as exc:
            return exc.code
        except LogError:
            return E.not_coordinator
        if plan is None:
            return None
        errors = await self._delete_state(group_id, plan.delete)
        failed = [code for code in errors.values() if code]
        return failed[0] if failed else 0

    # ---- recovery ------------------------------------------------------------------
    async def finish_pending(self, partition: int, deadline_s: float = 60.0) -> None:
        """Deletions begun before a crash on this group shard: delete the state again
        (idempotent), then write the completing record."""
        pending = self.groups.runtime.read(partition, A.pending_deletions)
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        for group_id, plan in pending.items():
            while True:
                errors = await self._delete_state(group_id, plan)
                done = [t for t, code in errors.items() if code == 0]
                try:
                    self.groups.write(group_id, _completion(group_id, done))
                except NotReady:
                    done = []
                if len(done) == len(plan) or loop.time() > end:
                    break
                await asyncio.sleep(0.1)  # the share coordinator is still loading
            log.info("share group %s: finished an interrupted state deletion (%d topics)",
                     group_id, len(done))


def _partition(index: int, start: int, leader_epoch: int, lag: int) -> dict[str, Any]:
    return {"partition_index": index, "start_offset": start, "leader_epoch": leader_epoch,
            "lag": lag, "error_code": 0, "error_message": None}


def _group_error(group_id: str, code: int) -> dict[str, Any]:
    return {"group_id": group_id, "topics": [], "error_code": code, "error_message": None}


def _completion(group_id: str, done: list[uuid.UUID]) -> Callable[[GroupShard, int], Result]:
    """The operation writing that `done` topics' state deletion completed."""
    def op(shard: GroupShard, now: int) -> Result:
        return A.complete_deletion(shard, group_id, done)
    return op
