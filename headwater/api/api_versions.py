"""ApiVersions (key 18): advertises exactly the dispatch table, and (v3+) the feature
levels headwater implements, as a KRaft broker does (`kafka-features describe`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as E

from ..metadata.records import METADATA_VERSION
from ..wire.dispatch import Dispatcher, RequestContext

if TYPE_CHECKING:
    from ..broker import Broker
    from ..metadata.image import MetadataImage


# Kafka's feature levels (MetadataVersion / GroupVersion / TransactionVersion of 4.4).
# metadata.version 29 is 4.2-IV1 (see records.py); group.version 1 is KIP-848's consumers;
# transaction.version 2 (KIP-890 part 2, Kafka 4.0's default): the coordinator bumps the
# epoch at every EndTxn v5 and adds partitions on Produce v12 / TxnOffsetCommit v5 (see
# docs/transactions-v2.md); Java producers (4.x) switch to that protocol when they see it
# finalized. Level 0 features are supported but not finalized, as Kafka reports them.
# share.version 1 (KIP-932 share groups, finalized by default since Kafka 4.2): the Java
# client and Kafka's tools look for it before using share groups. share.version 2 (Kafka
# 4.4's default) adds the share groups' dead-letter topics (KIP-1191): below it a group's
# errors.deadletterqueue.topic.name is ignored (records are archived), as Kafka's
# SharePartition.isDLQEnabledForGroup does.
# eligible.leader.replicas.version and streams.version (finalized by Kafka 4.4) are not
# supported: one node has no ELR to keep, and headwater has no streams groups.
SUPPORTED_FEATURES = {"metadata.version": (7, METADATA_VERSION), "kraft.version": (0, 0),
                      "group.version": (0, 1), "transaction.version": (0, 2),
                      "share.version": (0, 2)}
# The levels of a cluster that has no FeatureLevelRecord for a feature (a new metadata log
# holds only metadata.version; UpdateFeatures writes the others, level 0 included).
FINALIZED_FEATURES = {"metadata.version": METADATA_VERSION, "group.version": 1, "share.version": 2,
                      "transaction.version": 2}


def finalized_features(image: MetadataImage) -> dict[str, int]:
    """The finalized levels: the image's FeatureLevelRecords over FINALIZED_FEATURES; a
    feature at level 0 is not finalized (Kafka leaves it out of ApiVersions)."""
    levels: dict[str, int] = dict(FINALIZED_FEATURES)
    levels.update(image.features)
    return {k: v for k, v in levels.items() if v > 0}


def feature_level(image: MetadataImage, name: str) -> int:
    return finalized_features(image).get(name, 0)


def finalized_epoch(image: MetadataImage) -> int:
    """Kafka's finalized-features epoch is the offset of the metadata image it was read
    from (never below 1 here, as before UpdateFeatures existed)."""
    return max(image.offset, 1)


def _levels(features: Mapping[str, int]) -> list[dict]:
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


def register(dispatcher: Dispatcher, broker: Broker) -> None:
    def handle(ctx: RequestContext, req: Any) -> dict:
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
