"""Byte-rate quotas enforced as Kafka's ClientQuotaManager does (sans-IO: time comes in).

Each quota group keeps a sampled rate: `quota.window.num` (11) samples of
`quota.window.size.seconds` (1 s); the rate is the samples' total over the time they
span, counted as at least `num - 1` whole windows (Kafka's `Rate.windowSize`, so a new
client is measured over 10 s, not its first millisecond). When a recording takes the
rate past the quota, the throttle time is `(rate - quota) / quota * window`, at most
the whole window (`num * size`), which makes the rate fall back to the quota. The
broker answers at once with `throttle_time_ms` and reads nothing more from the
connection for that long (KIP-219); clients wait too.

Which quota applies (DefaultQuotaCallback): the most specific of user+client-id,
user+default client, user, default user+client-id, default user+default client,
default user, client-id, default client. Connections share the rate of their group:
a quota on the user alone (or the default user alone) is shared by all that user's
clients, a quota on a client-id alone by every user of it, otherwise each
(user, client-id) pair has its own.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .entities import CLIENT_ID, IP, USER, Entity, Quotas

DEFAULT_WINDOW_MS = 1000
DEFAULT_SAMPLES = 11


@dataclass(slots=True)
class _Sample:
    start_ms: int
    total: float


class Rate:
    """Kafka's `Rate` over a `SampledStat` of `samples` windows of `window_ms`."""

    __slots__ = ("samples", "window_ms", "count")

    def __init__(self, window_ms: int = DEFAULT_WINDOW_MS, count: int = DEFAULT_SAMPLES) -> None:
        self.samples: deque[_Sample] = deque()
        self.window_ms = window_ms
        self.count = count

    def _purge(self, now_ms: int) -> None:
        expire = now_ms - self.count * self.window_ms
        while self.samples and self.samples[0].start_ms <= expire:
            self.samples.popleft()

    def record(self, value: float, now_ms: int) -> None:
        self._purge(now_ms)
        if not self.samples or now_ms - self.samples[-1].start_ms >= self.window_ms:
            self.samples.append(_Sample(now_ms, 0.0))
            if len(self.samples) > self.count:
                self.samples.popleft()
        self.samples[-1].total += value

    def window_size_ms(self, now_ms: int) -> int:
        elapsed = now_ms - self.samples[0].start_ms if self.samples else 0
        full = elapsed // self.window_ms
        if full < self.count - 1:
            elapsed += (self.count - 1 - full) * self.window_ms
        return elapsed

    def per_second(self, now_ms: int) -> float:
        self._purge(now_ms)
        total = sum(s.total for s in self.samples)
        return total / (self.window_size_ms(now_ms) / 1000)


def resolve(quotas: Quotas, key: str, user: str, client_id: str
            ) -> tuple[float, tuple[str, str]] | None:
    """(quota, the group's (user, client-id) tags) of the most specific entity that
    sets `key` for this connection; None: unlimited."""
    candidates: tuple[tuple[Entity, tuple[str, str]], ...] = (
        (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
        (((CLIENT_ID, None), (USER, user)), (user, client_id)),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
        (((CLIENT_ID, None), (USER, None)), (user, client_id)),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, None),), ("", client_id)),
    )
    for entity, tags in candidates:
        value = quotas.get(entity, {}).get(key)
        if value is not None:
            return value, tags
    return None


def resolve_ip(quotas: Quotas, key: str, host: str) -> tuple[float, tuple[str, str]] | None:
    """(quota, tags) of the IP entity setting `key` for `host`, else of the default IP
    entity; None: unlimited. Each host has its own rate either way (Kafka's per-IP
    connection rate)."""
    for entity in (((IP, host),), ((IP, None),)):
        value = quotas.get(entity, {}).get(key)
        if value is not None:
            return value, (host, "")
    return None


class QuotaManager:
    """The rates of every quota group of one kind of quota (produce or fetch bytes)."""

    def __init__(self, key: str, window_ms: int = DEFAULT_WINDOW_MS,
                 samples: int = DEFAULT_SAMPLES) -> None:
        self.key = key
        self.window_ms = window_ms
        self.samples = samples
        self._rates: dict[tuple[str, str], Rate] = {}
        self.throttled = 0  # times a recording was throttled (metrics)

    def record(self, quotas: Quotas, user: str, client_id: str, value: float,
               now_ms: int) -> int:
        """Record `value` (bytes) for the connection's group; the throttle time in ms."""
        if not quotas:
            return 0
        found = resolve(quotas, self.key, user, client_id)
        if found is None:
            return 0
        return self.record_for(*found, value, now_ms)

    def record_for(self, bound: float, tags: tuple[str, str], value: float,
                   now_ms: int) -> int:
        """Record `value` in the group `tags` under the quota `bound`; the throttle in ms."""
        rate = self._rates.get(tags)
        if rate is None:
            if len(self._rates) >= 100_000:  # groups are per client: keep it bounded
                self._rates.clear()
            rate = self._rates[tags] = Rate(self.window_ms, self.samples)
        rate.record(value, now_ms)
        measured = rate.per_second(now_ms)
        if bound <= 0 or measured <= bound:
            return 0 if bound > 0 else self.window_ms * self.samples
        self.throttled += 1
        throttle = round((measured - bound) / bound * rate.window_size_ms(now_ms))
        return min(throttle, self.window_ms * self.samples)

    def max_in_window(self, quotas: Quotas, user: str, client_id: str) -> int | None:
        """The most bytes one response may carry: the quota times `num - 1` windows
        (Kafka's getMaxValueInQuotaWindow caps a consumer's fetch with it, so a response
        always fits the quota); None: unlimited."""
        found = resolve(quotas, self.key, user, client_id) if quotas else None
        if found is None:
            return None
        return int(found[0] * (self.samples - 1) * self.window_ms / 1000)

    def unrecord(self, quotas: Quotas, user: str, client_id: str, value: float,
                 now_ms: int) -> None:
        """Take back a recording whose bytes were not sent (a throttled fetch answers
        with no records, as Kafka's `unrecordQuotaSensor`)."""
        found = resolve(quotas, self.key, user, client_id)
        if found is not None:
            self.unrecord_for(found[1], value, now_ms)

    def unrecord_for(self, tags: tuple[str, str], value: float, now_ms: int) -> None:
        rate = self._rates.get(tags)
        if rate is not None:
            rate.record(-value, now_ms)
