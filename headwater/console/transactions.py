"""The transactions page's data: ListTransactions of every broker (each lists the
transactional ids it coordinates) and DescribeTransactions of each id at its coordinator
(the admin `transactions describe` decoder)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..admin import transactions as admin_txns
from ..admin.groups import AdminError
from .connection import TRANSACTION_KEY, CoordinatorError, Target
from .offsets import brokers


@dataclass(frozen=True)
class Transaction:
    transactional_id: str
    producer_id: int
    producer_epoch: int | None
    state: str
    timeout_ms: int | None
    duration_ms: int | None
    partitions: list[str]


def gather(target: Target) -> list[Transaction]:
    listed: dict[str, tuple[int, str]] = {}
    for server in brokers(target):
        with target.client(server) as raw:
            resp = raw.request(66, 1, {"state_filters": (), "producer_id_filters": (),
                                       "duration_filter": -1})
        if int(resp.error_code):
            raise AdminError(f"ListTransactions: {resp.error_code.name}")
        for t in resp.transaction_states:
            listed[t.transactional_id] = (int(t.producer_id), t.transaction_state)
    now = int(time.time() * 1000)
    out = []
    for txn_id, (pid, state) in sorted(listed.items()):
        try:
            with target.coordinator(txn_id, TRANSACTION_KEY) as raw:
                d = admin_txns.describe_transaction(raw, txn_id)
        except (AdminError, CoordinatorError, OSError):
            out.append(Transaction(txn_id, pid, None, state, None, None, []))
            continue
        start = d.transaction_start_time_ms
        out.append(Transaction(txn_id, d.producer_id, d.producer_epoch, d.transaction_state,
                               d.transaction_timeout_ms, now - start if start >= 0 else None,
                               [f"{t}-{p}" for t, p in d.partitions]))
    return out
