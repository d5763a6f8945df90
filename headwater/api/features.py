"""UpdateFeatures (key 57): finalized feature levels changed as Kafka 4.4's controller
(QuorumController.updateFeatures / FeatureControlManager) changes them, and written as
FeatureLevelRecords to the metadata log, so they survive a restart (and a snapshot).

Validation, per update in the order of Kafka's HashMap (`_java_order`), the first error
failing the whole request (no record written):
* upgrade type 1 (upgrade), 2 (safe downgrade) or 3 (unsafe downgrade); v0 always upgrades;
* a level >= 0, inside the range this broker supports (api_versions.SUPPORTED_FEATURES);
  an unknown feature is supported in no level but 0 ("Feature X not found." then);
* a lower level needs a downgrade type, a higher one the upgrade type;
* metadata.version: a downgrade across a version that changed the metadata
  (MetadataVersion.didMetadataChange) is refused, an unsafe one too;
* kraft.version: only its current level (0; headwater has no dynamic quorum).
validate_only (`kafka-features ... --dry-run`) validates and writes nothing. v0 and v1
answer per feature on success (message "NONE", as Kafka) and only the top-level error on
failure; v2 has only the top-level error.
"""

from __future__ import annotations

from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E
from kio.schema.update_features.v2.request import UpdateFeaturesRequest

from ..metadata import records as R
from ..metadata.controller import ControllerError
from ..metadata.features import SUPPORTED_FEATURES, feature_level, finalized_features
from ..security import acl as A
from ..wire.dispatch import ApiEntry, Dispatcher, Handler, Middleware, RequestContext, typed
from .services import HasAccess, HasController, HasIdentity, HasImage

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"

# MetadataVersion of Kafka 4.4 from 3.3-IV3 (level 7) on: the levels whose version
# changed the metadata (didMetadataChange), which a downgrade may not cross.
_METADATA_CHANGED = frozenset({7, 8, 11, 13, 14, 15, 17, 23, 30, 32, 33})
# The feature names Kafka 4.4 knows (Feature.java), for the "not found" of level 0.
_KNOWN = frozenset({METADATA_VERSION, KRAFT_VERSION, "transaction.version", "group.version",
                    "eligible.leader.replicas.version", "share.version", "streams.version"})


class Services(HasAccess, HasImage, HasController, HasIdentity, Protocol):
    """What these handlers use of the broker."""


class _Refused(Exception):
    pass


def _java_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), unsigned."""
    data = text.encode("utf-16-le")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "little")) & 0xFFFFFFFF
    return h


def _java_order(names: list[str]) -> list[str]:
    """`names` (distinct, in insertion order) as a java.util.HashMap iterates them: by
    bucket of (h ^ h >>> 16) & (capacity - 1), insertion order within a bucket."""
    capacity = 16
    while len(names) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        h = _java_hash(name)
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(names, key=bucket)  # stable: insertion order within a bucket


def _metadata_changed(high: int, low: int) -> bool:
    """Kafka's MetadataVersion.checkIfMetadataChanged for high > low."""
    return any(v in _METADATA_CHANGED for v in range(low + 1, high + 1))


def _invalid(name: str, level: int, message: str) -> _Refused:
    return _Refused(f"Invalid update version {level} for feature {name}. {message}")


