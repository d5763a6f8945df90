"""Prometheus metrics, computed at scrape time from the broker's own state.

Nothing on the produce/fetch hot path touches a metric object: a custom collector
reads the logs, the coordinator shards and the server when Prometheus scrapes. The
HTTP endpoint runs on the event loop, so the collector sees consistent state
without locks. Group coordinator metrics follow KIP-848's list.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Coroutine, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from .group.coordinator import GroupCoordinator
    from .metadata.image import MetadataImage
    from .share.coordinator import ShareCoordinator
    from .share.manager import SharePartitionManager
    from .storage.partition import Partition
    from .storage.store import PartitionStore
    from .wire.server import KafkaServer

log = logging.getLogger("headwater.metrics")


class Peers(Protocol):
    """The cluster, as far as the lag gauges ask it (`shared/node.py`'s `ClusterNode`)."""

    def end_offsets(self, partitions: list[tuple[str, uuid.UUID, int]],
                    timeout_s: float = ...) -> Coroutine[Any, Any, dict[tuple[str, int], int]]:
        ...


class Sources(Protocol):
    """What the collector reads of the broker (the assembly provides it)."""

    @property
    def cluster(self) -> Peers | None: ...

    @property
    def image(self) -> MetadataImage: ...

    def partition(self, topic: str, partition: int) -> Partition | None: ...

    @property
    def store(self) -> PartitionStore: ...

    @property
    def server(self) -> KafkaServer | None: ...

    @property
    def groups(self) -> GroupCoordinator: ...

    @property
    def share_coordinator(self) -> ShareCoordinator: ...

    @property
    def share_partitions(self) -> SharePartitionManager: ...


class BrokerCollector:
    def __init__(self, broker: Sources) -> None:
        self.broker = broker
        #: In a cluster: the high watermarks of the partitions other brokers serve that
        #: this broker's lag gauges need (its groups' and share-partitions'), asked of
        #: their leaders just before each scrape (`refresh`).
        self.remote_ends: dict[tuple[str, int], int] = {}

    async def refresh(self, timeout_s: float = 5.0) -> None:
        """Before a scrape, in a cluster: the lag gauges' partitions led elsewhere."""
        cluster = self.broker.cluster
        if cluster is None:
            return
        image = self.broker.image
        wanted: dict[tuple[str, int], uuid.UUID] = {}
        for topic, partition in self._lag_partitions():
            found = image.topic(topic)
            if found is not None and self.broker.partition(topic, partition) is None:
                wanted[(topic, partition)] = found.topic_id
        if not wanted:
            self.remote_ends = {}
            return
        self.remote_ends = await cluster.end_offsets(
            [(t, tid, p) for (t, p), tid in wanted.items()], timeout_s)

    def _lag_partitions(self) -> Iterator[tuple[str, int]]:
        """(topic, partition) of every committed offset and share-partition state the
        lag gauges report."""
        for _group, topic, partition, _offset in self.broker.groups.committed_offsets():
            yield topic, partition
        image = self.broker.image
        for (_group, tid, partition), _state in self.broker.share_coordinator.persisted_states():
            topic_image = image.topic_by_id(tid)
            if topic_image is not None:
                yield topic_image.name, partition

    def _high_watermark(self, topic: str, partition: int) -> int | None:
        """A partition's high watermark: this broker's own, or as its leader answered."""
        plog = self.broker.partition(topic, partition)
        if plog is not None:
            return plog.high_watermark
        return self.remote_ends.get((topic, partition))

    def collect(self) -> Iterator[Metric]:
        yield from self._logs()
        yield from self._groups()
        yield from self._shares()
        server = self.broker.server
        queue = GaugeMetricFamily("headwater_request_queue_size",
                                  "Requests read but not yet answered, all connections")
        queue.add_metric([], server.queued_requests() if server is not None else 0)
        yield queue

    def _logs(self) -> Iterator[Metric]:
        end = GaugeMetricFamily("headwater_log_end_offset", "Next offset to be written",
                                labels=["topic", "partition"])
        start = GaugeMetricFamily("headwater_log_start_offset", "First offset kept",
                                  labels=["topic", "partition"])
        size = GaugeMetricFamily("headwater_log_size_bytes", "Bytes on disk",
                                 labels=["topic", "partition"])
        for plog in self.broker.store.partitions():
            labels = [plog.topic, str(plog.partition)]
            end.add_metric(labels, plog.log_end_offset)
            start.add_metric(labels, plog.log_start_offset)
            size.add_metric(labels, plog.size_bytes)
        yield from (end, start, size)

    def _groups(self) -> Iterator[Metric]:
        coordinator = self.broker.groups
        by_protocol = GaugeMetricFamily("headwater_group_count", "Groups by protocol",
                                        labels=["protocol"])
        by_state = GaugeMetricFamily("headwater_consumer_group_count",
                                     "Groups by protocol and state",
                                     labels=["protocol", "state"])
        rebalances = CounterMetricFamily("headwater_group_rebalance",
                                         "Rebalances (classic generations, consumer group "
                                         "epoch bumps)", labels=["protocol"])
        lag = GaugeMetricFamily("headwater_consumer_group_lag",
                                "Log end offset minus committed offset",
                                labels=["group", "topic", "partition"])
        protocols: dict[str, int] = {"classic": 0, "consumer": 0}
        states: dict[tuple[str, str], int] = {}
        rebalance_counts: dict[str, int] = {"classic": 0, "consumer": 0}
        for shard in coordinator.loaded_shards():
            for group in shard.groups.values():
                protocols[group.group_type] = protocols.get(group.group_type, 0) + 1
                key = (group.group_type, group.state_name())
                states[key] = states.get(key, 0) + 1
            for protocol, count in shard.rebalances.items():
                rebalance_counts[protocol] = rebalance_counts.get(protocol, 0) + count
        for group_id, topic, partition, offset in coordinator.committed_offsets():
            high = self._high_watermark(topic, partition)
            if high is not None:
                lag.add_metric([group_id, topic, str(partition)], max(high - offset, 0))
        for protocol, count in protocols.items():
            by_protocol.add_metric([protocol], count)
        for (protocol, state), count in states.items():
            by_state.add_metric([protocol, state], count)
        for protocol, count in rebalance_counts.items():
            rebalances.add_metric([protocol], count)
        loads = list(coordinator.runtime.load_times_ms.values())
        load_max = GaugeMetricFamily("headwater_partition_load_time_max_ms",
                                     "Longest coordinator partition load (replay)")
        load_avg = GaugeMetricFamily("headwater_partition_load_time_avg_ms",
                                     "Average coordinator partition load (replay)")
        load_max.add_metric([], max(loads) if loads else 0)
        load_avg.add_metric([], sum(loads) / len(loads) if loads else 0)
        yield from (by_protocol, by_state, rebalances, lag, load_max, load_avg)


    def _shares(self) -> Iterator[Metric]:
        """Share groups: per loaded share-partition its in-flight records and lag (log
        end - SPSO - finished records in the window, KIP-1226), and counters of records
        acquired, redelivered, acknowledged by type, released by lock expiry and
        dead-lettered, and dead letters per group."""
        manager = self.broker.share_partitions
        labels = ["group", "topic", "partition"]
        in_flight = GaugeMetricFamily("headwater_share_partition_in_flight_records",
                                      "Records between SPSO and SPEO not yet finished",
                                      labels=labels)
        lag = GaugeMetricFamily("headwater_share_group_lag",
                                "Records not yet delivered-and-finished", labels=labels)
        for (group, _tid, partition), topic, part in manager.loaded():
            row = [group, topic, str(partition)]
            in_flight.add_metric(row, part.in_flight - part.delivery_complete_count())
        # Lag of every share-partition this broker's share coordinator holds, loaded by a
        # leader or not: the persisted state is the truth for it (acquisitions, the only
        # unpersisted changes, do not move it), as DescribeShareGroupOffsets v1 computes.
        image = self.broker.image
        for (group, tid, partition), state in self.broker.share_coordinator.persisted_states():
            topic_image = image.topic_by_id(tid)
            if (topic_image is None or state.start_offset < 0
                    or state.delivery_complete_count < 0):
                continue
            high = self._high_watermark(topic_image.name, partition)
            if high is not None:
                lag.add_metric([group, topic_image.name, str(partition)], max(
                    high - state.start_offset - state.delivery_complete_count, 0))
        records = CounterMetricFamily("headwater_share_records",
                                      "Share-group records by event (acquired, redelivered, "
                                      "accept, release, reject, gap, renew, lock_expired)",
                                      labels=["event"])
        for event, count in sorted(manager.counts.items()):
            records.add_metric([event], count)
        dead = CounterMetricFamily("headwater_share_dead_letter_records",
                                   "Records archived with a dead letter written (written) or "
                                   "refused by the dead-letter topic's rules (failed), KIP-1191",
                                   labels=["group", "result"])
        for (group, result), count in sorted(manager.dead_letters.counts.items()):
            dead.add_metric([group, result], count)
        yield from (in_flight, lag, records, dead)


class MetricsServer:
    """Minimal HTTP/1.1 endpoint on the event loop: any GET returns the exposition."""

    def __init__(self, broker: Sources, host: str, port: int) -> None:
        self.registry = CollectorRegistry()
        self.collector = BrokerCollector(broker)
        self.registry.register(self.collector)
        self.host, self.port = host, port
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            if not request.startswith(b"GET "):
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            else:
                try:
                    await self.collector.refresh()
                except Exception as exc:  # the local series are still worth serving
                    log.warning("remote high watermarks for the lag gauges: %s", exc)
                body = generate_latest(self.registry)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                             b"Content-Length: " + str(len(body)).encode() +
                             b"\r\nConnection: close\r\n\r\n" + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ConnectionError):
            pass
        finally:
            writer.close()
