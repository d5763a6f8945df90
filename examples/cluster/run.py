"""`make cluster`: a three-broker headwater cluster on loopback, for trying it.

Starts a private PostgreSQL (initdb + pg_ctl), versitygw (S3 API over a directory) and
three brokers on the shared log (127.0.0.1:19091-19093), prints the bootstrap list, and
stops them all on Ctrl-C. Everything lives under ./cluster (PostgreSQL's data under a
temp directory its own user can reach when run as root) and starts afresh each time.
"""

from __future__ import annotations

import shutil
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.broker_process import BrokerProcess  # noqa: E402
from tests.support.engines import PostgresServer, VersityGateway, shared_broker_args  # noqa: E402

PORTS = {1: 19091, 2: 19092, 3: 19093}


def main() -> int:
    base = Path(sys.argv[1] if len(sys.argv) > 1 else "cluster").resolve()
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    postgres = PostgresServer(base / "postgres").start()
    gateway = VersityGateway(base / "objects")
    gateway.base.mkdir(parents=True, exist_ok=True)
    gateway.start()
    brokers: list[BrokerProcess] = []
    try:
        shared = shared_broker_args(postgres, gateway, base / "shared")
        for node, port in PORTS.items():
            brokers.append(BrokerProcess(base / f"broker-{node}", *shared, "--override",
                                         f"node.id={node}", port=port).start())
        dsn = next(a.split("=", 1)[1] for a in shared
                   if a.startswith("headwater.shared.database="))
        bootstrap = ",".join(f"127.0.0.1:{p}" for p in PORTS.values())
        print(f"headwater cluster up: 3 brokers on the shared log\n"
              f"  bootstrap.servers={bootstrap}\n"
              f"  PostgreSQL {dsn}\n  versitygw {gateway.endpoint}\n"
              f"  broker logs {base}/broker-N-broker.log\nCtrl-C stops them all.",
              flush=True)
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        for proc in brokers:
            proc.stop()
        gateway.kill()
        postgres.stop()
        print("stopped", flush=True)
    return 0


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupt)
    sys.exit(main())
