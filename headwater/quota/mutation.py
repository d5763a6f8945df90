"""`controller_mutation_rate` (KIP-599): partitions created, added or deleted per second.

Kafka meters topic mutations with a token bucket per quota group: it holds at most
`rate x controller.quota.window.num x controller.quota.window.size.seconds` tokens (a
burst), refills at `rate` per second, and each accepted topic takes its partition count
(CreateTopics: its partitions, CreatePartitions: the partitions added, DeleteTopics: its
partitions). Behaviour measured on Kafka 4.3.1:

* **Strict** (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+): topics are taken
  in request order; a topic that passed validation is refused with
  THROTTLING_QUOTA_EXCEEDED (no message) if the bucket is already below zero, else it is
  accepted and its permits taken, even past zero. The response's `throttle_time_ms` is
  the time the bucket needs to get back to zero, and only when a topic was refused.
* **Permissive** (older versions): every valid topic is accepted and recorded; the
  throttle time is then the time back to zero, if below.
* Topics failing validation (existing, invalid, not authorized, unknown) take nothing.
  `validate_only` requests take permits like real ones.
* A throttled connection is muted for the throttle time (KIP-219), as byte-rate quotas
  (`enforce.py` does the muting).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .entities import CONTROLLER_MUTATION_RATE, Quotas
from .throttle import resolve

_MAX_BUCKETS = 100_000  # groups are per client: keep it bounded
STRICT_SINCE = {19: 6, 20: 5, 37: 3}  # api key -> first version refusing topics


@dataclass(slots=True)
class TokenBucket:
    tokens: float
    at_ms: int

    def refill(self, rate: float, burst: float, now_ms: int) -> None:
        self.tokens = min(burst, self.tokens + rate * max(now_ms - self.at_ms, 0) / 1000)
        self.at_ms = now_ms


class MutationQuotas:
    """The token buckets of every quota group (sans-IO: time comes in)."""

    def __init__(self, window_ms: int = 1000, samples: int = 11) -> None:
        self.window_ms = window_ms
        self.samples = samples
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def quota(self, quotas: Quotas, user: str, client_id: str, strict: bool,
              now_ms: int) -> MutationQuota | None:
        """One request's quota; None when no `controller_mutation_rate` applies."""
        found = resolve(quotas, CONTROLLER_MUTATION_RATE, user, client_id) if quotas else None
        if found is None:
            return None
        rate, tags = found
        burst = rate * self.samples * self.window_ms / 1000
        bucket = self._buckets.get(tags)
        if bucket is None:
            if len(self._buckets) >= _MAX_BUCKETS:
                self._buckets.clear()
            bucket = self._buckets[tags] = TokenBucket(burst, now_ms)
        bucket.refill(rate, burst, now_ms)
        return MutationQuota(self, bucket, rate, strict)


@dataclass(slots=True)
class MutationQuota:
    """The quota as one request sees it: `admit` each valid topic in order, then
    `throttle_ms` for the response."""

    owner: MutationQuotas
    bucket: TokenBucket
    rate: float
    strict: bool
    refused_ms: int = 0

    def admit(self, permits: int) -> bool:
        """Take `permits` for a topic, or (strict, bucket below zero) refuse it."""
        if self.strict and self.bucket.tokens < 0:
            self.refused_ms = self._back_to_zero_ms()
            return False
        self.bucket.tokens -= permits
        return True

    def throttle_ms(self) -> int:
        if self.strict:
            return self.refused_ms
        return self._back_to_zero_ms() if self.bucket.tokens < 0 else 0

    def _back_to_zero_ms(self) -> int:
        if self.rate <= 0:
            return self.owner.window_ms * self.owner.samples
        return math.ceil(-self.bucket.tokens / self.rate * 1000)
