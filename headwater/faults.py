"""Test-only fault points: the named places where a test or a crash campaign makes the
broker fail, each armed by a broker config key (`--override KEY=VALUE`).

Nothing sets these keys in production; unarmed, hitting a point does nothing. The broker
reads them once at start (`Faults.from_config`) and hands the one `Faults` to the services
that hold a point; a service calls `faults.hit(NAME)` where the point is.

The points, the key and value that arm each, when it fires and what it does then:

* `metadata.after-begin` (metadata/controller.py), after a metadata transaction's
  BeginTransaction batch is in the log and before its next batch is appended:
  - `headwater.test.metadata.fault=fail-append-after-begin`: that append fails, once
    (OSError ENOSPC, as a full disk gives);
  - `headwater.test.metadata.fault=kill-after-begin`: the process dies there (SIGKILL, as
    `kill -9`: exit status -9).
* `txn.after-prepare` (txn/coordinator.py), `headwater.txn.crash.after.prepare=true`:
  right after a PrepareCommit/PrepareAbort is persisted, before any of its markers is
  written (exit status 1).
* `txn.after-holds` (shared/txn_remote.py), `headwater.txn.crash.after.holds=true`: in a
  cluster, once every partition of a transaction holds its marker, before the coordinator
  commits them together (exit status 1).
* `share.dead-letter.before-write` (share/dead_letter.py),
  `headwater.share.crash.dead.letter=before-write`: once ARCHIVING is persisted, before
  the dead letters are written (exit status 1).
* `share.dead-letter.after-write` (share/dead_letter.py),
  `headwater.share.crash.dead.letter=after-write`: once the dead letters are in the
  dead-letter topic's log, before ARCHIVED is written (exit status 1).
* `share.after-pending-deletion` (share/admin.py),
  `headwater.share.crash.after.pending.deletion=true`: right after a pending-deletion
  record is written (DeleteShareGroupOffsets, deleting a share group), before any
  share-state tombstone; also where the load finishes such a deletion (exit status 1).

* `produce.ack-before-commit` (api/produce.py), `headwater.test.bug.ack.before.commit=true`:
  a planted bug, not a crash: on the shared log, Produce answers as soon as its batches are
  appended, before their commit window lands (the commit still follows). A kill -9 or an
  engine outage then loses acknowledged writes; the fault campaign's checker must say so
  (tests/integration/test_chaos_campaign.py), so that its green runs mean something.

Every point logs one critical line naming itself and its key=value before it acts (the
planted bug once, at its first hit).
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger("headwater.faults")


class Action(enum.Enum):
    EXIT = "exit"  # os._exit(1): the process crashes (no cleanup, no flush)
    KILL = "kill"  # SIGKILL to itself, as `kill -9`
    FAIL = "fail"  # raise OSError(ENOSPC), once
    BUG = "bug"  # the service misbehaves on purpose where it checks `armed` (logged once)


@dataclass(frozen=True, slots=True)
class FaultPoint:
    name: str
    key: str
    arms: Mapping[str, Action]  # a value of `key` -> what hitting the point then does


METADATA_AFTER_BEGIN = "metadata.after-begin"
TXN_AFTER_PREPARE = "txn.after-prepare"
TXN_AFTER_HOLDS = "txn.after-holds"
SHARE_DEAD_LETTER_BEFORE_WRITE = "share.dead-letter.before-write"
SHARE_DEAD_LETTER_AFTER_WRITE = "share.dead-letter.after-write"
SHARE_AFTER_PENDING_DELETION = "share.after-pending-deletion"
PRODUCE_ACK_BEFORE_COMMIT = "produce.ack-before-commit"

METADATA_KEY = "headwater.test.metadata.fault"
TXN_KEY = "headwater.txn.crash.after.prepare"
HOLDS_KEY = "headwater.txn.crash.after.holds"
DEAD_LETTER_KEY = "headwater.share.crash.dead.letter"
PENDING_DELETION_KEY = "headwater.share.crash.after.pending.deletion"
ACK_BEFORE_COMMIT_KEY = "headwater.test.bug.ack.before.commit"

POINTS: dict[str, FaultPoint] = {p.name: p for p in (
    FaultPoint(METADATA_AFTER_BEGIN, METADATA_KEY, {
        "fail-append-after-begin": Action.FAIL, "kill-after-begin": Action.KILL}),
    FaultPoint(TXN_AFTER_PREPARE, TXN_KEY, {"true": Action.EXIT}),
    FaultPoint(TXN_AFTER_HOLDS, HOLDS_KEY, {"true": Action.EXIT}),
    FaultPoint(SHARE_DEAD_LETTER_BEFORE_WRITE, DEAD_LETTER_KEY, {"before-write": Action.EXIT}),
    FaultPoint(SHARE_DEAD_LETTER_AFTER_WRITE, DEAD_LETTER_KEY, {"after-write": Action.EXIT}),
    FaultPoint(SHARE_AFTER_PENDING_DELETION, PENDING_DELETION_KEY, {"true": Action.EXIT}),
    FaultPoint(PRODUCE_ACK_BEFORE_COMMIT, ACK_BEFORE_COMMIT_KEY, {"true": Action.BUG}),
)}


class ConfigSource(Protocol):
    """What the points are read from (the broker's config)."""

    def get(self, key: str, default: str | None = None) -> str | None: ...


class Faults:
    """The armed fault points: point name -> the value that armed it and its action."""

    def __init__(self, armed: Mapping[str, tuple[str, Action]] | None = None) -> None:
        self._armed = dict(armed or {})
        unknown = set(self._armed) - set(POINTS)
        if unknown:
            raise ValueError(f"unknown fault points: {sorted(unknown)}")
        self._failed: set[str] = set()

    @classmethod
    def from_config(cls, config: ConfigSource) -> Faults:
        armed = {}
        for point in POINTS.values():
            value = (config.get(point.key) or "").strip().lower()
            action = point.arms.get(value)
            if action is not None:
                armed[point.name] = (value, action)
        return cls(armed)

    def armed(self, name: str) -> bool:
        if name not in POINTS:
            raise KeyError(name)
        return name in self._armed

    def hit(self, name: str, detail: str = "") -> None:
        """The service reached point `name`: if armed, log it and act (exit, kill or fail);
        else nothing. `detail` goes in the log line."""
        if not self.armed(name):
            return
        value, action = self._armed[name]
        if action in (Action.FAIL, Action.BUG) and name in self._failed:
            return
        what = {Action.EXIT: "exiting", Action.KILL: "killing the process",
                Action.FAIL: "failing once", Action.BUG: "misbehaving on purpose"}[action]
        log.critical("fault point %s (%s=%s): %s%s", name, POINTS[name].key, value, what,
                     f" {detail}" if detail else "")
        if action is Action.BUG:
            self._failed.add(name)
            return
        if action is Action.FAIL:
            self._failed.add(name)
            raise OSError(errno.ENOSPC, f"No space left on device ({POINTS[name].key})")
        logging.shutdown()
        if action is Action.KILL:
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(1)
