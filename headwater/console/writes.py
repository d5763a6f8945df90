"""The console's write actions, allowed only with `--allow-writes`: create a topic (the
admin `topic create`) and delete one ACL (the admin `acls delete` with that ACL as the
exact filter). Each returns the admin command's one-line answer."""

from __future__ import annotations

import json

from confluent_kafka.admin import AclOperation, AclPermissionType, ResourcePatternType

from ..admin import acls as admin_acls
from ..admin import topics as admin_topics
from .acls_quotas import acl_args
from .connection import Target

RESOURCE_OPTION = {"TOPIC": "topic", "GROUP": "group", "TRANSACTIONAL_ID": "transactional_id"}


def create_topic(target: Target, name: str, partitions: int) -> str:
    return admin_topics.cmd_create(target.args(name=name, partitions=partitions, replicas=-1,
                                               config=[], json=False))


def delete_acl(target: Target, principal: str, permission: str, operation: str, host: str,
               resource_type: str, resource_name: str, pattern: str) -> str:
    """Delete the ACL these fields (as the ACL table shows them) name, and only it."""
    op = next(name for name, value in admin_acls.OPERATIONS.items()
              if value == AclOperation[operation])
    given: dict[str, object] = {
        "allow_principal" if AclPermissionType[permission] == AclPermissionType.ALLOW
        else "deny_principal": [principal],
        "operation": [op], "host": host,
        "resource_pattern_type": ResourcePatternType[pattern].name.lower()}
    if resource_type == "CLUSTER":
        given["cluster"] = True
    else:
        given[RESOURCE_OPTION[resource_type]] = [resource_name]
    deleted = admin_acls.cmd_delete(acl_args(target, **given))
    return f"deleted {len(json.loads(deleted))} ACL(s)"
