"""A cluster broker's own parts (headwater.storage=shared), beside the assembly
(`broker.py`) that builds them: the parts themselves, and the controller as the shared
metadata log drives it (taking and losing the controller lease)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode as E

from .coordinator.runtime import CoordinatorRuntime
from .log.store import LocalStore
from .metadata import records as R
from .metadata.controller import METADATA_TOPIC, Controller, ControllerError
from .security.scram import MECHANISMS, MIN_ITERATIONS, credential, salted_password
from .shared.metadata_log import SharedMetadata
from .shared.node import ClusterNode
from .shared.store import SharedStore
from .txn.producer_id_blocks import ProducerIdBlocks


@dataclass(frozen=True)
class ClusterParts:
    """A cluster broker's own parts (headwater.storage=shared), built together by
    `open_shared`, so that one test of one field decides local-or-cluster: the shared
    log, its metadata log, this broker's place in the cluster and the producer ids it
    hands out (blocks from the controller)."""

    shared: SharedStore
    meta: SharedMetadata
    node: ClusterNode
    producer_id_blocks: ProducerIdBlocks
    cluster_id: str


def check_controller(meta: SharedMetadata) -> None:
    """The controller's `writer_check` in a cluster: it writes only while this broker
    holds the controller lease."""
    if not meta.active:
        raise ControllerError(E.not_controller,
                              "this broker is not the controller; ask the controller "
                              "(Metadata's controller_id)")


class ControllerTarget:
    """The controller as the shared metadata log drives it (`MetadataTarget`): `runtimes`
    are the coordinators', which take every shard over with the lease unless each shard
    is `spread` on its own; `local` reopens the metadata log after the lease is lost;
    `own_user` is the brokers' SCRAM user (`inter_broker.own_scram_user`), written when
    the metadata has no credential for it."""

    def __init__(self, controller: Controller, runtimes: list[CoordinatorRuntime],
                 shared: SharedStore, local: LocalStore, *, spread: bool,
                 leads: Callable[[], bool],
                 own_user: tuple[str, str, str] | None = None) -> None:
        self._own_user = own_user
        self._controller = controller
        self._runtimes = runtimes
        self._shared = shared
        self._local = local
        self._spread = spread
        self._leads = leads

    def end_offset(self) -> int:
        return self._controller.log.log_end_offset

    def read(self, start: int, end: int) -> bytes:
        return self._controller.log.read(start, 1 << 62, end)

    def follow(self, data: bytes) -> None:
        self._controller.follow(data)

    def activate(self) -> None:
        """Took the controller lease: write, create the internal topics if new, and
        take the coordinators over (their partitions follow the controller)."""
        controller = self._controller
        controller.activate()
        if self._own_user is not None:
            self._ensure_user(*self._own_user)
        for runtime in self._runtimes:
            controller.ensure_internal_topic(runtime.topic, runtime.num_partitions,
                                             runtime.topic_configs)
        self._shared.rebalance()
        if not self._spread:
            for runtime in self._runtimes:
                runtime.take_all(self._leads)

    def _ensure_user(self, name: str, mechanism: str, password: str) -> None:
        """The brokers' SCRAM credential, written once: kept as it is when present (an
        operator may have set it with AlterUserScramCredentials)."""
        controller = self._controller
        mechanism_id = MECHANISMS[mechanism][0]
        if (name, mechanism_id) in controller.image.scram:
            return
        salt = os.urandom(32)
        cred = credential(mechanism, salted_password(mechanism, password, salt,
                                                     MIN_ITERATIONS), salt, MIN_ITERATIONS)
        controller.commit([R.UserScramCredentialRecord(
            name, mechanism_id, cred.salt, cred.stored_key, cred.server_key,
            cred.iterations)])

    def reload(self) -> None:
        """Lost the controller lease: the coordinators stop serving, their partitions
        go to the next controller; the metadata log starts again from PostgreSQL's."""
        if not self._spread:
            for runtime in self._runtimes:
                runtime.release_all()
        self._shared.rebalance()
        meta_log = self._local.reopen_reserved(METADATA_TOPIC, self._controller.log.config)
        self._controller.reload(meta_log)
