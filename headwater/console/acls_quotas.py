"""The ACLs and quotas page's data: every ACL (the admin `acls list` with no filter,
DescribeAcls over the wire) and every client quota (DescribeClientQuotas with an empty,
non-strict filter). A broker without an authorizer answers SECURITY_DISABLED: shown as
such, not as an error."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..admin import acls as admin_acls
from ..admin import quotas as admin_quotas
from ..admin.groups import AdminError
from .connection import Target


@dataclass(frozen=True)
class Quota:
    entity: str
    key: str
    value: float | int


def acl_args(target: Target, **given: Any) -> Any:
    """The namespace `acls list|delete` take, every filter open unless `given`."""
    base: dict[str, Any] = {"json": True, "allow_principal": [], "deny_principal": [],
                            "principal": [], "operation": [], "host": None, "topic": [],
                            "group": [], "transactional_id": [], "cluster": False,
                            "resource_pattern_type": None}
    base.update(given)
    return target.args(**base)


def acls(target: Target) -> tuple[list[dict[str, str]], str | None]:
    """(ACL rows, why there are none: e.g. no authorizer)."""
    try:
        return json.loads(admin_acls.cmd_list(acl_args(target))), None
    except AdminError as exc:
        return [], str(exc)


def quotas(target: Target) -> list[Quota]:
    with target.client() as raw:
        resp = raw.request(48, 1, {"components": [], "strict": False})
    if int(resp.error_code):
        raise AdminError(f"DescribeClientQuotas: {resp.error_code.name}")
    out = []
    for e in resp.entries or ():
        entity = tuple(sorted((c.entity_type, c.entity_name) for c in e.entity))
        for v in e.values:
            out.append(Quota(admin_quotas.label(entity), v.key,
                             admin_quotas._number(v.value)))
    return sorted(out, key=lambda q: (q.entity, q.key))
