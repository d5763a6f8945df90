"""A request not forwarded in time is answered as Kafka's ForwardingManager answers it:
the request's own response with the error on every entry it named."""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest
from kio.serial import entity_reader

from headwater.api.forward_errors import error_response, forwarded_keys
from headwater.api.forwarding import FORWARDED
from headwater.wire.codec import build, encode_response, response_class
from headwater.wire.schemas import load_request_schema

TIMED_OUT = 7
TOPIC_ID = uuid.UUID(int=7)
SAMPLES: dict[int, dict[str, Any]] = {
    19: {"topics": [{"name": "a"}, {"name": "b"}]},
    20: {"topic_names": ["a", "b"], "topics": [{"name": "a", "topic_id": TOPIC_ID},
                                               {"name": "b", "topic_id": TOPIC_ID}]},
    30: {"creations": [{"resource_name": "t"}, {"resource_name": "u"}]},
    31: {"filters": [{}, {}]},
    33: {"resources": [{"resource_type": 2, "resource_name": "t"},
                       {"resource_type": 4, "resource_name": "1"}]},
    37: {"topics": [{"name": "a", "count": 3}, {"name": "b", "count": 2}]},
    44: {"resources": [{"resource_type": 2, "resource_name": "t"},
                       {"resource_type": 4, "resource_name": "1"}]},
    49: {"entries": [{"entity": [{"entity_type": "user", "entity_name": "alice"}]},
                     {"entity": [{"entity_type": "client-id", "entity_name": None}]}]},
    51: {"deletions": [{"name": "alice"}], "upsertions": [{"name": "bob"}, {"name": "alice"}]},
}


def _versions(api_key: int) -> list[int]:
    found = []
    for version in range(20):
        try:
            load_request_schema(api_key, version)
        except Exception:
            continue
        found.append(version)
    return found


CASES = [(k, v) for k in sorted(FORWARDED) for v in _versions(k)]


def _codes(value: Any) -> list[int]:
    """Every error code in a decoded response, depth first."""
    found = []
    for name in getattr(value, "__dataclass_fields__", {}):
        field = getattr(value, name)
        if name == "error_code":
            found.append(int(field))
        elif isinstance(field, tuple):
            for item in field:
                found += _codes(item)
    return found


def test_every_forwarded_api_has_an_error_response() -> None:
    assert forwarded_keys() == FORWARDED


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_the_error_is_on_every_entry_the_request_named(api_key: int, version: int) -> None:
    request = build(load_request_schema(api_key, version), SAMPLES.get(api_key, {}))
    body = error_response(api_key, version, request, TIMED_OUT, "not forwarded in 10 s")
    out = io.BytesIO()
    encode_response(api_key, version, body, out)
    decoded = entity_reader(response_class(api_key, version))(out.getvalue(), 0)
    decoded = decoded[0] if isinstance(decoded, tuple) else decoded
    codes = _codes(decoded)
    entries = {19: 2, 20: 2, 30: 2, 31: 2, 33: 2, 37: 2, 44: 2, 49: 2, 51: 2}
    top = 1 if api_key in (55, 57, 64, 80, 81, 94) else 0
    assert codes == [TIMED_OUT] * (entries.get(api_key, 0) + top)
    if api_key == 51:
        assert [r.user for r in decoded.results] == ["alice", "bob"]
    if api_key in (19, 37):
        names = decoded.topics if api_key == 19 else decoded.results
        assert [t.name for t in names] == ["a", "b"]
