"""The shared log's engines for tests: a private PostgreSQL (initdb + pg_ctl in a temp
dir, on a free loopback port) and a versitygw S3 server over a temp directory. Both are
the real servers, started and stopped by the test; no system service is used.

PostgreSQL refuses to run as root: as root, its directory (a fresh one under the system
temp dir: pytest's are private to root) is handed to the `postgres` user, its commands
run through `runuser`, and `remove` deletes it.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.broker_process import free_port

ROOT = Path(__file__).resolve().parents[2]
VERSITYGW = ROOT / ".tools" / "bin" / "versitygw"
ACCESS_KEY, SECRET_KEY = "headwater", "headwater-secret"


def wait_for_port(port: int, deadline_s: float, what: str) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {deadline_s} s")


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} not found: `make test` installs PostgreSQL (postgresql)")
    return path


class PostgresServer:
    """One private PostgreSQL cluster: `start`, `stop`, `kill` (immediate), `dsn`."""

    def __init__(self, base: Path) -> None:
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            base = Path(tempfile.mkdtemp(prefix="headwater-pg-"))
            shutil.chown(base, "postgres")
        self.base = base
        self.data = base / "pgdata"
        self.sockets = base / "sock"
        self.log = base / "postgres.log"
        self.port = free_port()

    @property
    def dsn(self) -> str:
        return f"postgresql://headwater@127.0.0.1:{self.port}/postgres"

    def _run(self, *cmd: str) -> None:
        full = (["runuser", "-u", "postgres", "--", *cmd] if self._as_postgres else list(cmd))
        subprocess.run(full, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=120)

    def start(self) -> PostgresServer:
        if not self.data.exists():
            self.base.mkdir(parents=True, exist_ok=True)
            self.sockets.mkdir(exist_ok=True)
            if self._as_postgres:
                shutil.chown(self.sockets, "postgres")
            self._run(_pg_bin("initdb"), "-D", str(self.data), "-U", "headwater",
                      "--auth=trust", "-E", "UTF8", "--no-sync")
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w",
                  "-t", "60", "-o",
                  f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 "
                  "-c max_connections=200 -c shared_buffers=64MB", "start")
        wait_for_port(self.port, 30, "PostgreSQL")
        return self

    def stop(self, mode: str = "fast") -> None:
        try:
            self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")
        except subprocess.CalledProcessError:
            pass  # not running

    def kill(self) -> None:
        """`pg_ctl -m immediate`: an abrupt stop, recovery at the next start."""
        self.stop("immediate")

    def remove(self) -> None:
        """Stop (immediately) and delete the cluster's directory."""
        self.stop("immediate")
        shutil.rmtree(self.base, ignore_errors=True)


class VersityGateway:
    """versitygw serving a directory over the S3 API; a bucket is a directory in it."""

    def __init__(self, base: Path, bucket: str = "headwater") -> None:
        self.base = base
        self.root = base / "s3"
        self.bucket = bucket
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def settings(self, prefix: str = "") -> dict[str, str]:
        """The broker config keys that reach this server."""
        return {"headwater.shared.objects": f"s3://{self.bucket}/{prefix}".rstrip("/"),
                "headwater.shared.objects.endpoint": self.endpoint,
                "headwater.shared.objects.access.key": ACCESS_KEY,
                "headwater.shared.objects.secret.key": SECRET_KEY}

    def start(self) -> VersityGateway:
        binary = str(VERSITYGW) if VERSITYGW.exists() else shutil.which("versitygw")
        if binary is None:
            raise RuntimeError("versitygw not found: `make test` installs it into .tools/bin")
        (self.root / self.bucket).mkdir(parents=True, exist_ok=True)
        log = open(self.base / "versitygw.log", "ab")  # noqa: SIM115 (kept by the child)
        # --keep-alive: versitygw answers every request with "Connection: close" without
        # it, so each GET and PUT paid a new TCP connection (S3 keeps them alive).
        # --data-integrity-etag: ETags from a CRC rather than MD5. Nothing here reads
        # ETags, and on a machine it shares with the brokers the gateway's MD5 cost as
        # much CPU as the broker itself (bench/README.md).
        self.proc = subprocess.Popen(
            [binary, "--access", ACCESS_KEY, "--secret", SECRET_KEY,
             "--port", f"127.0.0.1:{self.port}", "--keep-alive",
             "posix", "--data-integrity-etag",
             str(self.root)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for_port(self.port, 30, "versitygw")
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    stop = kill


async def create_database(postgres: PostgresServer, name: str | None = None) -> str:
    """A database on the server (a fresh name unless given; kept if it exists); its DSN."""
    import uuid

    import asyncpg

    name = name or f"db_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(postgres.dsn)
    try:
        if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return postgres.dsn.rsplit("/", 1)[0] + f"/{name}"


def shared_broker_args(postgres: PostgresServer, gateway: VersityGateway,
                       data_dir: Path) -> list[str]:
    """`--override` options putting a broker on the shared log: a database and an object
    prefix of `data_dir`'s own (created here if missing), so the same data dir finds
    the same shared state after a restart."""
    import asyncio
    import hashlib

    name = "db_" + hashlib.sha1(str(data_dir).encode()).hexdigest()[:16]
    dsn = asyncio.run(create_database(postgres, name))
    config = {"headwater.storage": "shared", "headwater.shared.database": dsn,
              **gateway.settings(name)}
    return [arg for key, value in config.items() for arg in ("--override", f"{key}={value}")]
