"""A broker whose secrets are not on its command line (issue 35): its properties file
declares Kafka's FileConfigProvider and its SASL listener's JAAS config refers to a
secrets file; a client logs in with the password kept there, and neither the command
line nor the broker's log shows it. A reference that cannot be resolved stops the broker
with one line naming the setting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.support.broker_process import BrokerProcess
from tests.support.ports import free_port

pytestmark = pytest.mark.timeout(120)

SECRET = "kept-in-a-file-7f3a"
FILE = "org.apache.kafka.common.config.provider.FileConfigProvider"


def properties(tmp: Path, secrets: Path) -> Path:
    path = tmp / "server.properties"
    path.write_text(
        "config.providers=file\n"
        f"config.providers.file.class={FILE}\n"
        f"config.providers.file.param.allowed.paths={secrets.parent}\n"
        "listener.name.sasl_plaintext.plain.sasl.jaas.config="
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_alice="${{file:{secrets}:alice.password}}";\n')
    return path


def test_a_password_from_a_secrets_file_logs_in_and_is_shown_nowhere(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets" / "broker.properties"
    secrets.parent.mkdir()
    secrets.write_text(f"alice.password={SECRET}\n")
    port = free_port()
    broker = BrokerProcess(tmp_path / "data", "--config", str(properties(tmp_path, secrets)),
                           "--override", f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
                           port=port)
    broker.start()
    try:
        assert broker.proc is not None
        cmdline = Path(f"/proc/{broker.proc.pid}/cmdline").read_bytes()
        assert SECRET.encode() not in cmdline
        admin = AdminClient({"bootstrap.servers": broker.bootstrap,
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                             "sasl.username": "alice", "sasl.password": SECRET})
        assert admin.list_topics(timeout=15).brokers  # logged in with the file's password
    finally:
        broker.kill()
    assert SECRET not in broker.log_path.read_text(errors="replace")


def test_a_reference_that_cannot_be_resolved_stops_the_broker_naming_it(
        tmp_path: Path) -> None:
    missing = tmp_path / "secrets" / "absent.properties"
    config = properties(tmp_path, missing)
    out = subprocess.run(
        [sys.executable, "-m", "headwater.cli", "serve", "--data-dir", str(tmp_path / "data"),
         "--config", str(config), "--listen", f"127.0.0.1:{free_port()}"],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    lines = [line for line in out.stderr.splitlines() if "cannot start" in line]
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert "listener.name.sasl_plaintext.plain.sasl.jaas.config" in lines[0]
    assert f"cannot read {missing}" in lines[0]
