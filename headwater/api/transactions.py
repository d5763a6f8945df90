"""Transaction APIs over the transaction coordinator (`headwater.txn`).

AddPartitionsToTxn (24; v0-3 from clients, v4+ the batched form brokers send, with
verify-only entries), AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers (27, the path an
operator's abort of a hanging transaction takes; in a cluster also a coordinator asking,
by its client id, that the marker be held for it to commit together with the
transaction's others: shared/marker_holds.py), TxnOffsetCommit (28, through the group
coordinator: the offsets are written under the producer's id and epoch and stay pending
until the transaction's marker), DescribeTransactions (65) and ListTransactions (66).
InitProducerId with a transactional id is in `producers.py`.

Older request versions predate PRODUCER_FENCED (KIP-588) and get INVALID_PRODUCER_EPOCH.

Transaction version 2 (KIP-890 part 2, see docs/transactions-v2.md): the client's version
comes from the request's version, as Kafka derives it (TransactionVersion
.transactionVersionForEndTxn / ...ForAddPartitionsToTxn), never from the cluster's
finalized level: EndTxn v5+ bumps the epoch and answers the producer id and epoch to
continue with; AddPartitionsToTxn v4+ (the brokers' batched form) adds as a version 2
client; TxnOffsetCommit v5+ adds the group's `__consumer_offsets` partition to the
transaction itself, since such a client sends no AddOffsetsToTxn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import re2
from kio.schema.errors import ErrorCode as E
from kio.schema.list_transactions.v2.request import ListTransactionsRequest
from kio.schema.txn_offset_commit.v5.request import TxnOffsetCommitRequest
from kio.schema.write_txn_markers.v2.request import WriteTxnMarkersRequest

from ..coordinator.runtime import NotReady, landed
from ..group.offsets import PartitionCommit
from ..security import acl as A
from ..txn.coordinator import OFFSETS_TOPIC
from ..txn.state import TxnState
from ..wire.dispatch import Dispatcher, RequestContext, typed
from .committed import Pending, not_coordinator, once_committed
from .services import HasAccess, HasCluster, HasGroups, HasImage, HasTransactions

if TYPE_CHECKING:
    from ..txn.coordinator import TransactionCoordinator

TopicPartition = tuple[str, int]

FIRST_TV2_END_TXN = 5  # EndTxn v5+: the client speaks transaction version 2
FIRST_TV2_ADD_PARTITIONS = 4  # AddPartitionsToTxn v4+ (the brokers' batched form)


class Services(HasAccess, HasImage, HasCluster, HasGroups, HasTransactions, Protocol):
    """What these handlers use of the broker."""


def fenced_as(code: int, version: int, first_version: int) -> int:
    """PRODUCER_FENCED for versions that know it, INVALID_PRODUCER_EPOCH before."""
    if code == E.producer_fenced and version < first_version:
        return E.invalid_producer_epoch
    return code


#: How long EndTxn waits for its markers before answering anyway (the Prepare* record is
#: durable, so the transaction completes regardless: a coordinator that moved finishes it).
END_TXN_MARKERS_WAIT_S = 5.0
#: How long a confirmation of committed markers waits for the owner to take them in.
CONFIRM_WAIT_S = 3.0


def _after_markers(coordinator: TransactionCoordinator, txn_id: str,
                   answer: dict[str, Any]) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    """`answer` once the Prepare* record is committed (in a cluster) and then `txn_id`'s
    markers are written (`TransactionCoordinator.completion`)."""
    committed = coordinator.pending_commits(txn_id)
    markers = coordinator.completion(txn_id) if committed is None else None
    if committed is None and markers is None:
        return answer

    async def wait() -> dict[str, Any]:
        nonlocal markers
        if committed is not None:
            if not await landed([committed]):
                return not_coordinator(answer)
            markers = coordinator.completion(txn_id)
        if markers is not None:
            try:
                await asyncio.wait_for(markers, END_TXN_MARKERS_WAIT_S)
            except TimeoutError:
                pass
        return answer
    return wait()


def by_topic(codes: dict[TopicPartition, int]) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = {}
    for (topic, partition), code in codes.items():
        out.setdefault(topic, {})[partition] = code
    return out


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def coordinator(self) -> TransactionCoordinator:
        return self.broker.transactions

    def call(self, fn: Callable[[], int]) -> int:
        try:
            return fn()
        except NotReady as exc:
            return exc.code

    def known(self, topic: str, partition: int) -> bool:
        t = self.broker.image.topic(topic)
        return t is not None and 0 <= partition < len(t.partitions)

    # ---- AddPartitionsToTxn --------------------------------------------------------
    def add_or_verify(self, ctx: RequestContext, txn_id: str, pid: int, epoch: int,
                      verify_only: bool, topics: Any, version: int
                      ) -> dict[TopicPartition, int]:
        parts = [(t.name, int(p)) for t in topics for p in t.partitions]
        access = self.broker.access
        if access.denies(ctx, A.WRITE, A.TRANSACTIONAL_ID, txn_id):
            return {tp: E.transactional_id_authorization_failed for tp in parts}
        refused = {tp for tp in parts if access.denies(ctx, A.WRITE, A.TOPIC, tp[0])}
        if refused:
            return {tp: E.topic_authorization_failed if tp in refused
                    else E.operation_not_attempted for tp in parts}
        missing = {tp for tp in parts if not self.known(*tp)}
        if missing:
            return {tp: E.unknown_topic_or_partition if tp in missing
                    else E.operation_not_attempted for tp in parts}
        if verify_only:
            try:
                codes = self.coordinator().verify_partitions(txn_id, pid, epoch, parts)
            except NotReady as exc:
                return {tp: exc.code for tp in parts}
            return {tp: fenced_as(c, version, 2) for tp, c in codes.items()}
        client_tv = 2 if version >= FIRST_TV2_ADD_PARTITIONS else 0
        code = self.call(lambda: self.coordinator().add_partitions(txn_id, pid, epoch, parts, client_tv))
        code = fenced_as(code, version, 2)
        return {tp: code for tp in parts}

    def topic_results(self, codes: dict[TopicPartition, int]) -> list[dict[str, Any]]:
        return [{"name": topic, "results_by_partition": [
            {"partition_index": p, "partition_error_code": c} for p, c in parts.items()]}
            for topic, parts in by_topic(codes).items()]

    def handle_add_partitions(self, ctx: RequestContext, req: Any
                              ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        """Answered once what each transaction added (or what a verification read) is
        committed."""
        if ctx.api_version <= 3:
            txn_id = req.v3_and_below_transactional_id
            codes = self.add_or_verify(ctx, txn_id, req.v3_and_below_producer_id,
                                       req.v3_and_below_producer_epoch, False,
                                       req.v3_and_below_topics, ctx.api_version)
            return once_committed(
                {"throttle_time": 0, "results_by_topic_v3_and_below": self.topic_results(codes)},
                self.pending(txn_id))
        results, pending = [], []
        for txn in req.transactions:
            codes = self.add_or_verify(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                       txn.verify_only, txn.topics, ctx.api_version)
            pending.append(self.pending(txn.transactional_id))
            results.append({"transactional_id": txn.transactional_id,
                            "topic_results": self.topic_results(codes)})
        return once_committed(
            {"throttle_time": 0, "error_code": 0, "results_by_transaction": results}, *pending)

    def pending(self, txn_id: str) -> Pending:
        """The commits pending on `txn_id`'s partition (None when none waits)."""
        return self.coordinator().pending_commits(txn_id)

    # ---- AddOffsetsToTxn / EndTxn --------------------------------------------------
    def txn_refused(self, ctx: RequestContext, transactional_id: str,
                    group_id: str | None = None) -> int:
        """WRITE on the transactional id, READ on the group (when the request names one)."""
        if self.broker.access.denies(ctx, A.WRITE, A.TRANSACTIONAL_ID, transactional_id):
            return E.transactional_id_authorization_failed
        if group_id is not None and self.broker.access.denies(ctx, A.READ, A.GROUP, group_id):
            return E.group_authorization_failed
        return 0

    def handle_add_offsets(self, ctx: RequestContext, req: Any
                           ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        refused = self.txn_refused(ctx, req.transactional_id, req.group_id)
        if refused:
            return {"throttle_time": 0, "error_code": refused}

        def add() -> int:
            partition = self.broker.groups.partition_for(req.group_id)
            return self.coordinator().add_partitions(req.transactional_id, req.producer_id,
                                                     req.producer_epoch,
                                                     [(OFFSETS_TOPIC, partition)])
        return once_committed({"throttle_time": 0,
                               "error_code": fenced_as(self.call(add), ctx.api_version, 2)},
                              self.pending(req.transactional_id))

    def handle_end_txn(self, ctx: RequestContext, req: Any) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        refused = self.txn_refused(ctx, req.transactional_id)
        if refused:
            return {"throttle_time": 0, "error_code": refused, "producer_id": -1,
                    "producer_epoch": -1}
        client_tv = 2 if ctx.api_version >= FIRST_TV2_END_TXN else 0
        try:
            result = self.coordinator().end_txn(req.transactional_id, req.producer_id,
                                                req.producer_epoch, req.committed, client_tv)
        except NotReady as exc:
            return {"throttle_time": 0, "error_code": exc.code, "producer_id": -1,
                    "producer_epoch": -1}
        answer = {"throttle_time": 0,
                  "error_code": fenced_as(result.error, ctx.api_version, 2),
                  "producer_id": result.producer_id, "producer_epoch": result.producer_epoch}
        if result.error != E.none:
            return answer
        return _after_markers(self.coordinator(), req.transactional_id, answer)

    # ---- TxnOffsetCommit -----------------------------------------------------------
    async def handle_txn_offset_commit(self, ctx: RequestContext, req: TxnOffsetCommitRequest
                                       ) -> dict[str, Any]:
        commits: list[tuple[str, list[PartitionCommit]]] = []
        codes: dict[TopicPartition, int] = {}
        refused = self.txn_refused(ctx, req.transactional_id, req.group_id)
        for t in req.topics:
            parts = []
            denied = refused or (E.topic_authorization_failed if self.broker.access.denies(
                ctx, A.READ, A.TOPIC, t.name) else 0)
            for p in t.partitions:
                if denied:
                    codes[(t.name, p.partition_index)] = denied
                elif self.known(t.name, p.partition_index):
                    parts.append(PartitionCommit(p.partition_index, p.committed_offset,
                                                 p.committed_leader_epoch,
                                                 p.committed_metadata))
                else:
                    codes[(t.name, p.partition_index)] = E.unknown_topic_or_partition
            if parts:
                commits.append((t.name, parts))
        if commits:
            written = self.commit_offsets(req, commits, ctx.api_version)
            if not isinstance(written, dict):  # asked the transaction's coordinator
                written = await written
            for (topic, partition), code in written.items():
                codes[(topic, partition)] = code
        return {"throttle_time": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "error_code": c}
                                           for p, c in parts.items()]}
            for topic, parts in by_topic(codes).items()]}

    def commit_offsets(self, req: TxnOffsetCommitRequest,
                       commits: list[tuple[str, list[PartitionCommit]]],
                       version: int
                       ) -> dict[TopicPartition, int] | Awaitable[dict[TopicPartition, int]]:
        return self.broker.txn_offsets.commit(
            req.transactional_id, req.producer_id, req.producer_epoch, req.group_id,
            req.member_id, req.group_instance_id, req.generation_id, commits, version)

    # ---- WriteTxnMarkers -----------------------------------------------------------
    async def handle_write_markers(self, ctx: RequestContext, req: WriteTxnMarkersRequest
                                   ) -> dict[str, Any]:
        """Answered once every marker is committed (the coordinator that sent them then
        completes the transaction)."""
        results = []
        refused = self.broker.access.denies(ctx, A.CLUSTER_ACTION, A.CLUSTER, A.CLUSTER_NAME)
        held = self.broker.cluster is not None and self.broker.cluster.asks_to_hold(ctx.client_id)
        confirm = (self.broker.cluster is not None
                   and self.broker.cluster.asks_to_confirm(ctx.client_id))
        for marker in req.markers:
            topics = []
            for t in marker.topics:
                parts = []
                for p in t.partition_indexes:
                    if refused:
                        parts.append({"partition_index": p,
                                      "error_code": E.cluster_authorization_failed})
                        continue
                    tv = marker.transaction_version  # 0 before v2
                    if confirm:  # the markers held here are committed: take them in
                        assert self.broker.cluster is not None
                        code = await self.broker.cluster.confirm_marker(
                            t.name, p, marker.producer_id, marker.producer_epoch,
                            marker.transaction_result, CONFIRM_WAIT_S)
                        parts.append({"partition_index": p, "error_code": code})
                        continue
                    if held:  # a coordinator of the cluster commits it with the others
                        assert self.broker.cluster is not None
                        answer = self.broker.cluster.hold_marker(
                            t.name, p, marker.producer_id, marker.producer_epoch,
                            marker.transaction_result, marker.coordinator_epoch, tv)
                        code = answer if isinstance(answer, int) else await answer
                        parts.append({"partition_index": p, "error_code": code})
                        continue
                    try:
                        code = await self.coordinator().write_marker(
                            t.name, p, marker.producer_id, marker.producer_epoch,
                            marker.transaction_result, marker.coordinator_epoch, tv)
                    except NotReady as exc:
                        code = exc.code
                    parts.append({"partition_index": p, "error_code": code})
                topics.append({"name": t.name, "partitions": parts})
            results.append({"producer_id": marker.producer_id, "topics": topics})
        return {"markers": results}

    # ---- DescribeTransactions / ListTransactions -----------------------------------
    def handle_describe(self, ctx: RequestContext, req: Any
                        ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        """Answered once what it read is committed."""
        states, pending = [], []
        for txn_id in req.transactional_ids:
            if self.broker.access.denies(ctx, A.DESCRIBE, A.TRANSACTIONAL_ID, txn_id):
                states.append({"error_code": E.transactional_id_authorization_failed,
                               "transactional_id": txn_id, "transaction_state": "",
                               "transaction_timeout": 0, "transaction_start_time": 0,
                               "producer_id": -1, "producer_epoch": -1, "topics": ()})
                continue
            try:
                states.append(self.coordinator().describe(txn_id))
                pending.append(self.pending(txn_id))
            except NotReady as exc:
                states.append({"error_code": exc.code, "transactional_id": txn_id,
                               "transaction_state": "", "transaction_timeout": 0,
                               "transaction_start_time": 0, "producer_id": -1,
                               "producer_epoch": -1, "topics": ()})
        return once_committed({"throttle_time": 0, "transaction_states": states}, *pending)

    def handle_list(self, ctx: RequestContext, req: ListTransactionsRequest
                    ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        """Answered once what it read, on every partition, is committed."""
        wanted: set[TxnState] = set()
        unknown = []
        for name in req.state_filters:
            state = TxnState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                wanted.add(state)
        duration = req.duration_filter  # -1 (none) before v1
        pattern = req.transactional_id_pattern
        error, found = 0, []
        if unknown and not wanted:
            pass  # only unknown states asked for: nothing can match
        else:
            try:
                found = self.coordinator().list_transactions(
                    wanted, set(req.producer_id_filters), duration, pattern or None)
            except NotReady as exc:
                error = exc.code
            except re2.error:
                error = E.invalid_request  # a pattern RE2 cannot compile
        if self.broker.access.enabled:
            found = [t for t in found if self.broker.access.allowed(
                ctx, A.DESCRIBE, A.TRANSACTIONAL_ID, t["transactional_id"])]
        return once_committed({"throttle_time": 0, "error_code": error,
                               "unknown_state_filters": unknown, "transaction_states": found},
                              self.coordinator().pending_commits())


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(24, 0, 5, handlers.handle_add_partitions)
    dispatcher.register(25, 0, 4, handlers.handle_add_offsets)
    dispatcher.register(26, 0, 5, handlers.handle_end_txn)
    dispatcher.register(27, 1, 2, typed(WriteTxnMarkersRequest, handlers.handle_write_markers))
    dispatcher.register(28, 0, 5, typed(TxnOffsetCommitRequest,
                                        handlers.handle_txn_offset_commit))
    dispatcher.register(65, 0, 0, handlers.handle_describe)
    dispatcher.register(66, 0, 2, typed(ListTransactionsRequest, handlers.handle_list))
