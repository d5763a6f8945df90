"""Produce (key 0): the write hot path.

Per partition the client's RecordBatch bytes go to the partition log untouched
except for the base offset (and LogAppendTime): no per-record Python work. All
appends of a request happen before the first await, so pipelined produce requests
on one connection append in order (idempotent sequences depend on it).

Transactions: a request carrying a transactional batch must name its transactional id,
or every partition fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing is
written (Kafka's check, which reads one attribute byte per batch). A transactional id
with plain batches is accepted, as in Kafka. Whether a transactional batch may open or
continue a transaction is the partition log's decision (INVALID_TXN_STATE etc.).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as E

from ..log.batch import has_transactional_batch
from ..log.errors import LogError
from ..wire.dispatch import Dispatcher, RequestContext

if TYPE_CHECKING:
    from ..broker import Broker
    from ..log.partition_log import PartitionLog

log = logging.getLogger("headwater.produce")
ZERO_UUID = uuid.UUID(int=0)


def register(dispatcher: Dispatcher, broker: Broker) -> None:
    now_ms = broker.now_ms

    def partition_error(index: int, code: int, message: str | None = None) -> dict:
        return {"index": index, "error_code": code, "base_offset": -1,
                "log_append_time": None, "log_start_offset": -1, "record_errors": (),
                "error_message": message}

    def reject_all(req: Any, code: int) -> dict:
        """The whole request fails with `code` (Kafka's request-level produce errors)."""
        return {"throttle_time": 0, "responses": [{
            "name": getattr(td, "name", None) or "",
            "topic_id": getattr(td, "topic_id", None) or ZERO_UUID,
            "partition_responses": [partition_error(pd.index, code)
                                    for pd in td.partition_data]}
            for td in req.topic_data]}

    def handle(ctx: RequestContext, req: Any) -> Any:
        acks = req.acks
        if getattr(req, "transactional_id", None) is None and any(
                has_transactional_batch(pd.records) for td in req.topic_data
                for pd in td.partition_data if pd.records):
            return None if acks == 0 else reject_all(req, E.transactional_id_authorization_failed)
        image = broker.image
        now = now_ms()
        to_flush: list[PartitionLog] = []
        topics_out = []
        for td in req.topic_data:
            topic_id = getattr(td, "topic_id", None)
            if topic_id is not None:
                topic = image.topic_by_id(topic_id)
                missing = E.unknown_topic_id
            else:
                topic = image.topic(td.name)
                missing = E.unknown_topic_or_partition
            parts_out = []
            for pd in td.partition_data:
                if acks not in (0, 1, -1):
                    parts_out.append(partition_error(pd.index, E.invalid_required_acks))
                    continue
                plog = broker.partition(topic.name, pd.index) if topic is not None else None
                if plog is None:
                    parts_out.append(partition_error(pd.index, missing))
                    continue
                if acks == -1 and plog.config.min_insync_replicas > 1:
                    parts_out.append(partition_error(
                        pd.index, E.not_enough_replicas,
                        f"min.insync.replicas={plog.config.min_insync_replicas} but the "
                        "in-sync replica set has 1 member"))
                    continue
                records = pd.records
                if not records:
                    parts_out.append(partition_error(pd.index, E.corrupt_message,
                                                     "empty record set"))
                    continue
                try:
                    result = plog.append(records, now)
                except LogError as exc:
                    if exc.code not in (E.out_of_order_sequence_number,
                                        E.invalid_producer_epoch, E.invalid_txn_state):
                        log.info("produce to %s-%d rejected: %s", topic.name, pd.index,
                                 exc.message)
                    parts_out.append(partition_error(pd.index, exc.code, exc.message))
                    continue
                if plog.needs_flush and not result.duplicate:
                    to_flush.append(plog)
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
        if acks == 0:
            return None
        response = {"responses": topics_out, "throttle_time": 0}
        if to_flush:
            return _flush_then(response, to_flush)
        return response

    async def _flush_then(response: dict, logs: list[PartitionLog]) -> dict:
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(None, plog.flush) for plog in logs))
        return response

    dispatcher.register(0, 3, 13, handle)
