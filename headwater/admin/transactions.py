"""`headwater transactions ...`: list, describe and abort transactions.

Like Kafka's kafka-transactions tool. `abort` has two forms:

* `abort --topic T --partition P --producer-id PID --producer-epoch E
  --coordinator-epoch C` (or `--start-offset O` to look the producer up with
  DescribeProducers) writes an ABORT marker to that one partition with WriteTxnMarkers,
  for a *hanging* transaction: one the coordinator does not know about that holds the
  partition's last stable offset back.
* `abort ID` aborts the ongoing transaction of a transactional id through its
  coordinator: an InitProducerId for the id fences the current producer (epoch + 1) and
  aborts what it left open, as a new producer instance would. A producer still using the
  id afterwards is fenced; restarting it (init_transactions) is how it continues.
"""

from __future__ import annotations

import argparse
import struct
import time
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from ..wire.client import RawClient, encode_request
from ..wire.header import read_uvarint, skip_tagged_fields
from .connect import add_arguments
from .groups import AdminError, _client
from .routing import TRANSACTION, Routed
from .tables import emit


class TxnDescription(NamedTuple):
    error_code: int
    transactional_id: str
    transaction_state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    producer_id: int
    producer_epoch: int
    partitions: list[tuple[str, int]]


def describe_transaction(client: RawClient | Routed, txn_id: str, check: bool = True
                         ) -> TxnDescription:
    """DescribeTransactions v0 for one id (AdminError on an error code if `check`).
    Decoded here rather than by kio: kio refuses the -1 start time Kafka sends for a
    transactional id with no transaction yet."""
    if isinstance(client, Routed):  # to the transactional id's coordinator
        client = client.coordinator(txn_id, TRANSACTION)
    client.send_bytes(encode_request(65, 0, {"transactional_ids": [txn_id]}))
    buf = client.recv_frame()
    pos = skip_tagged_fields(buf, 4) + 4  # correlation id, header tags, throttle time
    count, pos = read_uvarint(buf, pos)
    if count != 2:
        raise AdminError(f"unexpected DescribeTransactions answer ({count - 1} entries)")
    (error,), pos = struct.unpack_from(">h", buf, pos), pos + 2
    tid, pos = _compact_string(buf, pos)
    state, pos = _compact_string(buf, pos)
    timeout, start, pid, epoch = struct.unpack_from(">iqqh", buf, pos)
    pos += 22
    partitions = []
    topics, pos = read_uvarint(buf, pos)
    for _ in range(topics - 1):
        topic, pos = _compact_string(buf, pos)
        n, pos = read_uvarint(buf, pos)
        partitions += [(topic, p) for p in struct.unpack_from(f">{n - 1}i", buf, pos)]
        pos = skip_tagged_fields(buf, pos + 4 * (n - 1))
    if error and check:
        name = ErrorCode(error).name
        raise AdminError(f"transactional id {txn_id}: error {name.upper()}")
    return TxnDescription(error, tid, state, timeout, start, pid, epoch, partitions)


def _compact_string(buf: bytes, pos: int) -> tuple[str, int]:
    n, pos = read_uvarint(buf, pos)
    return buf[pos:pos + n - 1].decode(), pos + max(n - 1, 0)


def cmd_list(args: argparse.Namespace) -> str:
    client = _client(args)
    try:
        resp = client.request(66, 2, {
            "state_filters": args.state or (), "producer_id_filters": args.producer_id or (),
            "duration_filter": args.duration_ms, "transactional_id_pattern": args.pattern})
    finally:
        client.close()
    if int(resp.error_code):
        raise AdminError(f"listing transactions failed: {resp.error_code.name}")
    rows = sorted((t.transactional_id, t.producer_id, t.transaction_state)
                  for t in resp.transaction_states)
    return emit(["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE"], rows, args.json)


def cmd_describe(args: argparse.Namespace) -> str:
    client = _client(args)
    try:
        s = describe_transaction(client, args.transactional_id)
    finally:
        client.close()
    start = s.transaction_start_time_ms
    duration = int(time.time() * 1000) - start if start >= 0 else None
    partitions = ",".join(f"{t}-{p}" for t, p in s.partitions)
    row = (s.transactional_id, s.producer_id, s.producer_epoch, s.transaction_state,
           s.transaction_timeout_ms, start if start >= 0 else None, duration,
           partitions or None)
    return emit(["TRANSACTIONAL-ID", "PRODUCER-ID", "PRODUCER-EPOCH", "STATE", "TIMEOUT-MS",
                 "START-TIME-MS", "DURATION-MS", "PARTITIONS"], [row], args.json)


