"""Produce (key 0): the write hot path, as a service the handler calls (`api/produce.py`).

Per partition the client's RecordBatch bytes go to the partition log untouched
except for the base offset (and LogAppendTime): no per-record Python work. All
appends of a request happen before the first await, so pipelined produce requests
on one connection append in order (idempotent sequences depend on it); a request that
must await first (a transaction coordinator on another broker) holds the requests after
it on the connection until it has appended (`APPEND_TAIL`).

A batch rejected for some of its records (null keys on a compacted topic, timestamps
out of bounds) lists them in `record_errors` with Kafka's messages (KIP-467), so
librdkafka fails exactly those records (INVALID_RECORD / INVALID_TIMESTAMP) and the
rest of the batch with _INVALID_DIFFERENT_RECORD, which the application may resend.

Transactions: a request carrying a transactional batch must name its transactional id,
or every partition fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing is
written (Kafka's check, which reads one attribute byte per batch). A transactional id
with plain batches is accepted, as in Kafka. Whether a transactional batch may open or
continue a transaction is the partition log's decision (INVALID_TXN_STATE etc.).

Transaction verification (KIP-890 parts 1 and 2: may a transactional batch open a
transaction on a partition) is `txn/verification.py`'s.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..metadata.image import MetadataImage, TopicImage
from ..metadata.topics import INTERNAL_TOPICS
from ..records.batch import has_transactional_batch, parse_header
from ..security import acl as A
from ..storage.errors import CommitError, LogError
from ..storage.partition import Partition
from ..storage.store import PartitionStore
from ..txn.verification import FIRST_TV2_PRODUCE, ProduceVerification, RemoteVerification
from ..wire.dispatch import RequestContext

log = logging.getLogger("headwater.produce")
ZERO_UUID = uuid.UUID(int=0)
ADMIN_CLIENT_ID = "__admin_client"  # Kafka lets only this client id write internal topics
#: Connection attribute: done once the latest produce request that awaited has appended.
APPEND_TAIL = "produce.append_tail"


class WriteAccess(Protocol):
    """Who may write what (ACLs; `enabled` False: everyone may)."""

    @property
    def enabled(self) -> bool: ...

    def allowed(self, ctx: RequestContext, op: int, rtype: int, name: str) -> bool: ...


class ProduceService:
    """Appends a Produce request's batches and answers once they are durable.

    `in_sync(topic, partition)`: the in-sync replicas of a partition led here (one on
    one node; on the shared log as many live brokers as its replication factor).
    `throttle(ctx, bytes)`: the produce quota's throttle time. `transactions`: whether
    this broker has a transaction coordinator (implicit adds of transaction version 2).
    `ack_early`: the planted bug of `faults.py` (acknowledge before the commit), with
    `hit` called each time it fires."""

    def __init__(self, store: PartitionStore, image: Callable[[], MetadataImage],
                 access: WriteAccess, verification: ProduceVerification,
                 in_sync: Callable[[TopicImage, int], int],
                 throttle: Callable[[RequestContext, int], int],
                 now_ms: Callable[[], int], *, transactions: bool,
                 ack_early: bool = False, hit: Callable[[], None] = lambda: None) -> None:
        self._store, self._image, self._access = store, image, access
        self._verification, self._in_sync, self._throttle = verification, in_sync, throttle
        self._now_ms, self._transactions = now_ms, transactions
        self._ack_early, self._hit = ack_early, hit

    # ---- the request ----------------------------------------------------------------
    def handle(self, ctx: RequestContext, req: Any) -> Any:
        """None (acks=0), the response, or an awaitable of it."""
        acks = req.acks
        if getattr(req, "transactional_id", None) is None and any(
                has_transactional_batch(pd.records) for td in req.topic_data
                for pd in td.partition_data if pd.records):
            return None if acks == 0 else reject_all(req, E.transactional_id_authorization_failed)
        txn_id = getattr(req, "transactional_id", None)
        access = self._access
        if access.enabled and txn_id is not None and not access.allowed(
                ctx, A.WRITE, A.TRANSACTIONAL_ID, txn_id):
            return None if acks == 0 else reject_all(req, E.transactional_id_authorization_failed)
        verification = self._verification
        remote = verification.remote
        wanted: dict[tuple[int, int], list[tuple[str, int]]] = {}
        if (verification.enabled and txn_id is not None and remote is not None
                and remote.coordinator_elsewhere(txn_id)):
            wanted = self._unverified(ctx, req)
        tail: asyncio.Future[None] | None = ctx.attrs.get(APPEND_TAIL)
        if not wanted and (tail is None or tail.done()):
            return self._produce(ctx, req, None)
        # This request awaits (a remote verification, or an earlier request's) before it
        # appends: the requests after it on the connection append after it.
        appended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ctx.attrs[APPEND_TAIL] = appended
        return self._in_order(ctx, req, txn_id, remote if wanted else None, wanted, tail,
                              appended)

    def _unverified(self, ctx: RequestContext, req: Any
                    ) -> dict[tuple[int, int], list[tuple[str, int]]]:
        """The partitions of the request a producer writes transactionally with no
        transaction open there (what KIP-890 verifies), by producer and epoch."""
        wanted: dict[tuple[int, int], list[tuple[str, int]]] = {}
        image, access = self._image(), self._access
        for td in req.topic_data:
            topic, _ = resolve(image, td)
            if topic is None or topic.name in INTERNAL_TOPICS or (
                    access.enabled and not access.allowed(ctx, A.WRITE, A.TOPIC, topic.name)):
                continue
            for pd in td.partition_data:
                if not pd.records or not has_transactional_batch(pd.records):
                    continue
                plog = self._store.partition(topic.name, pd.index)
                h = parse_header(pd.records)
                if plog is None or plog.in_transaction(h.producer_id, h.producer_epoch):
                    continue
                wanted.setdefault((h.producer_id, h.producer_epoch), []).append(
                    (topic.name, pd.index))
        return wanted

    async def _in_order(self, ctx: RequestContext, req: Any, txn_id: str | None,
                        remote: RemoteVerification | None,
                        wanted: dict[tuple[int, int], list[tuple[str, int]]],
                        previous: asyncio.Future[None] | None,
                        appended: asyncio.Future[None]) -> Any:
        """Produce once the connection's earlier requests have appended, after asking the
        transaction coordinator on another broker (`remote`, one request) about the
        partitions a transaction does not cover yet. Pipelined requests of one producer
        append in the order sent, as their sequences require, even when the remote
        answers come back in another order."""
        try:
            added = None
            if remote is not None and txn_id is not None:
                added = await remote.verify(txn_id, wanted,
                                            add=ctx.api_version >= FIRST_TV2_PRODUCE)
            if previous is not None:
                await previous
            result = self._produce(ctx, req, added)
        finally:
            if not appended.done():
                appended.set_result(None)
        return await result if asyncio.iscoroutine(result) else result

    def _produce(self, ctx: RequestContext, req: Any,  # noqa: C901
                 added: dict[tuple[str, int], int] | None) -> Any:
        acks = req.acks
        txn_id = getattr(req, "transactional_id", None)
        access, store, verification = self._access, self._store, self._verification
        image = self._image()
        now = self._now_ms()
        appended: list[Partition] = []
        topics_out = []
        if added is None:
            added = (verification.add_implicitly(txn_id, self._unverified(ctx, req))
                     if verification.enabled and txn_id is not None and self._transactions
                     and ctx.api_version >= FIRST_TV2_PRODUCE else {})
        for td in req.topic_data:
            topic_id = getattr(td, "topic_id", None)
            topic, missing = resolve(image, td)
            parts_out = []
            name = topic.name if topic is not None else getattr(td, "name", None)
            if access.enabled and name is not None and not access.allowed(
                    ctx, A.WRITE, A.TOPIC, name):
                topic, missing = None, E.topic_authorization_failed
            for pd in td.partition_data:
                if acks not in (0, 1, -1):
                    parts_out.append(partition_error(pd.index, E.invalid_required_acks))
                    continue
                plog = store.partition(topic.name, pd.index) if topic is not None else None
                if plog is None:
                    parts_out.append(partition_error(
                        pd.index, missing if topic is None
                        else store.absent_error(topic.name, pd.index)))
                    continue
                assert topic is not None
                if topic.name in INTERNAL_TOPICS and ctx.client_id != ADMIN_CLIENT_ID:
                    # Kafka's rule: the coordinators' logs are theirs; a client's records
                    # there would be replayed as group or transaction state.
                    parts_out.append(partition_error(
                        pd.index, E.invalid_topic_exception,
                        f"Cannot append to internal topic {topic.name}"))
                    continue
                if acks == -1 and plog.config.min_insync_replicas > 1:
                    isr = self._in_sync(topic, pd.index)
                    if plog.config.min_insync_replicas > isr:
                        parts_out.append(partition_error(
                            pd.index, E.not_enough_replicas,
                            f"min.insync.replicas={plog.config.min_insync_replicas} but "
                            f"the in-sync replica set has {isr} member(s)"))
                        continue
                records = pd.records
                if not records:
                    parts_out.append(partition_error(pd.index, E.corrupt_message,
                                                     "empty record set"))
                    continue
                refused = verification.refusal(txn_id, topic.name, plog, records,
                                               ctx.api_version, added)
                if refused is not None:
                    log.info("produce to %s-%d refused: %s", topic.name, pd.index, refused[1])
                    parts_out.append(partition_error(pd.index, *refused))
                    continue
                try:
                    result = plog.append(records, now)
                except LogError as exc:
                    if exc.code not in (E.out_of_order_sequence_number,
                                        E.invalid_producer_epoch, E.invalid_txn_state):
                        log.info("produce to %s-%d rejected: %s", topic.name, pd.index,
                                 exc.message)
                    parts_out.append(partition_error(
                        pd.index, exc.code, exc.message,
                        getattr(exc, "record_errors", ())))
                    continue
                # A duplicate too: its original may not be durable yet (the storage
                # contract acknowledges only what `commit` covered).
                appended.append(plog)
                parts_out.append({
                    "index": pd.index, "error_code": 0, "base_offset": result.base_offset,
                    "log_append_time": (result.log_append_time
                                        if result.log_append_time >= 0 else None),
                    "log_start_offset": result.log_start_offset, "record_errors": (),
                    "error_message": None})
            topics_out.append({"name": getattr(td, "name", None) or (topic.name if topic
                                                                      else ""),
                               "topic_id": topic_id or ZERO_UUID,
                               "partition_responses": parts_out})
        throttle = self._throttle(ctx, sum(len(pd.records) for td in req.topic_data
                                           for pd in td.partition_data if pd.records))
        durable = store.commit(appended) if appended else None
        if acks == 0:
            if durable is not None:  # nobody waits, but it must still be committed
                asyncio.ensure_future(durable).add_done_callback(_ignore_outcome)
            return None
        response = {"responses": topics_out, "throttle_time": throttle}
        if durable is not None:
            if self._ack_early:  # the planted bug of faults.py: acknowledged, not durable
                self._hit()
                asyncio.ensure_future(durable).add_done_callback(_ignore_outcome)
                return response
            return once_durable(response, durable, req.timeout.total_seconds())
        return response


async def once_durable(response: dict[str, Any], durable: Awaitable[None],
                       timeout_s: float) -> dict[str, Any]:
    """The response once the appends are durable; partitions whose commit failed
    answer its (retriable) error instead of their offsets: never acknowledged.

    Not later than the request's timeout, as Kafka's delayed produce: past it the
    written partitions answer REQUEST_TIMED_OUT (the commit goes on; a retry of the
    same sequence finds the batch if it lands). A stall past the client's own
    request timeout is worse: librdkafka then counts the batch possibly persisted,
    bumps its epoch and sends it again under new sequence numbers, a duplicate no
    broker can recognise (the 30-minute campaign's 29, docs/operations.md)."""
    waiting = asyncio.ensure_future(durable)
    try:
        if timeout_s > 0:
            await asyncio.wait_for(asyncio.shield(waiting), timeout_s)
        else:
            await waiting
    except CommitError as exc:
        _fail(response, exc.failed, exc.code, exc.message)
    except TimeoutError:
        waiting.add_done_callback(_ignore_outcome)
        _fail(response, None, E.request_timed_out,
              f"not durable within the request's timeout ({timeout_s * 1000:.0f} ms)")
    return response


def resolve(image: MetadataImage, td: Any) -> tuple[TopicImage | None, int]:
    """A request topic's image entry (None if unknown) and the error for unknown."""
    topic_id = getattr(td, "topic_id", None)
    if topic_id is not None or not hasattr(td, "name"):
        # v13 names topics by id only; a zero id (kio's None) is an unknown id.
        topic = image.topic_by_id(topic_id) if topic_id is not None else None
        return topic, E.unknown_topic_id
    return image.topic(td.name), E.unknown_topic_or_partition


def partition_error(index: int, code: int, message: str | None = None,
                    record_errors: Sequence[tuple[int, str]] = ()) -> dict[str, Any]:
    return {"index": index, "error_code": code, "base_offset": -1,
            "log_append_time": None, "log_start_offset": -1,
            "record_errors": [{"batch_index": i, "batch_index_error_message": m}
                              for i, m in record_errors],
            "error_message": message}


def reject_all(req: Any, code: int) -> dict[str, Any]:
    """The whole request fails with `code` (Kafka's request-level produce errors)."""
    return {"throttle_time": 0, "responses": [{
        "name": getattr(td, "name", None) or "",
        "topic_id": getattr(td, "topic_id", None) or ZERO_UUID,
        "partition_responses": [partition_error(pd.index, code)
                                for pd in td.partition_data]}
        for td in req.topic_data]}


def _fail(response: dict[str, Any], failed: Any, code: int, message: str) -> None:
    """Partitions (all written ones when `failed` is None) answer `code`, no offset."""
    for topic in response["responses"]:
        for entry in topic["partition_responses"]:
            if entry["error_code"] == 0 and (
                    failed is None or (topic["name"], entry["index"]) in failed):
                entry.update(error_code=code, base_offset=-1, log_append_time=None,
                             log_start_offset=-1, error_message=message)


def _ignore_outcome(future: asyncio.Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.debug("an unawaited commit failed: %s", future.exception())
