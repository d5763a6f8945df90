"""The feature levels headwater implements and the cluster's finalized levels (Kafka's
`kafka-features describe`): ApiVersions advertises them, UpdateFeatures changes them,
and services gate behaviour on them (share groups' dead-letter topics on share.version 2).
"""

from __future__ import annotations

from .image import MetadataImage
from .records import METADATA_VERSION

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
# streams.version 1 (KIP-1071 streams groups, finalized by default since Kafka 4.2): the
# StreamsGroupHeartbeat/Describe APIs are refused below it. eligible.leader.replicas.version
# (finalized by Kafka 4.4) is not supported: one node has no ELR to keep.
SUPPORTED_FEATURES = {"metadata.version": (7, METADATA_VERSION), "kraft.version": (0, 0),
                      "group.version": (0, 1), "transaction.version": (0, 2),
                      "share.version": (0, 2), "streams.version": (0, 1)}
# The levels of a cluster that has no FeatureLevelRecord for a feature (a new metadata log
# holds only metadata.version; UpdateFeatures writes the others, level 0 included).
FINALIZED_FEATURES = {"metadata.version": METADATA_VERSION, "group.version": 1, "share.version": 2,
                      "transaction.version": 2, "streams.version": 1}


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
