"""Handlers that read every version of their request as the newest version's kio class
(`wire.dispatch.typed`): no field an older version carries is dropped on the way, unless
the handler's `changes` maps it (LeaveGroup v0-2's member_id, FindCoordinator v0-3's key)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from headwater.broker import Broker
from headwater.config import BrokerConfig
from headwater.wire.codec import _plan  # the fields of a kio class, as upgrade reads them
from headwater.wire.schemas import load_request_schema

#: Fields of an older version that the newest lacks, which the handler knows to ignore.
IGNORED = {"UpdateFeaturesRequest.v0.feature_updates.allow_downgrade"}


def _version_class(newest: type, version: int) -> type:
    """The request class of `version` as the broker reads it: kio's, or one of
    `wire/schemas.py` (the versions kio lacks, e.g. StreamsGroupHeartbeat v1)."""
    found: type = load_request_schema(newest.__api_key__, version)  # type: ignore[attr-defined]
    return found


def _lost(old: type, new: type, path: str) -> list[str]:
    fields = {p.name: p for p in _plan(new)}
    lost = []
    for p in _plan(old):
        here = f"{path}.{p.name}"
        if p.name not in fields:
            lost.append(here)
        elif dataclasses.is_dataclass(p.nested) and fields[p.name].nested is not None:
            lost += _lost(p.nested, fields[p.name].nested, here)
    return lost


def test_no_typed_handler_drops_a_field_of_an_older_version(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig({"log.dirs": str(tmp_path), "node.id": "1"}))
    broker.open()
    typed = [e for e in broker.dispatcher.entries() if e.request_class is not None]
    assert len(typed) >= 15  # the classic group APIs, FindCoordinator, ListOffsets, ...
    dropped = []
    for entry in typed:
        newest = entry.request_class
        assert newest is not None
        assert newest.__version__ == entry.max_version, entry  # type: ignore[attr-defined]
        for version in range(entry.min_version, entry.max_version):
            lost = _lost(_version_class(newest, version), newest,
                         f"{newest.__name__}.v{version}")
            if entry.changes is None:
                dropped += [f for f in lost if f not in IGNORED]
    assert dropped == []
