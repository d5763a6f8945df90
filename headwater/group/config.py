"""Group coordinator settings, Kafka's names; the defaults are the registry's
(headwater/config_registry/coordinator_keys.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import BrokerConfig


@dataclass(frozen=True, slots=True)
class GroupConfig:
    num_partitions: int = 50
    segment_bytes: int = 104857600
    offsets_retention_ms: int = 10080 * 60_000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2147483647
    consumer_heartbeat_interval_ms: int = 5000
    consumer_session_timeout_ms: int = 45000
    consumer_max_size: int = 2147483647
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_regex_refresh_interval_ms: int = 600_000
    load_delay_ms: int = 0
    share_session_timeout_ms: int = 45000
    share_heartbeat_interval_ms: int = 5000
    share_assignment_interval_ms: int = 1000
    share_max_size: int = 200
    streams_session_timeout_ms: int = 45000
    streams_heartbeat_interval_ms: int = 5000
    streams_num_standby_replicas: int = 0
    streams_max_size: int = 2147483647
    streams_initial_rebalance_delay_ms: int = 3000
    streams_assignment_interval_ms: int = 1000
    streams_rack_aware_assignment_tags: tuple[str, ...] = ()

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> GroupConfig:
        get = share = config.get_str  # the registry's default when unset

        return cls(
            num_partitions=int(get("offsets.topic.num.partitions")),
            segment_bytes=int(get("offsets.topic.segment.bytes")),
            offsets_retention_ms=int(get("offsets.retention.minutes")) * 60_000,
            offsets_retention_check_interval_ms=int(get("offsets.retention.check.interval.ms")),
            offset_metadata_max_bytes=int(get("offset.metadata.max.bytes")),
            group_min_session_timeout_ms=int(get("group.min.session.timeout.ms")),
            group_max_session_timeout_ms=int(get("group.max.session.timeout.ms")),
            group_initial_rebalance_delay_ms=int(get("group.initial.rebalance.delay.ms")),
            group_max_size=int(get("group.max.size")),
            consumer_heartbeat_interval_ms=int(get("group.consumer.heartbeat.interval.ms")),
            consumer_session_timeout_ms=int(get("group.consumer.session.timeout.ms")),
            consumer_max_size=int(get("group.consumer.max.size")),
            consumer_assignors=tuple(a.strip() for a in get("group.consumer.assignors").split(",")
                                     if a.strip()),
            consumer_regex_refresh_interval_ms=int(
                get("group.consumer.regex.refresh.interval.ms")),
            load_delay_ms=int(get("headwater.coordinator.load.delay.ms")),
            share_session_timeout_ms=int(share("group.share.session.timeout.ms")),
            share_heartbeat_interval_ms=int(share("group.share.heartbeat.interval.ms")),
            share_assignment_interval_ms=int(share("group.share.assignment.interval.ms")),
            share_max_size=int(share("group.share.max.size")),
            streams_session_timeout_ms=int(get("group.streams.session.timeout.ms")),
            streams_heartbeat_interval_ms=int(get("group.streams.heartbeat.interval.ms")),
            streams_num_standby_replicas=int(get("group.streams.num.standby.replicas")),
            streams_max_size=int(get("group.streams.max.size")),
            streams_initial_rebalance_delay_ms=int(
                get("group.streams.initial.rebalance.delay.ms")),
            streams_assignment_interval_ms=int(get("group.streams.assignment.interval.ms")),
            streams_rack_aware_assignment_tags=tuple(
                t.strip() for t in get("group.streams.rack.aware.assignment.tags").split(",")
                if t.strip()),
        )
