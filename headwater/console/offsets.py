"""Offsets of the whole cluster in one pass: every partition's end offset, every consumer
group's committed offsets and every share group's lag. The sampler records one of these
each interval; the overview shows the latest. Built from the admin commands' own requests
(`admin.groups`, `admin.share_groups`), asked of every broker where Kafka answers per
broker (ListGroups)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..admin import groups as admin_groups
from ..admin import share_groups as admin_share
from ..admin.groups import AdminError
from ..wire.client import RawClient
from .connection import Target

TopicPartition = tuple[str, int]
#: ListGroups types of a consumer group (KIP-848 and classic) and of a share group
CONSUMER_TYPES = ("consumer", "classic")


@dataclass
class Snapshot:
    """One reading of the cluster's offsets at `at` (seconds since the epoch)."""

    at: float
    ends: dict[TopicPartition, int] = field(default_factory=dict)
    #: consumer group -> partition -> lag (end offset - committed offset)
    group_lag: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    #: share group -> partition -> lag (KIP-1226; -1 unknown is left out)
    share_lag: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    group_type: str
    state: str
    protocol_type: str


def list_groups(target: Target) -> list[GroupListing]:
    """ListGroups v5 of every broker (each answers for the groups it coordinates)."""
    found: dict[str, GroupListing] = {}
    for server in brokers(target):
        with target.client(server) as raw:
            resp = raw.request(16, 5, {"states_filter": (), "types_filter": ()})
        for g in resp.groups:
            found[g.group_id] = GroupListing(g.group_id, g.group_type, g.group_state,
                                             g.protocol_type)
    return sorted(found.values(), key=lambda g: g.group_id)


def brokers(target: Target) -> list[str]:
    """HOST:PORT of every broker, as Metadata names them."""
    with target.client() as raw:
        meta = raw.request(3, 12, {"topics": [], "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
    return [f"{b.host}:{b.port}" for b in sorted(meta.brokers, key=lambda b: b.node_id)]


def take(target: Target, now: float) -> Snapshot:
    """A Snapshot of the cluster now; an error is recorded in it, not raised, so a
    broker that is down shows as a gap in the charts."""
    snap = Snapshot(now)
    try:
        with target.client() as raw:
            parts = admin_groups._partitions(raw, None)
            snap.ends = admin_groups._list_offsets(raw, parts, -1)
            listing = list_groups(target)
            for g in listing:
                try:
                    _group_lag(raw, g, snap)
                except AdminError as exc:  # one group's error leaves the others shown
                    snap.error = str(exc)
    except (AdminError, OSError) as exc:
        snap.error = str(exc)
    return snap


def _group_lag(raw: RawClient, g: GroupListing, snap: Snapshot) -> None:
    if g.group_type == "share":
        rows = admin_share._offsets(raw, g.group_id)
        snap.share_lag[g.group_id] = {(t, p): lag for t, p, _s, lag in rows if lag >= 0}
    elif g.group_type in CONSUMER_TYPES or g.protocol_type == "consumer":
        committed = admin_groups._committed(raw, g.group_id)
        snap.group_lag[g.group_id] = {tp: max(snap.ends[tp] - off, 0)
                                      for tp, off in committed.items() if tp in snap.ends}
