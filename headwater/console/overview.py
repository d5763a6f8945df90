"""The overview page's data: the cluster (admin `cluster info`), its topics with their
record counts and its groups, read live; the charts come from the history."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..admin import cluster as admin_cluster
from ..admin import groups as admin_groups
from .connection import Target
from .offsets import GroupListing, list_groups


@dataclass(frozen=True)
class TopicSummary:
    name: str
    partitions: int
    records: int  # end offset - start offset, summed over the partitions
    end_offset: int  # summed: how many records were ever produced (less deletions)


def topics(target: Target, internal: bool = False) -> list[TopicSummary]:
    """Each topic's partitions and record count (ListOffsets earliest and latest)."""
    with target.client() as raw:
        parts = admin_groups._partitions(raw, None)
        if not internal:
            parts = {t: ps for t, ps in parts.items() if not t.startswith("__")}
        latest = admin_groups._list_offsets(raw, parts, -1)
        earliest = admin_groups._list_offsets(raw, parts, -2)
    return [TopicSummary(t, len(ps), sum(latest[(t, p)] - earliest[(t, p)] for p in ps),
                         sum(latest[(t, p)] for p in ps))
            for t, ps in sorted(parts.items())]


def gather(target: Target) -> dict[str, Any]:
    info = admin_cluster.info(target.args(json=True))
    groups: list[GroupListing] = list_groups(target)
    return {"cluster": info, "topics": topics(target), "groups": groups}
