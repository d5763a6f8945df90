"""The test-only fault points (headwater/faults.py): armed by their config keys, each hit
logs a critical line naming the point and exits, kills or fails as documented."""

from __future__ import annotations

import logging
import signal

import pytest

from headwater import faults
from headwater.config import BrokerConfig
from headwater.faults import Action, Faults


class Exited(Exception):
    pass


@pytest.fixture
def exits(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """os._exit and os.kill recorded instead of done."""
    calls: list[tuple[str, int]] = []

    def exit_(status: int) -> None:
        calls.append(("exit", status))
        raise Exited

    def kill(pid: int, sig: int) -> None:
        calls.append(("kill", sig))
        raise Exited
    monkeypatch.setattr(faults.os, "_exit", exit_)
    monkeypatch.setattr(faults.os, "kill", kill)
    return calls


def test_unarmed_points_do_nothing(exits) -> None:
    f = Faults.from_config(BrokerConfig({}))
    for name in faults.POINTS:
        assert not f.armed(name)
        f.hit(name)
    assert exits == []


def test_each_key_arms_its_points_by_value() -> None:
    def armed(**config: str) -> set[str]:
        f = Faults.from_config(BrokerConfig(config))
        return {name for name in faults.POINTS if f.armed(name)}
    assert armed(**{faults.TXN_KEY: "true"}) == {faults.TXN_AFTER_PREPARE}
    assert armed(**{faults.TXN_KEY: "false"}) == set()
    assert armed(**{faults.HOLDS_KEY: "true"}) == {faults.TXN_AFTER_HOLDS}
    assert armed(**{faults.DEAD_LETTER_KEY: "before-write"}) == {
        faults.SHARE_DEAD_LETTER_BEFORE_WRITE}
    assert armed(**{faults.DEAD_LETTER_KEY: " After-Write "}) == {
        faults.SHARE_DEAD_LETTER_AFTER_WRITE}
    assert armed(**{faults.PENDING_DELETION_KEY: "true"}) == {
        faults.SHARE_AFTER_PENDING_DELETION}
    assert armed(**{faults.METADATA_KEY: "kill-after-begin"}) == {faults.METADATA_AFTER_BEGIN}
    assert armed(**{faults.METADATA_KEY: "something-else"}) == set()


def test_the_config_keys_are_the_ones_tests_and_campaigns_set() -> None:
    assert {p.name: p.key for p in faults.POINTS.values()} == {
        "metadata.after-begin": "headwater.test.metadata.fault",
        "txn.after-prepare": "headwater.txn.crash.after.prepare",
        "txn.after-holds": "headwater.txn.crash.after.holds",
        "share.dead-letter.before-write": "headwater.share.crash.dead.letter",
        "share.dead-letter.after-write": "headwater.share.crash.dead.letter",
        "share.after-pending-deletion": "headwater.share.crash.after.pending.deletion",
        "produce.ack-before-commit": "headwater.test.bug.ack.before.commit",
    }


def test_an_exit_point_logs_one_critical_line_then_exits_1(exits, caplog) -> None:
    f = Faults.from_config(BrokerConfig({faults.TXN_KEY: "true"}))
    with caplog.at_level(logging.CRITICAL, "headwater.faults"), pytest.raises(Exited):
        f.hit(faults.TXN_AFTER_PREPARE, "before writing the markers of tx")
    assert exits == [("exit", 1)]
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == ("fault point txn.after-prepare (headwater.txn.crash.after.prepare=true): "
                    "exiting before writing the markers of tx")


def test_kill_after_begin_sends_sigkill(exits) -> None:
    f = Faults.from_config(BrokerConfig({faults.METADATA_KEY: "kill-after-begin"}))
    with pytest.raises(Exited):
        f.hit(faults.METADATA_AFTER_BEGIN)
    assert exits == [("kill", signal.SIGKILL)]


def test_fail_append_after_begin_fails_once(exits) -> None:
    f = Faults.from_config(BrokerConfig({faults.METADATA_KEY: "fail-append-after-begin"}))
    with pytest.raises(OSError, match="No space left on device") as err:
        f.hit(faults.METADATA_AFTER_BEGIN)
    assert err.value.errno == 28
    f.hit(faults.METADATA_AFTER_BEGIN)  # the next transaction goes through
    assert exits == []


def test_points_are_named() -> None:
    with pytest.raises(KeyError):
        Faults().hit("no.such.point")
    with pytest.raises(ValueError):
        Faults({"no.such.point": ("true", Action.EXIT)})


def test_the_docstring_lists_every_point_with_its_key_and_values() -> None:
    doc = faults.__doc__ or ""
    for point in faults.POINTS.values():
        assert f"`{point.name}`" in doc
        for value in point.arms:
            assert f"{point.key}={value}" in doc, (point.name, value)


def test_a_planted_bug_is_armed_logged_once_and_never_exits(exits, caplog) -> None:
    f = Faults.from_config(BrokerConfig({faults.ACK_BEFORE_COMMIT_KEY: "true"}))
    assert f.armed(faults.PRODUCE_ACK_BEFORE_COMMIT)
    with caplog.at_level("CRITICAL", logger="headwater.faults"):
        f.hit(faults.PRODUCE_ACK_BEFORE_COMMIT)
        f.hit(faults.PRODUCE_ACK_BEFORE_COMMIT)
    assert [r.message for r in caplog.records if "misbehaving" in r.message] == [
        "fault point produce.ack-before-commit (headwater.test.bug.ack.before.commit=true): "
        "misbehaving on purpose"]
    assert exits == []
    assert not Faults.from_config(BrokerConfig({})).armed(faults.PRODUCE_ACK_BEFORE_COMMIT)