def _abort_by_id(client: RawClient, txn_id: str, wait_s: float) -> str:
    before = describe_transaction(client, txn_id)
    if before.transaction_state != "Ongoing":
        raise AdminError(f"transactional id {txn_id} has no ongoing transaction "
                         f"(state {before.transaction_state})")
    resp = client.request(22, 4, {"transactional_id": txn_id,
                                  "transaction_timeout": before.transaction_timeout_ms,
                                  "producer_id": -1, "producer_epoch": -1})
    if int(resp.error_code) not in (ErrorCode.concurrent_transactions, ErrorCode.none):
        raise AdminError(f"aborting {txn_id} failed: {resp.error_code.name}")
    deadline = time.monotonic() + wait_s
    while True:
        after = describe_transaction(client, txn_id)
        if after.transaction_state not in ("PrepareAbort", "PrepareCommit"):
            break
        if time.monotonic() > deadline:
            raise AdminError(f"{txn_id} is still {after.transaction_state} after {wait_s}s")
        time.sleep(0.05)
    return (f"Aborted the transaction of {txn_id} (producer {before.producer_id}); state "
            f"{after.transaction_state}, producer epoch now {after.producer_epoch}")


def _find_producer(client: RawClient, topic: str, partition: int, start_offset: int
                   ) -> tuple[int, int, int]:
    resp = client.request(61, 0, {"topics": [{"name": topic, "partition_indexes": [partition]}]})
    part = resp.topics[0].partitions[0]
    if int(part.error_code):
        raise AdminError(f"{topic}-{partition}: error {part.error_code.name}")
    for p in part.active_producers:
        if p.current_txn_start_offset == start_offset:
            return p.producer_id, p.producer_epoch, p.coordinator_epoch
    raise AdminError(f"no open transaction starts at offset {start_offset} in "
                     f"{topic}-{partition}")


def _abort_marker(client: RawClient, args: argparse.Namespace) -> str:
    if args.start_offset is not None:
        pid, epoch, coordinator_epoch = _find_producer(client, args.topic, args.partition,
                                                       args.start_offset)
        coordinator_epoch = max(coordinator_epoch, 0)
    elif None in (args.producer_id, args.producer_epoch, args.coordinator_epoch):
        raise AdminError("give --producer-id, --producer-epoch and --coordinator-epoch, "
                         "or --start-offset")
    else:
        pid, epoch, coordinator_epoch = (args.producer_id, args.producer_epoch,
                                         args.coordinator_epoch)
    resp = client.request(27, 1, {"markers": [{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": False,
        "coordinator_epoch": coordinator_epoch,
        "topics": [{"name": args.topic, "partition_indexes": [args.partition]}]}]})
    code = resp.markers[0].topics[0].partitions[0].error_code
    if int(code):
        raise AdminError(f"writing the ABORT marker failed: {code.name}")
    return (f"Wrote an ABORT marker for producer {pid} (epoch {epoch}) to "
            f"{args.topic}-{args.partition}")


def cmd_abort(args: argparse.Namespace) -> str:
    client = _client(args)
    try:
        if args.transactional_id is not None:
            if args.topic is not None:
                raise AdminError("give a transactional id or --topic/--partition, not both")
            return _abort_by_id(client, args.transactional_id, args.wait)
        if args.topic is None or args.partition is None:
            raise AdminError("give a transactional id, or --topic and --partition")
        return _abort_marker(client, args)
    finally:
        client.close()


def add_parser(sub: Any) -> None:
    txns = sub.add_parser("transactions", help="list, describe and abort transactions")
    add_arguments(txns)
    txns.add_argument("--json", action="store_true", help="machine-readable output")
    tsub = txns.add_subparsers(dest="transactions_command", required=True)
    ls = tsub.add_parser("list")
    ls.add_argument("--state", action="append", help="e.g. Ongoing (repeatable)")
    ls.add_argument("--producer-id", action="append", type=int)
    ls.add_argument("--duration-ms", type=int, default=-1,
                    help="only transactions running longer than this")
    ls.add_argument("--pattern", help="regular expression the transactional id must match")
    ls.set_defaults(func=cmd_list)
    d = tsub.add_parser("describe")
    d.add_argument("transactional_id")
    d.set_defaults(func=cmd_describe)
    a = tsub.add_parser("abort", help="abort an ongoing (ID) or hanging (--topic ...) "
                                      "transaction")
    a.add_argument("transactional_id", nargs="?")
    a.add_argument("--topic")
    a.add_argument("--partition", type=int)
    a.add_argument("--producer-id", type=int)
    a.add_argument("--producer-epoch", type=int)
    a.add_argument("--coordinator-epoch", type=int)
    a.add_argument("--start-offset", type=int,
                   help="find the producer whose open transaction starts here")
    a.add_argument("--wait", type=float, default=10.0,
                   help="seconds to wait for an abort by id to complete")
    a.set_defaults(func=cmd_abort)
