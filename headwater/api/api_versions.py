"""ApiVersions (key 18): advertises exactly the dispatch table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..wire.dispatch import Dispatcher, RequestContext

if TYPE_CHECKING:
    from ..broker import Broker


def register(dispatcher: Dispatcher, broker: Broker) -> None:
    def handle(ctx: RequestContext, req: Any) -> dict:
        return {
            "error_code": 0,
            "api_keys": [{"api_key": e.api_key, "min_version": e.min_version,
                          "max_version": e.max_version} for e in dispatcher.entries()],
            "throttle_time": 0,
        }

    dispatcher.register(18, 0, 4, handle)
