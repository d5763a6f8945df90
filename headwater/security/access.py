"""The broker's access checks: the request's principal and host against the current
ACLs (`authorizer.Authorizer`), rebuilt whenever the metadata image's ACLs change."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..wire.dispatch import PRINCIPAL, RequestContext
from . import acl as A
from .acl import AclBinding
from .authorizer import Authorizer, ConfigGetter, configured, principal_of

AclSource = Callable[[], Mapping[str, AclBinding]]
"""The current ACLs (the metadata image's: a new mapping after every change)."""


class AccessControl:
    def __init__(self, get: ConfigGetter, acls: AclSource) -> None:
        self._get = get
        self._acls = acls
        #: False unless `authorizer.class.name` is set: every check is then a no-op.
        self.enabled = configured(get)
        self._authorizer: Authorizer | None = None
        self._built_from: object = None

    def authorizer(self) -> Authorizer:
        acls = self._acls()
        if self._authorizer is None or self._built_from is not acls:
            self._authorizer = Authorizer.from_config(acls, self._get)
            self._built_from = acls
        return self._authorizer

    def allowed(self, ctx: RequestContext, op: int, rtype: int, name: str) -> bool:
        if not self.enabled:
            return True
        return self.authorizer().authorize(principal_of(ctx.attrs.get(PRINCIPAL)),
                                           ctx.client_host, op, rtype, name)

    def allowed_any(self, ctx: RequestContext, op: int, rtype: int) -> bool:
        if not self.enabled:
            return True
        return self.authorizer().authorize_any(principal_of(ctx.attrs.get(PRINCIPAL)),
                                               ctx.client_host, op, rtype)

    def operations(self, ctx: RequestContext, rtype: int, name: str) -> int:
        return self.authorizer().operations(principal_of(ctx.attrs.get(PRINCIPAL)),
                                            ctx.client_host, rtype, name)

    def cluster_operations(self, ctx: RequestContext) -> int:
        """The cluster's authorized operations as Kafka reports them (Metadata v8-v10,
        DescribeCluster): 0 unless the principal may DESCRIBE the cluster."""
        if not self.allowed(ctx, A.DESCRIBE, A.CLUSTER, A.CLUSTER_NAME):
            return 0
        return self.operations(ctx, A.CLUSTER, A.CLUSTER_NAME)

    def denies(self, ctx: RequestContext, op: int, rtype: int, name: str) -> bool:
        """True when the authorizer is on and refuses: the handlers' one-line check."""
        return self.enabled and not self.allowed(ctx, op, rtype, name)
