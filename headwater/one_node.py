"""The cluster as a single broker sees it (headwater.storage=local): itself the only
broker, the controller and every coordinator.

It answers the questions the handlers ask of a cluster's topology (`Topology` in
`api/services.py`), so that Metadata, FindCoordinator, DescribeCluster and the quorum
APIs ask the same thing on one node and on the shared log, and the assembly decides
which once (`broker.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class OneNodePeer:
    """This broker named to clients: its address is the advertised one of the listener
    the request came in on."""

    node_id: int
    addresses: Callable[[str | None], tuple[str, int]]
    rack: str | None = None

    def address(self, listener: str | None) -> tuple[str, int]:
        return self.addresses(listener)


class OneNode:
    """Topology of a one-broker cluster."""

    spreads_coordinators = False

    def __init__(self, node_id: int,
                 addresses: Callable[[str | None], tuple[str, int]]) -> None:
        self.node_id = node_id
        # The rack is not named on one node: Metadata showed none (as before the
        # topology was one object); the rack-aware assignors have one broker to place.
        self._self = OneNodePeer(node_id, addresses)

    def brokers(self) -> list[OneNodePeer]:
        return [self._self]

    def is_controller(self) -> bool:
        return True

    def controller_id(self) -> int:
        return self.node_id

    def coordinator(self, key: str, key_type: int = 0) -> OneNodePeer:
        return self._self
