"""ApiVersions (key 18): advertises exactly the dispatch table, and (v3+) the feature
levels headwater implements, as a KRaft broker does (`kafka-features describe`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..metadata.features import (
    SUPPORTED_FEATURES,
    finalized_epoch,
    finalized_features,
)
from ..wire.dispatch import Dispatcher, RequestContext
from .services import HasIdentity, HasImage


class Services(HasImage, HasIdentity, Protocol):
    """What these handlers use of the broker."""


def _levels(features: Mapping[str, int]) -> list[dict[str, Any]]:
    return [{"name": k, "min_version_level": v, "max_version_level": v}
            for k, v in features.items()]


# Kafka's ApiVersionsRequest.isValid (v3+): client software name and version.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def request_error(req: Any, version: int, cluster_id: str, node_id: int) -> int:
    """Kafka 4.4's checks before answering: v3+ a software name and version of its
    pattern (INVALID_REQUEST); v5 (KIP-1242) the expected cluster id and node id, both or
    neither (INVALID_REQUEST), and if given this cluster's and this node's, else
    REBOOTSTRAP_REQUIRED (the client reached another cluster or node than it meant)."""
    if version >= 3 and not (_SOFTWARE.fullmatch(req.client_software_name or "")
                             and _SOFTWARE.fullmatch(req.client_software_version or "")):
        return E.invalid_request
    if version >= 5:
        expected_cluster, expected_node = req.cluster_id, req.node_id
        if (expected_cluster is None) != (expected_node < 0):
            return E.invalid_request
        if expected_cluster is not None and (expected_cluster != cluster_id
                                             or expected_node != node_id):
            return E.rebootstrap_required
    return 0


def register(dispatcher: Dispatcher, broker: Services) -> None:
    def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
        code = request_error(req, ctx.api_version, broker.cluster_id, broker.node_id)
        if code:  # Kafka's error answer: the code alone
            return {"error_code": code, "api_keys": (), "throttle_time": 0}
        return {
            "error_code": 0,
            "api_keys": [{"api_key": e.api_key, "min_version": e.min_version,
                          "max_version": e.max_version} for e in dispatcher.entries()],
            "throttle_time": 0,
            "supported_features": [{"name": k, "min_version": lo, "max_version": hi}
                                   for k, (lo, hi) in SUPPORTED_FEATURES.items()],
            "finalized_features_epoch": finalized_epoch(broker.image),
            "finalized_features": _levels(finalized_features(broker.image)),
        }

    # v5: KIP-1242 (Kafka 4.4), schema in wire/schemas.py
    dispatcher.register(18, 0, 5, handle)
