"""Tests use the package's own raw wire client; on a cluster's bootstrap port
(`--storage=cluster`) one that routes each request as a client would (routed_client.py)."""

from __future__ import annotations

from typing import Any

from headwater.wire.client import RawClient as _PlainClient
from headwater.wire.client import encode_request

from .routed_client import RoutedClient, routed

__all__ = ["RawClient", "encode_request"]


class RawClient(_PlainClient):
    def __new__(cls, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        if cls is RawClient and routed(port):
            return RoutedClient(host, port, *args, **kwargs)
        return super().__new__(cls)
