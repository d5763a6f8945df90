"""A table's progress as a consumer group's committed offsets, so that its lag shows
where operators already look for lag: `kafka-consumer-groups.sh --describe`, `headwater
groups`, the console's group pages, `headwater_consumer_group_lag` in Prometheus, and
the table columns of `headwater topic describe`.

After each table commit the writer commits the partitions' next offsets to the group
`headwater-iceberg.<topic>` (as Kafka Connect's sinks commit to `connect-<name>`), the
commit's metadata holding when the table was committed. The table's snapshot stays the
source of truth (what a writer resumes from); the group is a mirror, one commit behind
at worst, and nothing reads it back to write.
"""

from __future__ import annotations

import json

GROUP_PREFIX = "headwater-iceberg."


def group_of(topic: str) -> str:
    """The consumer group holding `topic`'s table progress."""
    return GROUP_PREFIX + topic


def metadata(committed_ms: int) -> str:
    """The offset commit's metadata: when the table commit landed (epoch ms)."""
    return json.dumps({"table_committed_ms": committed_ms})


def committed_ms(text: str | None) -> int | None:
    """The table commit time an offset commit's metadata holds (None: not ours)."""
    try:
        value = json.loads(text or "")["table_committed_ms"]
    except (ValueError, KeyError, TypeError):
        return None
    return int(value) if isinstance(value, int) else None
