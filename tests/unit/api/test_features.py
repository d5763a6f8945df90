"""UpdateFeatures' validation (headwater/api/features.py) and the finalized levels read
from the metadata image (api_versions.finalized_features)."""

from __future__ import annotations

import pytest

from headwater.api import features as F
from headwater.metadata import records as R
from headwater.metadata import snapshot
from headwater.metadata.features import FINALIZED_FEATURES, feature_level, finalized_features
from headwater.metadata.image import MetadataImage

CURRENT = {"metadata.version": 29, "group.version": 1, "share.version": 2}


def refusal(name: str, level: int, upgrade_type: int = F.UPGRADE) -> str:
    with pytest.raises(F._Refused) as err:
        F.check_update(1, CURRENT, name, level, upgrade_type)
    return str(err.value)


def test_java_hash_map_order():
    """java.util.HashMap's iteration order, as Kafka's controller walks the updates
    (read from Kafka 4.4: group.version's error is reported before the others')."""
    assert F._java_hash("a") == 97 and F._java_hash("hello") == 99162322
    assert F._java_hash("share.version") == (-1228001847) & 0xFFFFFFFF
    assert F._java_order(["a.version", "b.version", "group.version", "share.version",
                          "zz", "metadata.version"])[0] == "group.version"
    many = [f"f{i}" for i in range(40)]
    assert sorted(F._java_order(many)) == sorted(many)


def test_refusals_have_kafkas_messages():
    assert refusal("share.version", -1) == (
        "Invalid update version -1 for feature share.version. A feature version cannot be "
        "less than 0.")
    assert refusal("share.version", 1, 7).endswith(
        "The controller does not support the given upgrade type.")
    assert refusal("foo.version", 1).endswith("Local controller 1 does not support this "
                                              "feature.")
    assert refusal("foo.version", 0).endswith("Feature foo.version not found.")
    assert refusal("share.version", 3).endswith("Local controller 1 only supports "
                                                "versions 0-2")
    assert refusal("share.version", 1).endswith(
        "Can't downgrade the version of this feature without setting the upgrade type to "
        "either safe or unsafe downgrade.")
    assert refusal("metadata.version", 30).endswith("only supports versions 7-29")
    assert refusal("metadata.version", 22, F.SAFE_DOWNGRADE) == (
        "Unsupported metadata.version downgrade from 29 to 22. Refusing to perform the "
        "requested downgrade because it might delete metadata information.")
    assert refusal("metadata.version", 22, F.UNSAFE_DOWNGRADE).endswith(
        "Unsafe metadata downgrade is not supported in this version.")
    assert refusal("kraft.version", 1).endswith("does not support this feature.")


def test_accepted_updates_and_their_records():
    check = F.check_update
    assert check(1, CURRENT, "share.version", 1, F.SAFE_DOWNGRADE) == R.FeatureLevelRecord(
        "share.version", 1)
    assert check(1, CURRENT, "share.version", 2, F.UPGRADE) == R.FeatureLevelRecord(
        "share.version", 2)
    assert check(1, CURRENT, "group.version", 0, F.UNSAFE_DOWNGRADE) == (
        R.FeatureLevelRecord("group.version", 0))
    assert check(1, CURRENT, "metadata.version", 23, F.SAFE_DOWNGRADE) == (
        R.FeatureLevelRecord("metadata.version", 23))
    assert check(1, CURRENT, "kraft.version", 0, F.SAFE_DOWNGRADE) is None


def test_metadata_changed_is_kafkas_check():
    assert not F._metadata_changed(29, 23)  # 24 to 29 changed nothing
    assert F._metadata_changed(29, 22)  # 23 (4.0-IV1) did
    assert F._metadata_changed(33, 32)


def test_finalized_levels_default_and_disabled_features_survive_a_snapshot():
    """No record: headwater's defaults. A record at level 0 disables the feature (left
    out of the finalized levels) and, unlike a feature never set, survives a snapshot."""
    image = MetadataImage().apply([R.FeatureLevelRecord("metadata.version",
                                                        R.METADATA_VERSION)], 0)
    assert finalized_features(image) == FINALIZED_FEATURES
    image = image.apply([R.FeatureLevelRecord("group.version", 0),
                         R.FeatureLevelRecord("share.version", 1)], 2)
    assert finalized_features(image) == {"metadata.version": R.METADATA_VERSION,
                                         "share.version": 1, "transaction.version": 2,
                                         "streams.version": 1}
    assert feature_level(image, "group.version") == 0
    restored = MetadataImage().apply(snapshot.image_records(image), 2)
    assert finalized_features(restored) == finalized_features(image)
