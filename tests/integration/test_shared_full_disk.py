"""A full disk under the object store: produce answers KAFKA_STORAGE_ERROR (retriable),
the broker keeps serving, and once there is room again produce resumes with nothing
acknowledged lost. The store is versitygw over a 3 MiB tmpfs (mounting needs root and
CAP_SYS_ADMIN: elsewhere the test is skipped, saying why)."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.records.batch import build_batch, decode_records, iter_batches
from tests.support.broker_process import BrokerProcess
from tests.support.engines import PostgresServer, VersityGateway, create_database
from tests.support.wire import RawClient

pytestmark = [pytest.mark.timeout(180), pytest.mark.local_storage(
    "starts its own broker on a full object store")]


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def produce(client: RawClient, topic: str, value: bytes) -> tuple[int, int]:
    """(error code, base offset) of one acks=all Produce of one record."""
    batch = build_batch([(None, value, [], int(time.time() * 1000))])
    resp = client.request(0, 9, {"acks": -1, "timeout": 10_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    part = resp.responses[0].partition_responses[0]
    return int(part.error_code), int(part.base_offset)


def test_a_full_object_store_fails_produce_with_a_storage_error(
        postgres: PostgresServer, tiny_disk: Path, tmp_path: Path) -> None:
    gateway = VersityGateway(tiny_disk).start()
    try:
        dsn = asyncio.run(create_database(postgres))
        settings = {"headwater.storage": "shared", "headwater.shared.database": dsn,
                    "headwater.shared.inline.max.bytes": "0", **gateway.settings("full")}
        args = [a for k, v in settings.items() for a in ("--override", f"{k}={v}")]
        broker = BrokerProcess(tmp_path / "data", *args).start()
        try:
            topic = f"full-{uuid.uuid4().hex[:8]}"
            client = RawClient("127.0.0.1", broker.port)
            created = client.request(19, 5, {"topics": [
                {"name": topic, "num_partitions": 1, "replication_factor": 1,
                 "assignments": [], "configs": []}], "timeout_ms": 30_000,
                "validate_only": False})
            assert created.topics[0].error_code == 0
            acked: dict[int, bytes] = {}
            value = b"x" * 256 * 1024
            codes: list[int] = []
            for i in range(40):  # 10 MiB into 3 MiB
                payload = bytes([i]) + value
                code, offset = produce(client, topic, payload)
                codes.append(code)
                if code == 0:
                    acked[offset] = payload
                elif code == E.kafka_storage_error:
                    break
            assert codes[-1] == E.kafka_storage_error, codes
            assert acked, "nothing was acknowledged before the disk filled"
            # the broker keeps serving: metadata answers, and with room again produce
            # resumes (the partition is taken again from what was committed)
            subprocess.run(["mount", "-o", "remount,size=64m", str(tiny_disk)], check=True)
            deadline = time.monotonic() + 30
            while True:
                code, offset = produce(client, topic, b"after")
                if code == 0:
                    break
                assert code in (E.kafka_storage_error, E.not_leader_or_follower), code
                assert time.monotonic() < deadline, "produce did not resume"
                time.sleep(0.2)
            acked[offset] = b"after"
            fetched = client.request(1, 12, {
                "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 64 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
                "forgotten_topics_data": [], "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                     "last_fetched_epoch": -1, "log_start_offset": -1,
                     "partition_max_bytes": 64 << 20}]}]})
            data = bytes(fetched.responses[0].partitions[0].records or b"")
            got = {r.offset: r.value for pos, h in iter_batches(data)
                   for r in decode_records(data[pos:pos + h.size])}
            assert all(got.get(o) == v for o, v in acked.items()), \
                "an acknowledged record was lost"
            client.close()
        finally:
            broker.kill()
    finally:
        gateway.kill()
