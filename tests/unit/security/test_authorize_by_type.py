"""`Authorizer.authorize_any`, Kafka's default `authorizeByResourceType` (which its
StandardAuthorizer keeps): what lets an idempotent producer without IDEMPOTENT_WRITE
have a producer id (KIP-679: WRITE on some topic)."""

from __future__ import annotations

import pytest

from headwater.security import acl as A
from headwater.security.acl import AclBinding
from headwater.security.authorizer import Authorizer

ALICE = "User:alice"


def acl(name: str, permission: int = A.ALLOW, op: int = A.WRITE,
        pattern: int = A.LITERAL, principal: str = ALICE) -> AclBinding:
    return AclBinding(A.TOPIC, name, pattern, principal, "*", op, permission)


@pytest.mark.parametrize(("acls", "allow_if_no_acl", "allowed"), [
    ([], True, True),  # no ACL names the probe: allow.everyone.if.no.acl.found decides
    ([], False, False),
    # ACLs on other topics, none for WRITE: still allowed when everyone is
    # (the probe "hardcode" has none); Kafka allowed this, headwater once refused it
    ([acl("orders", op=A.READ)], True, True),
    ([acl("orders", op=A.READ)], False, False),
    ([acl("orders")], False, True),
    ([acl("orders", op=A.ALL)], False, True),
    ([acl("orders", principal="User:*")], False, True),
    ([acl("orders", principal="User:bob")], False, False),
    ([acl("orders"), acl("orders", A.DENY)], False, False),
    ([acl("orders"), acl("ord", A.DENY, pattern=A.PREFIXED)], False, False),
    ([acl("ord", pattern=A.PREFIXED), acl("orders", A.DENY)], False, True),
    ([acl("orders"), acl("*", A.DENY)], True, False),
    ([acl("*")], False, True),
])
def test_write_on_some_topic(acls: list[AclBinding], allow_if_no_acl: bool,
                             allowed: bool) -> None:
    authorizer = Authorizer(acls, allow_if_no_acl=allow_if_no_acl)
    assert authorizer.authorize_any(ALICE, "127.0.0.1", A.WRITE, A.TOPIC) is allowed


def test_super_users_may_always() -> None:
    authorizer = Authorizer([acl("*", A.DENY)], super_users=[ALICE])
    assert authorizer.authorize_any(ALICE, "127.0.0.1", A.WRITE, A.TOPIC)
