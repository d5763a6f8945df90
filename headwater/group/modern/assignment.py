"""Assignments as modern groups keep them: topic id -> frozenset of partitions.

A member's target slice, its assigned partitions and its pending revocations are all
`Assignment`s: immutable, normalised by `freeze` (no empty topics), compared with
`same`. `topic_partitions` / `from_topic_partitions` are their form in the records of
both consumer and share groups, `named` their form in the describe answers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...metadata.image import MetadataImage

Assignment = Mapping[uuid.UUID, frozenset[int]]
EMPTY: Assignment = MappingProxyType({})


def freeze(assignment: Mapping[uuid.UUID, Iterable[int]]) -> Assignment:
    """Normalise: frozenset values, no empty topics."""
    return MappingProxyType({t: frozenset(ps) for t, ps in assignment.items() if ps})


def same(a: Assignment, b: Assignment) -> bool:
    return dict(a) == dict(b)


def topic_partitions(assignment: Assignment) -> list[dict[str, Any]]:
    """The records' form: [{topic_id, partitions}], topics in id order, partitions sorted."""
    return [{"topic_id": t, "partitions": sorted(ps)}
            for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])) if ps]


def from_topic_partitions(items: Iterable[Mapping[str, Any]]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for item in items:
        out.setdefault(item["topic_id"], set()).update(item["partitions"])
    return freeze(out)


def named(assignment: Assignment, image: MetadataImage) -> dict[str, Any]:
    """The describe answers' form: {topic_partitions: [{topic_id, topic_name, partitions}]}
    (a topic the image no longer has is named "")."""
    parts = []
    for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])):
        topic = image.topic_by_id(t)
        parts.append({"topic_id": t, "topic_name": topic.name if topic else "",
                      "partitions": sorted(ps)})
    return {"topic_partitions": parts}
