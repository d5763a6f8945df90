"""How the console reaches the cluster: the admin commands' connection options
(`--bootstrap-server`, `--command-config`, `--command-property`), kept once and handed to
the admin code as the argparse namespace it expects, so every request the console makes
is one the CLI makes too (same security, same one-line errors)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..admin.routing import Routed
from ..admin.wire_errors import open_client
from ..wire.client import RawClient

FIND_COORDINATOR = 10
GROUP_KEY, TRANSACTION_KEY, SHARE_KEY = 0, 1, 2


@dataclass(frozen=True)
class Target:
    """The cluster the console shows and the client settings it uses."""

    bootstrap_server: str
    command_config: str | None = None
    command_property: list[tuple[str, str]] = field(default_factory=list)

    def args(self, **extra: Any) -> argparse.Namespace:
        """The namespace an admin command function takes (plus its own options)."""
        return argparse.Namespace(bootstrap_server=self.bootstrap_server,
                                  command_config=self.command_config,
                                  command_property=list(self.command_property), **extra)

    @contextlib.contextmanager
    def client(self, server: str | None = None) -> Iterator[Any]:
        """A wire client to `server` (HOST:PORT), or to the cluster: its requests routed
        as Kafka's AdminClient routes them (a group's to its coordinator, end offsets to
        the leaders: `admin/routing.py`); closed after."""
        args = self.args()
        if server is not None:
            args.bootstrap_server = server
        raw = open_client(args)
        client = raw if server is not None else Routed(args, bootstrap=raw)
        try:
            yield client
        finally:
            client.close()

    @contextlib.contextmanager
    def coordinator(self, key: str, key_type: int) -> Iterator[RawClient]:
        """A client to the coordinator of `key` (FindCoordinator v6): the share
        coordinator of a share-partition, the coordinator of a transactional id."""
        with self.client() as raw:
            found = raw.request(FIND_COORDINATOR, 6, {"key_type": key_type,
                                                      "coordinator_keys": [key]})
            c = found.coordinators[0]
            if int(c.error_code):
                raise CoordinatorError(f"no coordinator for {key}: {c.error_code.name}")
            host, port = c.host, int(c.port)
        with self.client(f"{host}:{port}") as direct:
            yield direct


class CoordinatorError(RuntimeError):
    """FindCoordinator answered an error (e.g. CLUSTER_AUTHORIZATION_FAILED for a share
    key without ClusterAction)."""
