"""Tests use the package's own raw wire client."""

from headwater.wire.client import RawClient, encode_request

__all__ = ["RawClient", "encode_request"]
