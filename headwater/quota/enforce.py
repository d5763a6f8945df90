"""The broker's side of byte-rate quotas: which connection pays, and the mute.

Produce pays the bytes of its records, fetch the bytes of its response's records, as
Kafka measures them, and every request the time its handler runs (`request_percentage`,
percent of one thread over the quota window); the principal is the authenticated user
(`ANONYMOUS` without authentication, which a `<default>` user quota then covers, as in
Kafka). A throttled
connection gets its answer at once with `throttle_time_ms` and is not read again until
the time is over (the server honours `MUTE_UNTIL`, KIP-219).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from ..config import BrokerConfig
from ..wire.dispatch import MUTE_UNTIL, PRINCIPAL, RequestContext
from .entities import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
)
from .mutation import STRICT_SINCE, MutationQuota, MutationQuotas
from .throttle import QuotaManager, resolve_ip

QuotaSource = Callable[[], Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float]]]
"""The current client quotas (the metadata image's)."""

ANONYMOUS = "ANONYMOUS"


class ClientQuotas:
    def __init__(self, config: BrokerConfig, quotas: QuotaSource,
                 clock: Callable[[], int]) -> None:
        self._quotas = quotas
        self._clock = clock
        window_ms = config.get_int("quota.window.size.seconds") * 1000
        samples = config.get_int("quota.window.num")
        self.produce = QuotaManager(PRODUCER_BYTE_RATE, window_ms, samples)
        self.fetch = QuotaManager(CONSUMER_BYTE_RATE, window_ms, samples)
        self.request = QuotaManager(REQUEST_PERCENTAGE, window_ms, samples)
        self.connections = QuotaManager(CONNECTION_CREATION_RATE, window_ms, samples)
        self.mutation = MutationQuotas(
            config.get_int("controller.quota.window.size.seconds") * 1000,
            config.get_int("controller.quota.window.num"))

    def any(self) -> bool:
        """Whether any client quota is set (else nothing is charged or throttled)."""
        return bool(self._quotas())

    def request_time(self, ctx: RequestContext, seconds: float) -> int:
        """Charge a request's handler time to the connection's `request_percentage`
        quota (percent of one thread, as Kafka's request quota); its throttle in ms."""
        return self.throttle(self.request, ctx, seconds * 100)

    def connection_throttle(self, host: str) -> int:
        """A new connection from `host` under its `connection_creation_rate` (KIP-612):
        0 to serve it, else the ms after which it is closed unserved (and not counted,
        as Kafka unrecords it)."""
        quotas = self._quotas()
        found = resolve_ip(quotas, CONNECTION_CREATION_RATE, host) if quotas else None
        if found is None:
            return 0
        now = self._clock()
        throttle = self.connections.record_for(*found, 1, now)
        if throttle > 0:
            self.connections.unrecord_for(found[1], 1, now)
        return throttle

    def mutation_quota(self, ctx: RequestContext) -> MutationQuota | None:
        """The connection's `controller_mutation_rate` for this CreateTopics, DeleteTopics
        or CreatePartitions (strict from the versions that can refuse a topic); None
        when none applies."""
        quotas = self._quotas()
        if not quotas:
            return None
        strict = ctx.api_version >= STRICT_SINCE.get(ctx.api_key, 0)
        return self.mutation.quota(quotas, str(ctx.attrs.get(PRINCIPAL) or ANONYMOUS),
                                   ctx.client_id or "", strict, self._clock())

    @staticmethod
    def mutation_throttle(quota: MutationQuota | None, ctx: RequestContext) -> int:
        """The response's throttle time; the connection is muted that long."""
        if quota is None:
            return 0
        throttle = quota.throttle_ms()
        mute(ctx, throttle)
        return throttle

    def fetch_limit(self, ctx: RequestContext) -> int | None:
        """The byte cap of a fetch response under the connection's fetch quota."""
        quotas = self._quotas()
        if not quotas:
            return None
        return self.fetch.max_in_window(quotas, str(ctx.attrs.get(PRINCIPAL) or ANONYMOUS),
                                        ctx.client_id or "")

    def unrecord(self, manager: QuotaManager, ctx: RequestContext, size: int) -> None:
        manager.unrecord(self._quotas(),
                         str(ctx.attrs.get(PRINCIPAL) or ANONYMOUS), ctx.client_id or "",
                         size, self._clock())

    def throttle(self, manager: QuotaManager, ctx: RequestContext, size: float) -> int:
        """Record `size` bytes for the connection; its throttle time in ms (0: none),
        with the connection muted for that long."""
        quotas = self._quotas()
        if not quotas:
            return 0
        user = str(ctx.attrs.get(PRINCIPAL) or ANONYMOUS)
        throttle = manager.record(quotas, user, ctx.client_id or "", size,
                                  self._clock())
        mute(ctx, throttle)
        return throttle


def mute(ctx: RequestContext, throttle_ms: int) -> None:
    """Read nothing more from a throttled connection for `throttle_ms` (KIP-219)."""
    if throttle_ms > 0:
        until = time.monotonic() + throttle_ms / 1000
        ctx.attrs[MUTE_UNTIL] = max(until, ctx.attrs.get(MUTE_UNTIL, 0.0))
