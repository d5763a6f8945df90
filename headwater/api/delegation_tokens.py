"""CreateDelegationToken (38), RenewDelegationToken (39), ExpireDelegationToken (40),
DescribeDelegationToken (41): refused the way Kafka refuses them without
`delegation.token.secret.key`.

headwater has no delegation tokens. Kafka answers these APIs on a connection that could
never use a token (PLAINTEXT, or TLS without a client certificate) with
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, and elsewhere, with tokens not configured, with
DELEGATION_TOKEN_AUTH_DISABLED. Answering them (rather than not advertising them) makes
`kafka-delegation-tokens` print Kafka's error instead of "The node does not support".
"""

from __future__ import annotations

import datetime
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..wire.dispatch import LISTENER, PRINCIPAL, Dispatcher, RequestContext
from .services import HasListeners

# -1 on the wire: the timestamps of Kafka's error responses.
NO_TIMESTAMP = datetime.datetime.fromtimestamp(-0.001, datetime.UTC)


class Services(HasListeners, Protocol):
    """What these handlers use of the broker."""


def refusal(protocol: str, ctx: RequestContext) -> int:
    """Kafka's KafkaApis.allowTokenRequests, then the disabled token manager."""
    if protocol == "PLAINTEXT" or (protocol == "SSL" and not ctx.attrs.get(PRINCIPAL)):
        return E.delegation_token_request_not_allowed
    return E.delegation_token_auth_disabled


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker
        self.protocols = {listener.name: listener.protocol for listener in broker.listeners}

    def refused(self, ctx: RequestContext) -> int:
        return refusal(self.protocols.get(ctx.attrs.get(LISTENER, ""), "PLAINTEXT"), ctx)

    def create(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": self.refused(ctx), "principal_type": "",
                "principal_name": "", "token_requester_principal_type": "",
                "token_requester_principal_name": "", "issue_timestamp": NO_TIMESTAMP,
                "expiry_timestamp": NO_TIMESTAMP, "max_timestamp": NO_TIMESTAMP,
                "token_id": "", "hmac": b""}

    def renew_or_expire(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": self.refused(ctx),
                "expiry_timestamp": NO_TIMESTAMP}

    def describe(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": self.refused(ctx), "tokens": []}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)
    dispatcher.register(38, 1, 3, handlers.create)
    dispatcher.register(39, 1, 2, handlers.renew_or_expire)
    dispatcher.register(40, 1, 2, handlers.renew_or_expire)
    dispatcher.register(41, 1, 3, handlers.describe)
