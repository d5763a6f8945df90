"""A metadata transaction that fails in the middle is closed in the log (KIP-868)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as E

from headwater import faults
from headwater.config import BrokerConfig, LogConfig
from headwater.log.partition_log import PartitionLog
from headwater.metadata import codec
from headwater.metadata import records as R
from headwater.metadata.controller import Controller, ControllerError, NewTopic
from headwater.records.batch import decode_records, iter_batches
from headwater.storage.errors import LogError

CLOCK = [1_000]


def open_controller(path: Path, **config: str) -> Controller:
    plog = PartitionLog.open(path, LogConfig(), "__cluster_metadata", 0, CLOCK[0])
    broker_config = BrokerConfig(config)
    controller = Controller(plog, broker_config, lambda: CLOCK[0],
                            faults.Faults.from_config(broker_config))
    controller.load()
    return controller


def records(path: Path) -> list[object]:
    out = []
    for seg in sorted(path.glob("*.log")):
        data = seg.read_bytes()
        for pos, h in iter_batches(data):
            out += [codec.decode(r.key, r.value) for r in decode_records(data[pos:pos + h.size])]
    return out


def test_a_failed_append_is_aborted_and_later_changes_survive_a_restart(tmp_path):
    meta = tmp_path / "meta"
    c = open_controller(meta, **{faults.METADATA_KEY: "fail-append-after-begin"})
    c.create_topics([NewTopic("before", 1)])
    (_, err, _), = c.create_topics([NewTopic("wide", 1200)])
    assert err is not None and err.code == E.kafka_storage_error
    assert c.image.topic("wide") is None  # the image is what it was before Begin
    c.create_topics([NewTopic("after", 1)])
    log = records(meta)
    begin = next(i for i, r in enumerate(log) if isinstance(r, R.BeginTransactionRecord))
    abort = log[begin + 1 + 500]  # the Begin batch held 500 partition records
    assert isinstance(abort, R.AbortTransactionRecord) and "No space left" in abort.reason
    c.log.close()
    again = open_controller(meta)
    assert set(again.image.topics_by_name) == {"before", "after"}
    again.create_topics([NewTopic("wide", 1200)])  # and it can be created again
    assert len(open_controller(meta).image.topic("wide").partitions) == 1200


def test_writes_are_refused_until_the_abort_is_in_the_log(tmp_path, monkeypatch):
    c = open_controller(tmp_path / "meta")
    real = c.log.append
    calls = {"n": 0}

    def failing(data, now, **kw):
        calls["n"] += 1
        if calls["n"] >= 2:  # everything after the Begin batch
            raise LogError(E.kafka_storage_error, "disk gone")
        return real(data, now, **kw)
    monkeypatch.setattr(c.log, "append", failing)
    (_, err, _), = c.create_topics([NewTopic("wide", 1200)])
    assert err.code == E.kafka_storage_error
    (_, err, _), = c.create_topics([NewTopic("small", 1)])
    assert err.code == E.kafka_storage_error and "abort" in err.message
    monkeypatch.setattr(c.log, "append", real)  # the disk is back
    c.create_topics([NewTopic("small", 1)])
    kinds = [type(r).__name__ for r in records(tmp_path / "meta")]
    assert kinds[kinds.index("AbortTransactionRecord") + 1] == "TopicRecord"
    assert set(c.image.topics_by_name) == {"small"}


def test_transactions_are_the_controllers_own(tmp_path):
    c = open_controller(tmp_path / "meta")
    with pytest.raises(ControllerError) as exc:
        c.commit([R.BeginTransactionRecord("nested")])
    assert exc.value.code == E.invalid_request
