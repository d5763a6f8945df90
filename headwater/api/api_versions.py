"""ApiVersions (key 18): advertises exactly the dispatch table, and (v3+) the feature
levels headwater implements, as a KRaft broker does (`kafka-features describe`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..metadata.records import METADATA_VERSION
from ..wire.dispatch import Dispatcher, RequestContext

if TYPE_CHECKING:
    from ..broker import Broker


# Kafka's feature levels (MetadataVersion / GroupVersion / TransactionVersion of 4.3).
# metadata.version 25 is 4.0-IV3; group.version 1 is KIP-848's consumer protocol;
# transaction.version 2 (KIP-890 part 2, Kafka 4.0's default): the coordinator bumps the
# epoch at every EndTxn v5 and adds partitions on Produce v12 / TxnOffsetCommit v5 (see
# docs/transactions-v2.md); Java producers (4.x) switch to that protocol when they see it
# finalized. Level 0 features are supported but not finalized, as Kafka reports them.
# share.version 1 (KIP-932 share groups, finalized by default since Kafka 4.2): the Java
# client and Kafka's tools look for it before using share groups.
SUPPORTED_FEATURES = {"metadata.version": (7, METADATA_VERSION), "kraft.version": (0, 0),
                      "group.version": (0, 1), "transaction.version": (0, 2),
                      "share.version": (0, 1)}
FINALIZED_FEATURES = {"metadata.version": METADATA_VERSION, "group.version": 1, "share.version": 1,
                      "transaction.version": 2}
FINALIZED_FEATURES_EPOCH = 1


def register(dispatcher: Dispatcher, broker: Broker) -> None:
    def handle(ctx: RequestContext, req: Any) -> dict:
        return {
            "error_code": 0,
            "api_keys": [{"api_key": e.api_key, "min_version": e.min_version,
                          "max_version": e.max_version} for e in dispatcher.entries()],
            "throttle_time": 0,
            "supported_features": [{"name": k, "min_version": lo, "max_version": hi}
                                   for k, (lo, hi) in SUPPORTED_FEATURES.items()],
            "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
            "finalized_features": [{"name": k, "min_version_level": v,
                                    "max_version_level": v}
                                   for k, v in FINALIZED_FEATURES.items()],
        }

    dispatcher.register(18, 0, 4, handle)
