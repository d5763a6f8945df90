"""`headwater metadata snapshot` (the one writing subcommand) and `image` reading
snapshot + tail, on a stopped broker's data directory."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pytest

from headwater.admin import metadata as cli
from headwater.metadata import records as R
from headwater.metadata import snapshot
from headwater.metadata.controller import NewTopic
from tests.unit.metadata.test_snapshot import NO_SNAPSHOTS, history, open_controller

pytestmark = pytest.mark.timeout(60)


def args(data_dir: Path) -> argparse.Namespace:
    return argparse.Namespace(data_dir=str(data_dir), json=True)


def image_rows(data_dir: Path) -> list[dict]:
    return json.loads(cli.cmd_image(args(data_dir)))


def test_snapshot_command_then_image_and_start_use_it(tmp_path):
    meta = tmp_path / cli.METADATA_DIR
    c = open_controller(meta, **NO_SNAPSHOTS)
    history(c, 3)
    expected = c.image
    c.log.close()
    before = image_rows(tmp_path)
    out = cli.cmd_snapshot(args(tmp_path))
    (sid,) = snapshot.list_ids(meta)
    assert sid.offset == c.log.log_end_offset and sid.name in out
    after = image_rows(tmp_path)  # snapshot + (empty) tail: the same image
    assert {"kind": "snapshot", "name": "none", "value": "the whole log"} in before
    assert {"kind": "snapshot", "name": sid.name,
            "value": f"offsets below {sid.offset}, then the log"} in after
    assert [r for r in after if r["kind"] != "snapshot"] == [
        r for r in before if r["kind"] != "snapshot"]
    assert cli.load(meta).snapshot_id == sid
    assert open_controller(meta, **NO_SNAPSHOTS).image == expected
    assert "already a snapshot" in cli.cmd_snapshot(args(tmp_path))
    header = snapshot.read(meta, sid)[0]
    assert header == R.FeatureLevelRecord("metadata.version", R.METADATA_VERSION)


def test_snapshot_command_stops_before_a_transaction_left_open(tmp_path):
    meta = tmp_path / cli.METADATA_DIR
    c = open_controller(meta, **NO_SNAPSHOTS)
    c.create_topics([NewTopic("kept", 1)])
    begin = c.log.log_end_offset
    now = int(time.time() * 1000)
    c._append([R.BeginTransactionRecord(), R.TopicRecord("torn", R.new_topic_id())], now)
    c.log.flush()
    c.log.close()
    cli.cmd_snapshot(args(tmp_path))
    (sid,) = snapshot.list_ids(meta)
    assert sid.offset == begin  # a committed offset, never inside the transaction
    names = {r["name"] for r in image_rows(tmp_path) if r["kind"] == "topic"}
    assert names == {"kept"}
    again = open_controller(meta, **NO_SNAPSHOTS)  # rolls the open transaction back
    assert set(again.image.topics_by_name) == {"kept"}
    kinds = [type(r).__name__ for _, r in cli.read_directory(meta)]
    assert kinds[-1] == "AbortTransactionRecord"


def test_image_lists_acls_and_scram_users(tmp_path):
    meta = tmp_path / cli.METADATA_DIR
    c = open_controller(meta, **NO_SNAPSHOTS)
    c.commit([R.AccessControlEntryRecord("6f0c9a2e-1d4b-4c4e-9a55-3c2b8d7e1f00", 2, "orders-",
                                         4, "User:alice", "*", 3, 3),
              R.UserScramCredentialRecord("carol", 1, b"s", b"k", b"v", 4096)])
    c.log.close()
    rows = image_rows(tmp_path)
    assert {"kind": "acl", "name": "TOPIC:PREFIXED:orders-",
            "value": "User:alice host=* READ ALLOW"} in rows
    assert {"kind": "scram-user", "name": "carol",
            "value": "SCRAM-SHA-256 iterations=4096"} in rows