def check_update(node_id: int, current_levels: dict[str, int], name: str, level: int,
                 upgrade_type: int) -> R.FeatureLevelRecord | None:
    """The record one update writes (None: nothing to write), or _Refused."""
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        raise _invalid(name, level, "The controller does not support the given upgrade type.")
    current = current_levels.get(name, 0)
    if level < 0:
        raise _invalid(name, level, "A feature version cannot be less than 0.")
    lo, hi = SUPPORTED_FEATURES.get(name, (0, 0))
    if not lo <= level <= hi:
        if hi == 0:
            raise _invalid(name, level, f"Local controller {node_id} does not support this "
                                        "feature.")
        raise _invalid(name, level, f"Local controller {node_id} only supports versions "
                                    f"{lo}-{hi}")
    if level < current and upgrade_type == UPGRADE:
        raise _invalid(name, level, "Can't downgrade the version of this feature without "
                                    "setting the upgrade type to either safe or unsafe "
                                    "downgrade.")
    if level > current and upgrade_type != UPGRADE:
        raise _invalid(name, level, "Can't downgrade to a newer version.")
    if name == METADATA_VERSION:
        if level < current and _metadata_changed(current, level):
            reason = ("Unsafe metadata downgrade is not supported in this version."
                      if upgrade_type == UNSAFE_DOWNGRADE else
                      "Refusing to perform the requested downgrade because it might delete "
                      "metadata information.")
            raise _Refused(f"Unsupported metadata.version downgrade from {current} to "
                           f"{level}. {reason}")
        return R.FeatureLevelRecord(name, level)
    if name == KRAFT_VERSION:
        return None  # only its current level gets here: nothing changes
    if name not in _KNOWN:
        raise _invalid(name, level, f"Feature {name} not found.")
    return R.FeatureLevelRecord(name, level)


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def handle_update_features(self, ctx: RequestContext, req: UpdateFeaturesRequest
                               ) -> dict[str, Any]:
        updates: dict[str, tuple[int, int]] = {}
        for u in req.feature_updates:  # a name given twice: the last one counts (a map)
            # v0's allow_downgrade is not read: an upgrade (the schema's default type)
            updates[u.feature] = (u.max_version_level, u.upgrade_type)

        def answer(code: int, message: str | None) -> dict[str, Any]:
            results = [{"feature": name, "error_code": 0, "error_message": "NONE"}
                       for name in updates] if code == 0 else []
            return {"throttle_time": 0, "error_code": code, "error_message": message,
                    "results": results}

        if self.broker.access.denies(ctx, A.ALTER, A.CLUSTER, A.CLUSTER_NAME):
            # Kafka's message is its internal Request object's toString (docs/differences.md)
            return answer(E.cluster_authorization_failed, None)
        current = finalized_features(self.broker.image)
        records = []
        try:
            for name in _java_order(list(updates)):
                level, upgrade_type = updates[name]
                rec = check_update(self.broker.node_id, current, name, level, upgrade_type)
                if rec is not None:
                    records.append(rec)
        except _Refused as exc:
            return answer(E.invalid_update_version,
                          "The update failed for all features since the following feature "
                          f"had an error: {exc}")
        if records and not req.validate_only:
            try:
                self.broker.controller.commit(records)
            except ControllerError as exc:
                return answer(exc.code, str(exc))
        return answer(0, None)


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(57, 0, 2, typed(UpdateFeaturesRequest, handlers.handle_update_features))


# Kafka 4.4's KafkaApis answers the share-group APIs UNSUPPORTED_VERSION while share.version
# is below 1 (isShareGroupProtocolEnabled), and the KIP-848 consumer-group APIs while
# group.version is below 1 (isConsumerGroupProtocolEnabled); they stay advertised.
_GATED_APIS = {76: "share.version", 77: "share.version", 78: "share.version",
               79: "share.version", 90: "share.version", 91: "share.version",
               92: "share.version", 68: "group.version", 69: "group.version",
               88: "streams.version", 89: "streams.version", 93: "streams.version"}
_UNSUPPORTED_MESSAGE = "The version of API is not supported."


def _refusal(api_key: int, req: Any) -> dict[str, Any]:
    code = E.unsupported_version
    if api_key == 89:
        return {"throttle_time": 0, "groups": [
            {"group_id": g, "error_code": code, "error_message": None, "group_state": "",
             "group_epoch": 0, "assignment_epoch": 0, "topology": None, "members": (),
             "authorized_operations": -2147483648} for g in req.group_ids]}
    if api_key == 88:  # v1's acceptable_recovery_lag keeps its default (-1), v0's is 0
        return {"throttle_time": 0, "error_code": code, "error_message": None,
                "member_id": "", "member_epoch": 0, "heartbeat_interval": 0,
                "task_offset_interval": 0, "endpoint_information_epoch": 0}
    if api_key in (69, 77):
        return {"throttle_time": 0, "groups": [
            {"group_id": g, "error_code": code, "error_message": None, "members": ()}
            for g in req.group_ids]}
    if api_key == 90:
        return {"throttle_time": 0, "groups": [
            {"group_id": g.group_id, "topics": (), "error_code": code, "error_message": None}
            for g in req.groups]}
    if api_key in (91, 92):
        return {"throttle_time": 0, "error_code": code,
                "error_message": _UNSUPPORTED_MESSAGE, "responses": ()}
    if api_key == 93:
        return {"throttle_time": 0, "error_code": code, "error_message": _UNSUPPORTED_MESSAGE}
    if api_key in (78, 79):
        return {"throttle_time": 0, "error_code": code, "error_message": None,
                "acquisition_lock_timeout": 0, "responses": (), "node_endpoints": ()}
    return {"throttle_time": 0, "error_code": code, "error_message": None}


def middleware(broker: Services) -> Middleware:
    """The share-group and consumer-group (KIP-848) handlers, gated: below level 1 of
    their feature they are refused as Kafka's."""

    def gate(entry: ApiEntry) -> Handler | None:
        feature = _GATED_APIS.get(entry.api_key)
        if feature is None:
            return None
        handler, api_key = entry.handler, entry.api_key

        def gated(ctx: RequestContext, req: Any) -> Any:
            if feature_level(broker.image, feature) < 1:
                return _refusal(api_key, req)
            return handler(ctx, req)
        return gated
    return gate
