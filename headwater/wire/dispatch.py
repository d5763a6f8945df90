"""The table api_key -> handler, and the context each handler receives.

Each handler declares the version range it implements; that table is also what
ApiVersions advertises, so the broker never offers a version nobody wrote. A handler may
also accept a newer version it does not advertise (`accepted_max`), as Kafka does for
Fetch v18: Kafka 4.3 advertises Fetch up to 17 but serves 18, and
`kafka-replica-verification` sends 18 without looking at ApiVersions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .codec import upgrade

# A handler returns (or its coroutine resolves to) a dict tree or kio object (encoded by
# `codec.encode_response`), the body as bytes, the body as a list of buffers (encoded by
# hand, e.g. `api/share_wire.py`), or None for no response.
Handler = Callable[["RequestContext", Any], "Awaitable[Any] | Any"]
_R = TypeVar("_R")


def typed(cls: type[_R], handler: Callable[[RequestContext, _R], Any],
          changes: Callable[[Any], Mapping[str, Any] | None] | None = None) -> Handler:
    """`handler` given every version's request as `cls` (the newest version's kio class:
    `codec.upgrade`); `changes` maps an older version's fields whose meaning moved
    (LeaveGroup v0-2's one member_id, v3's members)."""
    def handle(ctx: RequestContext, req: Any) -> Any:
        return handler(ctx, upgrade(cls, req, None if changes is None else changes(req)))
    handle.__qualname__ = getattr(handler, "__qualname__", "handler")
    handle.request_class = cls  # type: ignore[attr-defined]  # ApiEntry.request_class
    handle.changes = changes  # type: ignore[attr-defined]
    return handle


# RequestContext.attrs keys the server and handlers share:
# a time.monotonic() deadline until which the server reads nothing more from the
# connection (quota throttling, KIP-219);
MUTE_UNTIL = "mute_until"
# True: the server closes the connection once this response is out (failed SASL);
CLOSE_AFTER_RESPONSE = "close_after_response"
# the listener the connection came in on; its SaslSession on SASL listeners; the
# authenticated principal (a SASL user, or a TLS client certificate's subject).
LISTENER = "listener"
SASL_SESSION = "sasl"
PRINCIPAL = "principal"


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    connection_id: int
    # Per-connection scratch space (e.g. SASL state later); handlers may use it.
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ApiEntry:
    api_key: int
    min_version: int
    max_version: int
    handler: Handler
    # The newest version served; above max_version only for versions Kafka also serves
    # without advertising them.
    accepted_max: int = -1
    #: The kio class every version is read as (`typed`), None for a handler that reads
    #: each version's own; kept when middleware wraps the handler.
    request_class: type | None = None
    #: `typed`'s mapping of fields whose meaning moved between versions.
    changes: Callable[[Any], Mapping[str, Any] | None] | None = None

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= max(self.max_version, self.accepted_max)


class Dispatcher:
    """Maps api keys to handlers; the single source of advertised versions."""

    def __init__(self) -> None:
        self._entries: dict[int, ApiEntry] = {}

    def register(self, api_key: int, min_version: int, max_version: int,
                 handler: Handler, accepted_max: int = -1) -> None:
        self._entries[api_key] = ApiEntry(api_key, min_version, max_version, handler,
                                          accepted_max,
                                          getattr(handler, "request_class", None),
                                          getattr(handler, "changes", None))

    def wrap(self, middleware: Middleware) -> None:
        """Wrap every entry's handler in `middleware` (the entries it returns None for
        keep theirs): applied once per concern, in the order `api.MIDDLEWARE` lists."""
        for key, entry in list(self._entries.items()):
            handler = middleware(entry)
            if handler is not None:
                self._entries[key] = dataclasses.replace(entry, handler=handler)

    def get(self, api_key: int) -> ApiEntry | None:
        return self._entries.get(api_key)

    def entries(self) -> list[ApiEntry]:
        return [self._entries[k] for k in sorted(self._entries)]


Middleware = Callable[[ApiEntry], "Handler | None"]
"""A cross-cutting concern: the handler wrapping one entry's, None to leave it as it is."""
