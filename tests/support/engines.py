"""The shared log's engines for tests: a private PostgreSQL (initdb + pg_ctl in a temp
dir, on a free loopback port) and a versitygw S3 server over a temp directory. Both are
the real servers, started and stopped by the test; no system service is used.

PostgreSQL refuses to run as root: as root, its directory (a fresh one under the system
temp dir: pytest's are private to root) is handed to the `postgres` user, its commands
run through `runuser`, and `remove` deletes it.

Either serves TLS when given a PKI (`tests/support/secured.py`, `make_pki`): its server
certificate for 127.0.0.1. PostgreSQL then takes only TLS connections on TCP (`hostssl`),
with a password and a client certificate signed by the PKI's CA, and its `dsn` names
them as libpq does (`sslmode=verify-full&sslrootcert=...&sslcert=...&sslkey=...`);
versitygw serves HTTPS, its secret key given in its environment rather than on its
command line (a test looks for secrets in every process's command line).
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
    """One private PostgreSQL cluster: `start`, `stop`, `kill` (immediate), `dsn`; over
    TLS only, with `password` and client certificates, when given a `pki`."""

    def __init__(self, base: Path, pki: Path | None = None, password: str = "") -> None:
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            base = Path(tempfile.mkdtemp(prefix="headwater-pg-"))
            shutil.chown(base, "postgres")
        self.base = base
        self.data = base / "pgdata"
        self.sockets = base / "sock"
        self.log = base / "postgres.log"
        self.port = free_port()
        self.pki = pki
        self.password = password

    @property
    def dsn(self) -> str:
        return self.dsn_for("postgres")

    def dsn_for(self, database: str, password: str | None = None,
                rootcert: Path | None = None) -> str:
        """The DSN of `database` on this server (with TLS: `rootcert`, the CA trusted,
        by default the PKI's; `password`, by default the server's)."""
        password = self.password if password is None else password
        user = f"headwater:{password}" if password else "headwater"
        dsn = f"postgresql://{user}@127.0.0.1:{self.port}/{database}"
        if self.pki is None:
            return dsn
        rootcert = rootcert or self.pki / "ca.pem"
        return (f"{dsn}?sslmode=verify-full&sslrootcert={rootcert}"
                f"&sslcert={self.pki / 'client.crt'}&sslkey={self.pki / 'client.key'}")

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
            self._initdb()
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w",
                  "-t", "60", "-o",
                  f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 "
                  f"-c max_connections=200 -c shared_buffers=64MB{self._tls_options()}",
                  "start")
        wait_for_port(self.port, 30, "PostgreSQL")
        return self

    def _initdb(self) -> None:
        args = ["-D", str(self.data), "-U", "headwater", "-E", "UTF8", "--no-sync"]
        if self.password:
            pwfile = self._own(self.base / "pwfile", self.password)
            args += ["--auth=scram-sha-256", f"--pwfile={pwfile}"]
        else:
            args.append("--auth=trust")
        self._run(_pg_bin("initdb"), *args)
        if self.pki is not None:  # TCP only over TLS, with a password and a client cert
            (self.data / "pg_hba.conf").write_text(
                "local all all trust\n"
                "hostssl all all 127.0.0.1/32 scram-sha-256 clientcert=verify-ca\n")

    def _own(self, path: Path, text: str) -> Path:
        """A file only the server's user reads (PostgreSQL refuses a key file others
        may read)."""
        path.write_text(text)
        path.chmod(0o600)
        if self._as_postgres:
            shutil.chown(path, "postgres")
        return path

    def _tls_options(self) -> str:
        if self.pki is None:
            return ""
        tls = self.base / "tls"
        tls.mkdir(exist_ok=True)
        if self._as_postgres:
            shutil.chown(tls, "postgres")
        names = ("server.crt", "server.key", "ca.pem")
        cert, key, ca = (self._own(tls / n, (self.pki / n).read_text()) for n in names)
        return (f" -c ssl=on -c ssl_cert_file={cert} -c ssl_key_file={key} "
                f"-c ssl_ca_file={ca}")

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
    """versitygw serving a directory over the S3 API; a bucket is a directory in it.
    Over HTTPS when given a `pki`; `secret_key` the root user's (the module's default)."""

    def __init__(self, base: Path, bucket: str = "headwater", pki: Path | None = None,
                 secret_key: str = SECRET_KEY) -> None:
        self.base = base
        self.root = base / "s3"
        self.bucket = bucket
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.pki = pki
        self.secret_key = secret_key

    @property
    def endpoint(self) -> str:
        return f"{'https' if self.pki else 'http'}://127.0.0.1:{self.port}"

    def settings(self, prefix: str = "") -> dict[str, str]:
        """The broker config keys that reach this server (trusting the PKI's CA)."""
        out = {"headwater.shared.objects": f"s3://{self.bucket}/{prefix}".rstrip("/"),
               "headwater.shared.objects.endpoint": self.endpoint,
               "headwater.shared.objects.access.key": ACCESS_KEY,
               "headwater.shared.objects.secret.key": self.secret_key}
        if self.pki is not None:
            out["headwater.shared.objects.ssl.truststore.location"] = str(self.pki / "ca.pem")
        return out

    def start(self) -> VersityGateway:
        binary = str(VERSITYGW) if VERSITYGW.exists() else shutil.which("versitygw")
        if binary is None:
            raise RuntimeError("versitygw not found: `make test` installs it into .tools/bin")
        (self.root / self.bucket).mkdir(parents=True, exist_ok=True)
        log = open(self.base / "versitygw.log", "ab")  # noqa: SIM115 (kept by the child)
        tls = ([] if self.pki is None else
               ["--cert", str(self.pki / "server.crt"), "--key", str(self.pki / "server.key")])
        # --keep-alive: versitygw answers every request with "Connection: close" without
        # it, so each GET and PUT paid a new TCP connection (S3 keeps them alive).
        # --data-integrity-etag: ETags from a CRC rather than MD5. Nothing here reads
        # ETags, and on a machine it shares with the brokers the gateway's MD5 cost as
        # much CPU as the broker itself (bench/README.md).
        self.proc = subprocess.Popen(
            [binary, "--access", ACCESS_KEY, *tls,
             "--port", f"127.0.0.1:{self.port}", "--keep-alive",
             "posix", "--data-integrity-etag",
             str(self.root)],
            env={**os.environ, "ROOT_SECRET_ACCESS_KEY": self.secret_key},  # not in `ps`
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
    return postgres.dsn_for(name)


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


#: A file config provider (config_providers.py), declared as Kafka declares it.
FILE_PROVIDER = ("config.providers=file",
                 "config.providers.file.class="
                 "org.apache.kafka.common.config.provider.FileConfigProvider")
SECRET_KEYS = ("headwater.shared.database", "headwater.shared.objects.secret.key")


def secrets_from_file(args: list[str], path: Path,
                      keys: tuple[str, ...] = SECRET_KEYS) -> list[str]:
    """`args` (`--override` options, as `shared_broker_args`'s) with the values of `keys`
    moved into the properties file `path` (0600) and referred to as
    `${file:path:key}`, the file provider declared: no secret on the command line."""
    out: list[str] = []
    found: dict[str, str] = {}
    for flag, arg in zip(args[::2], args[1::2], strict=True):
        key, _, value = arg.partition("=")
        if key in keys:
            found[key] = value
            arg = f"{key}=${{file:{path}:{key}}}"
        out += [flag, arg]
    path.write_text("".join(f"{k}={v}\n" for k, v in found.items()))
    path.chmod(0o600)
    return out + [a for p in FILE_PROVIDER for a in ("--override", p)]
