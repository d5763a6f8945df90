"""Kafka's mapping of a coordinator key (group id, transactional id) to a partition."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=65_536)  # share-partition keys are hashed on every state write
def java_string_hash(text: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, num_partitions: int) -> int:
    """Utils.abs(hashCode) % n, where Utils.abs maps Integer.MIN_VALUE to 0."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
