"""The console as a process: against a SASL_SSL listener with the broker's own
credentials (`--command-config`, as the CLI takes them), serving HTTPS
(`--tls-cert/--tls-key`); and started by `headwater serve --console-listen` beside the
broker it shows, stopped with it."""

from __future__ import annotations

import re
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import free_port
from tests.support.console_process import ConsoleProcess
from tests.support.secured import SecuredBroker, make_pki

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    d = tmp_path_factory.mktemp("console-sasl")
    broker = SecuredBroker(make_pki(d / "pki"), d / "data").start()
    yield broker
    broker.stop()


def _get(url: str, context: ssl.SSLContext | None = None, timeout: float = 20.0) -> str:
    """The page at `url` once it answers 200 (polled with a deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10, context=context) as resp:
                return resp.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_console_over_sasl_ssl_serving_https(secured, tmp_path):
    props = secured.sasl_props("alice")
    config = tmp_path / "client.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    admin = AdminClient({"bootstrap.servers": secured.bootstrap("PLAINTEXT")})
    admin.create_topics([NewTopic("over-sasl", 4, 1)])["over-sasl"].result(15)
    console = ConsoleProcess(secured.bootstrap("SASL_SSL"), tmp_path / "console.log",
                             "--command-config", str(config),
                             "--tls-cert", str(secured.pki / "server.crt"),
                             "--tls-key", str(secured.pki / "server.key"))
    console.url = console.url.replace("http://", "https://")
    try:
        console.start_process()
        trust = ssl.create_default_context(cafile=str(secured.pki / "ca.pem"))
        page = _get(console.url + "/topics/over-sasl", trust)
        assert page.count('<tr data-partition="') == 4
        overview = _get(console.url + "/", trust)
        assert 'data-topic="over-sasl"' in overview
        assert secured.bootstrap("SASL_SSL") in overview
    finally:
        console.stop()


@pytest.mark.parametrize("kill", [False, True], ids=["stop", "kill-9"])
def test_serve_runs_the_console_beside_the_broker(broker_factory, kill):
    port = free_port()
    broker = broker_factory("--console-listen", f"127.0.0.1:{port}")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("beside", 1, 1)])["beside"].result(15)
    page = _get(f"http://127.0.0.1:{port}/")
    assert 'data-topic="beside"' in page and broker.bootstrap in page
    log = broker.log_path.read_text(errors="replace")  # whole: on the shared log the
    found = re.search(  # line is far from the tail
        rf"console on http://127.0.0.1:{port}/ \(process (\d+)\)", log)
    assert found, log[-5000:]
    child = int(found.group(1))
    if kill:
        broker.kill()
    else:
        broker.stop()
    deadline = time.monotonic() + 15
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the console outlived its broker"


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by init, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_an_unreachable_broker_is_one_line_on_the_page(tmp_path):
    console = ConsoleProcess(f"127.0.0.1:{free_port()}", tmp_path / "console.log").start()
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(console.url + "/", timeout=20)
        assert refused.value.code == 502
        page = refused.value.read().decode()
        assert 'id="error">cannot reach a broker at 127.0.0.1:' in page
        assert "hint: is it running?" in page
    finally:
        console.stop()
