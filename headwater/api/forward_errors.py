"""The answer a broker gives to a metadata change it could not forward to the controller.

Kafka's ForwardingManager answers a forwarded request that timed out with the request's
own error response carrying REQUEST_TIMED_OUT, and one the controller refused at the
envelope with UNKNOWN_SERVER_ERROR (`AbstractRequest.getErrorResponse`): the error on
every entry the request named, so each client's admin call fails or retries as it would
against Kafka, instead of the connection closing under it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_Builder = Callable[[Any, int, int, str], dict[str, Any]]


def _each(field: str, entries: Callable[[Any], Any],
          entry: Callable[[Any], dict[str, Any]]) -> _Builder:
    """A response with one entry (`field`) per entry of the request, each carrying it."""
    def build(req: Any, _version: int, code: int, message: str) -> dict[str, Any]:
        return {field: [{**entry(e), "error_code": code, "error_message": message}
                        for e in entries(req) or ()]}
    return build


def _top(req: Any, _version: int, code: int, message: str) -> dict[str, Any]:
    return {"error_code": code, "error_message": message}


def _delete_topics(req: Any, version: int, code: int, message: str) -> dict[str, Any]:
    if version < 6:
        return {"responses": [{"name": name, "error_code": code, "error_message": message}
                              for name in req.topic_names or ()]}
    return {"responses": [{"name": t.name, "topic_id": t.topic_id, "error_code": code,
                           "error_message": message} for t in req.topics or ()]}


def _scram_users(req: Any, _version: int, code: int, message: str) -> dict[str, Any]:
    users = dict.fromkeys(u.name for u in (*(req.deletions or ()), *(req.upsertions or ())))
    return {"results": [{"user": user, "error_code": code, "error_message": message}
                        for user in users]}


def _resource(r: Any) -> dict[str, Any]:
    return {"resource_type": r.resource_type, "resource_name": r.resource_name}


_BUILDERS: dict[int, _Builder] = {
    19: _each("topics", lambda r: r.topics,  # CreateTopics
              lambda t: {"name": t.name, "num_partitions": -1, "replication_factor": -1}),
    20: _delete_topics,
    30: _each("results", lambda r: r.creations, lambda _c: {}),  # CreateAcls
    31: _each("filter_results", lambda r: r.filters,  # DeleteAcls
              lambda _f: {"matching_acls": []}),
    33: _each("responses", lambda r: r.resources, _resource),  # AlterConfigs
    37: _each("results", lambda r: r.topics, lambda t: {"name": t.name}),  # CreatePartitions
    44: _each("responses", lambda r: r.resources, _resource),  # IncrementalAlterConfigs
    49: _each("entries", lambda r: r.entries, lambda e: {  # AlterClientQuotas
        "entity": [{"entity_type": x.entity_type, "entity_name": x.entity_name}
                   for x in e.entity]}),
    51: _scram_users,
    57: _top,  # UpdateFeatures (the feature results empty, as Kafka answers)
    55: _top,  # DescribeQuorum
    64: _top,  # UnregisterBroker
    80: _top,  # AddRaftVoter
    81: _top,  # RemoveRaftVoter
    94: _top,  # UnregisterController
}


def error_response(api_key: int, version: int, request: Any, code: int,
                   message: str) -> dict[str, Any]:
    """`request`'s response with `code` on every entry it named (KeyError for an API
    that is not forwarded)."""
    return _BUILDERS[api_key](request, version, code, message)


def forwarded_keys() -> frozenset[int]:
    return frozenset(_BUILDERS)
