"""Tasks as streams groups keep them: subtopology id -> frozenset of partitions, three
kinds at once (Kafka's TasksTuple: active, standby and warm-up tasks).

A task is one partition of one subtopology: the n-th task of a subtopology reads the
n-th partition of each of its source topics. `Tasks` are immutable and normalised by
`freeze` (no empty subtopologies); `task_ids` / `from_task_ids` are their form in the
records and on the wire ([{subtopology_id, partitions}]).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

Tasks = Mapping[str, frozenset[int]]
NO_TASKS: Tasks = MappingProxyType({})


def freeze(tasks: Mapping[str, Iterable[int]]) -> Tasks:
    """Normalise: frozenset values, no empty subtopologies."""
    return MappingProxyType({s: frozenset(ps) for s, ps in tasks.items() if ps})


def task_ids(tasks: Tasks) -> list[dict[str, Any]]:
    """The records' and the wire's form, subtopologies and partitions sorted."""
    return [{"subtopology_id": s, "partitions": sorted(ps)}
            for s, ps in sorted(tasks.items()) if ps]


def from_task_ids(items: Iterable[Any] | None) -> Tasks:
    """From records (dicts) or kio TaskIds (attributes)."""
    out: dict[str, set[int]] = {}
    for item in items or ():
        if isinstance(item, Mapping):
            sid, parts = item["subtopology_id"], item["partitions"]
        else:
            sid, parts = item.subtopology_id, item.partitions
        out.setdefault(sid, set()).update(int(p) for p in parts)
    return freeze(out)


def union(a: Tasks, b: Tasks) -> Tasks:
    return freeze({s: a.get(s, frozenset()) | b.get(s, frozenset()) for s in set(a) | set(b)})


def minus(a: Tasks, b: Tasks) -> Tasks:
    return freeze({s: ps - b.get(s, frozenset()) for s, ps in a.items()})


def intersect(a: Tasks, b: Tasks) -> Tasks:
    return freeze({s: ps & b.get(s, frozenset()) for s, ps in a.items()})


@dataclass(frozen=True, slots=True)
class TasksTuple:
    """A member's active, standby and warm-up tasks (assigned, target or pending)."""

    active: Tasks = field(default_factory=lambda: NO_TASKS)
    standby: Tasks = field(default_factory=lambda: NO_TASKS)
    warmup: Tasks = field(default_factory=lambda: NO_TASKS)

    @classmethod
    def of(cls, active: Mapping[str, Iterable[int]] | None = None,
           standby: Mapping[str, Iterable[int]] | None = None,
           warmup: Mapping[str, Iterable[int]] | None = None) -> TasksTuple:
        return cls(freeze(active or {}), freeze(standby or {}), freeze(warmup or {}))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TasksTuple):
            return NotImplemented
        return (dict(self.active) == dict(other.active)
                and dict(self.standby) == dict(other.standby)
                and dict(self.warmup) == dict(other.warmup))

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.active.items())), tuple(sorted(self.standby.items())),
                     tuple(sorted(self.warmup.items()))))

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def record_fields(self, suffix: str = "") -> dict[str, Any]:
        """{active_tasks<suffix>, standby_tasks<suffix>, warmup_tasks<suffix>} for a record."""
        return {f"active_tasks{suffix}": task_ids(self.active),
                f"standby_tasks{suffix}": task_ids(self.standby),
                f"warmup_tasks{suffix}": task_ids(self.warmup)}

    @classmethod
    def from_record(cls, value: Mapping[str, Any], suffix: str = "") -> TasksTuple:
        return cls(from_task_ids(value.get(f"active_tasks{suffix}")),
                   from_task_ids(value.get(f"standby_tasks{suffix}")),
                   from_task_ids(value.get(f"warmup_tasks{suffix}")))

    def describe(self) -> dict[str, Any]:
        """StreamsGroupDescribe's Assignment."""
        return {"active_tasks": task_ids(self.active), "standby_tasks": task_ids(self.standby),
                "warmup_tasks": task_ids(self.warmup)}


EMPTY_TASKS = TasksTuple()
