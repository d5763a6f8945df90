"""Transaction coordinator settings, Kafka's names; the defaults are the registry's
(headwater/config_registry/coordinator_keys.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import BrokerConfig

# (headwater.txn.crash.after.prepare, a testing aid, is a fault point: faults.py.)


@dataclass(frozen=True, slots=True)
class TxnConfig:
    num_partitions: int = 50
    segment_bytes: int = 104857600
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    abort_interval_ms: int = 10_000
    expire_interval_ms: int = 3_600_000
    load_delay_ms: int = 0

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> TxnConfig:
        get = config.get_str  # the registry's default when unset

        return cls(
            num_partitions=int(get("transaction.state.log.num.partitions")),
            segment_bytes=int(get("transaction.state.log.segment.bytes")),
            max_timeout_ms=int(get("transaction.max.timeout.ms")),
            id_expiration_ms=int(get("transactional.id.expiration.ms")),
            abort_interval_ms=int(
                get("transaction.abort.timed.out.transaction.cleanup.interval.ms")),
            expire_interval_ms=int(
                get("transaction.remove.expired.transaction.cleanup.interval.ms")),
            load_delay_ms=int(get("headwater.coordinator.load.delay.ms")),
        )
