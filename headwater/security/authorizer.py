"""Kafka's StandardAuthorizer: may this principal, from this host, do this operation on
this resource? Sans-IO: built from the metadata image's ACLs and the broker's config.

Off unless `authorizer.class.name` is set (as in Kafka); then, for a request:
- a principal in `super.users` may do anything;
- the ACLs that apply to the resource are the LITERAL ones naming it, the LITERAL "*"
  ones, and the PREFIXED ones whose name starts the resource's name;
- among those whose principal (or `User:*`) and host (or "*", or a CIDR range holding
  the client's address, Kafka 4.4's KIP-1276) match, a DENY for the
  operation (or ALL) wins; otherwise an ALLOW for it (or ALL, or, for DESCRIBE, an
  ALLOW for READ / WRITE / DELETE / ALTER; for DESCRIBE_CONFIGS, ALTER_CONFIGS) allows;
- if no ACL applies to the resource at all, `allow.everyone.if.no.acl.found` decides
  (default false: denied); if some do but none matched, denied.
Principals are Kafka's strings: `User:<SASL user or TLS subject>`, `User:ANONYMOUS`
without authentication.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from . import acl as A
from .acl import AclBinding

ANONYMOUS = "User:ANONYMOUS"
_IMPLIES_DESCRIBE = frozenset((A.DESCRIBE, A.READ, A.WRITE, A.DELETE, A.ALTER))
_IMPLIES_DESCRIBE_CONFIGS = frozenset((A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS))


ConfigGetter = Callable[[str], "str | None"]


def configured(get: ConfigGetter) -> bool:
    """Whether ACLs are on: `authorizer.class.name` set, as in Kafka."""
    return bool((get("authorizer.class.name") or "").strip())


def principal_of(name: str | None) -> str:
    """The Kafka principal of an authenticated name (None: not authenticated)."""
    return f"User:{name}" if name else ANONYMOUS


def _result(acl: AclBinding, principal: str, host: str, op: int) -> bool | None:
    """True (allow) / False (deny) when `acl` applies to the request, else None."""
    if acl.principal != principal and acl.principal != A.WILDCARD_PRINCIPAL:
        return None
    if acl.host != A.WILDCARD and acl.host != host and not A.host_matches(acl.host, host):
        return None
    if acl.operation != A.ALL:
        if acl.permission == A.ALLOW:
            if op == A.DESCRIBE:
                if acl.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif op == A.DESCRIBE_CONFIGS:
                if acl.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif op != acl.operation:
                return None
        elif op != acl.operation:
            return None
    return acl.permission == A.ALLOW


class Authorizer:
    """Decisions over one set of ACLs (rebuilt when the image's ACLs change)."""

    def __init__(self, acls: Iterable[AclBinding], super_users: Iterable[str] = (),
                 allow_if_no_acl: bool = False, enabled: bool = True) -> None:
        self.enabled = enabled
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._literal: dict[tuple[int, str], list[AclBinding]] = {}
        self._prefixed: dict[int, list[AclBinding]] = {}
        self._by_type: dict[int, list[AclBinding]] = {}
        for b in acls:
            if b.pattern_type == A.PREFIXED:
                self._prefixed.setdefault(b.resource_type, []).append(b)
            else:
                self._literal.setdefault((b.resource_type, b.resource_name), []).append(b)
            self._by_type.setdefault(b.resource_type, []).append(b)

    @classmethod
    def from_config(cls, acls: Mapping[str, AclBinding], get: ConfigGetter) -> Authorizer:
        """`get(key)` reads a broker config (BrokerConfig.get)."""
        users = get("super.users") or ""
        allow = get("allow.everyone.if.no.acl.found") or "false"
        return cls(acls.values(), [u.strip() for u in users.split(";") if u.strip()],
                   allow.strip().lower() == "true", enabled=configured(get))

    def applicable(self, rtype: int, name: str) -> Iterable[AclBinding]:
        yield from self._literal.get((rtype, name), ())
        if name != A.WILDCARD:
            yield from self._literal.get((rtype, A.WILDCARD), ())
        for b in self._prefixed.get(rtype, ()):
            if name.startswith(b.resource_name):
                yield b

    def authorize(self, principal: str, host: str, op: int, rtype: int, name: str) -> bool:
        if not self.enabled or principal in self.super_users:
            return True
        found_acls = allowed = False
        for b in self.applicable(rtype, name):
            found_acls = True
            result = _result(b, principal, host, op)
            if result is False:
                return False
            allowed = allowed or result is True
        return allowed or (not found_acls and self.allow_if_no_acl)

    def authorize_any(self, principal: str, host: str, op: int, rtype: int) -> bool:
        """Whether some resource of the type may be operated on (an idempotent producer
        needs WRITE on some topic, KIP-679), as Kafka's default
        `Authorizer.authorizeByResourceType`: allowed on a resource no ACL names (its
        "hardcode" probe, so `allow.everyone.if.no.acl.found` counts), else by an ALLOW
        for the principal (or User:*) that no DENY overrides: a LITERAL "*" DENY
        overrides every one, a LITERAL DENY its own name, a PREFIXED DENY the names it
        starts."""
        if self.authorize(principal, host, op, rtype, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allows: list[AclBinding] = []
        for b in self._by_type.get(rtype, ()):
            if b.host not in (host, A.WILDCARD) or \
                    b.principal not in (principal, A.WILDCARD_PRINCIPAL) or \
                    b.operation not in (op, A.ALL):
                continue
            if b.permission == A.DENY:
                if b.pattern_type == A.LITERAL and b.resource_name == A.WILDCARD:
                    return False
                (deny_prefixed if b.pattern_type == A.PREFIXED else deny_literal).add(
                    b.resource_name)
            elif b.permission == A.ALLOW:
                if b.pattern_type == A.LITERAL and b.resource_name == A.WILDCARD:
                    return True
                allows.append(b)
        for b in allows:
            name = b.resource_name
            if b.pattern_type == A.LITERAL and name in deny_literal:
                continue
            if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                return True
        return False

    def operations(self, principal: str, host: str, rtype: int, name: str) -> int:
        """Kafka's authorized-operations bit field for one resource (bit = op code)."""
        if not self.enabled:
            return sum(1 << op for op in A.SUPPORTED[rtype])
        return sum(1 << op for op in A.SUPPORTED[rtype]
                   if self.authorize(principal, host, op, rtype, name))

